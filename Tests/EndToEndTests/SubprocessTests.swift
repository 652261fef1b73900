import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The process runner of the tests and the simulation (`notes-sim --restart-command` runs through it).
@Suite struct SubprocessTests {
    /// A restart command starts the daemon in the background: the runner must return when the shell exits, while
    /// what it started still runs, and hand it none of this process's descriptors beyond 0–2.
    @Test func returnsWhenTheShellExitsWhileWhatItStartedKeepsRunning() async throws {
        try await withTemporaryDirectory("shell") { directory in
            let pidFile = directory.appendingPathComponent("pid").path
            // The background process lives 120 s: a runner that waited for it would return only after it died.
            let child = try Subprocess.spawn("/bin/sh", ["-c", "sleep 120 & echo $! > '\(pidFile)'"], newProcessGroup: true)
            #expect(await child.waitForExit(timeLimit: .seconds(600)) == .exited(0))
            let pid = try #require(Int32(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            defer { kill(pid, SIGKILL) }
            #expect(kill(pid, 0) == 0, "the background process still runs")
            let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").sorted()
            #expect(descriptors == ["0", "1", "2"])
            #expect(getpgid(pid) != getpgrp(), "it runs in a process group of its own")
        }
    }

    /// A test that fails before stopping its daemon leaves none running: the daemon goes with its last reference.
    @Test func aDaemonNobodyStoppedGoesWithItsTest() async throws {
        try await withTemporaryDirectory("forgotten") { directory in
            var daemon: DaemonProcess? = try await DaemonProcess.start(
                ["--port", "0", "--data-dir", directory.path], log: directory.appendingPathComponent("notesyncd.log"))
            let child = try #require(daemon?.child)
            daemon = nil
            #expect(await child.waitForExit(timeLimit: .seconds(30)) == .signaled(SIGKILL))
        }
    }

    @Test func reportsTheExitStatusAndKillsACommandPastItsLimit() async throws {
        func shell(_ command: String, _ limit: Duration = .seconds(600)) async throws -> Termination {
            try await Subprocess.spawn("/bin/sh", ["-c", command]).waitForExit(timeLimit: limit)
        }
        #expect(try await shell("exit 3") == .exited(3))
        #expect(try await shell("kill -TERM $$") == .signaled(SIGTERM))
        #expect(try await shell("exec sleep 600", .milliseconds(100)) == .timedOut)
    }

    @Test func runCollectsStandardOutputAndErrorTogether() async throws {
        let (status, output) = try await Subprocess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 4"])
        #expect(status == .exited(4))
        #expect(output == "out\nerr\n")
    }

    @Test func readsAChildsOutputUntilALine() async throws {
        // `exec`: a `sleep` forked by the shell would outlive the SIGKILL below and hold the test runner's stderr open
        // for ten minutes, and `swift test` waits for that pipe to close.
        let child = try Subprocess.spawn("/bin/sh", ["-c", "echo one; echo 'ready at 42'; exec sleep 600"], stdout: .pipe)
        let port = try await Subprocess.blocking { try child.readLine { $0.hasPrefix("ready at ") ? Int($0.dropFirst(9)) : nil } }
        #expect(port == 42)
        child.signal(SIGKILL)
        #expect(await child.waitForExit() == .signaled(SIGKILL))
    }
}
