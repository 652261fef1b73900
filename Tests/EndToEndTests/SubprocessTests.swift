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

    /// A descriptor handed over (a pseudo-terminal's slave, say) is the child's standard stream, and the child holds
    /// nothing else: its reader sees end of file as soon as the child exits.
    @Test func aDescriptorHandedOverIsTheChildsStreamAndNothingElseLeaks() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        // No close-on-exec on purpose: the child must get the writing end only as its standard output.
        let child = try Subprocess.spawn("/bin/sh", ["-c", "echo hi; ls /proc/$$/fd"], stdout: .descriptor(ends[1]))
        close(ends[1])
        let reading = ends[0]
        let output = try await Subprocess.blocking {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while case let count = read(reading, &buffer, buffer.count), count > 0 { bytes += buffer[0..<count] }
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(await child.waitForExit(timeLimit: .seconds(600)) == .exited(0))
        #expect(output == "hi\n0\n1\n2\n")
    }

    /// `stopBlocking` (the tests' `defer` blocks) asks with SIGTERM and does not wait past its grace for a child that
    /// ignores it.
    @Test func stopBlockingTerminatesAndKillsAChildThatIgnoresTheAsking() async throws {
        let polite = try Subprocess.spawn("/bin/sh", ["-c", "echo ready; exec sleep 600"], stdout: .pipe)
        _ = try await Subprocess.blocking { try polite.readLine { $0 == "ready" ? true : nil } }
        #expect(try await Subprocess.blocking { polite.stopBlocking(grace: .seconds(600)) } == .signaled(SIGTERM))

        let deaf = try Subprocess.spawn("/bin/sh", ["-c", "trap '' TERM; echo ready; exec sleep 600"], stdout: .pipe)
        _ = try await Subprocess.blocking { try deaf.readLine { $0 == "ready" ? true : nil } }
        #expect(try await Subprocess.blocking { deaf.stopBlocking(grace: .milliseconds(200)) } == .timedOut)
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
