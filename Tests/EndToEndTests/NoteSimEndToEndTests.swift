import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The real `notes-sim` binary against a real `notesyncd` (SQLite, its own data directory, a free port), which the
/// simulation's restart steps kill with SIGKILL and start again through `--restart-command`.
@Suite(
    "notes-sim against a real notesyncd", .serialized,
    .enabled(
        if: NotesE2E.binariesExist && FileManager.default.isExecutableFile(atPath: NotesE2E.simBinary.path),
        "build notes-sim and notesyncd first (swift build)"))
struct NoteSimEndToEndTests {
    /// The longest a run may take before the test kills it: a guard against hangs only (a healthy run of this size
    /// takes well under a minute in a debug build).
    static let hangGuard: TimeInterval = 300

    @Test func sweepWithFaultsAndDaemonRestartsFindsNoViolation() async throws {
        // Small batches and pages, as the in-process simulation uses: syncs take several requests. A port outside
        // the ephemeral range, so that nothing else takes it while the daemon is down.
        var started: NotesE2EServer?
        var failures: [String] = []
        for port in DaemonProcess.restartablePorts() where started == nil {
            do { started = try await NotesE2EServer.start(port: port, extraArguments: Self.limits) } catch { failures.append("\(port): \(error)") }
        }
        let server = try #require(started, "no port worked: \(failures)")
        let pidFile = server.directory.appendingPathComponent("daemon.pid")
        defer {
            // The daemon running now is the last one the restart command started (or the first).
            if let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                kill(pid, SIGKILL)
            }
            server.stop()
        }
        try "\(server.daemon.child.pid)\n".write(to: pidFile, atomically: true, encoding: .utf8)
        let port = try #require(server.url.split(separator: ":").last.flatMap { Int($0) })
        let log = server.directory.appendingPathComponent("restarts.log")
        let script = server.directory.appendingPathComponent("restart.sh")
        try Self.restartScript(port: port, dataDirectory: server.directory.appendingPathComponent("data"), pidFile: pidFile, log: log)
            .write(to: script, atomically: true, encoding: .utf8)
        guard chmod(script.path, 0o755) == 0 else { throw NotesE2EError("chmod failed") }

        let run = try await Self.runSimulation([
            "--server", server.url, "--restart-command", script.path,
            "--seeds", "1..4", "--steps", "150", "--faults", "0.1", "--json",
        ])
        try #require(run.status == 0, "\(run)")
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "not one JSON object: \(run)")
        #expect(summary["runs"] as? Int == 4)
        #expect(summary["violations"] as? Int == 0)
        let tagSteps = try #require(summary["tag and flag changes"] as? Int)
        #expect((summary["steps"] as? Int).map { $0 >= 600 && $0 <= 600 + 4 * 150 } == true, "600 steps and the tag steps on top")
        #expect(tagSteps > 0)
        let restarts = try #require(summary["server restarts"] as? Int)
        #expect(restarts > 0, "the schedules restart the daemon")
        // Every restart step really killed a daemon and started a new one, which answered again.
        let daemons = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").count ?? 0
        #expect(daemons == restarts, "\(daemons) daemons started for \(restarts) restart steps")
        #expect((summary["syncs"] as? Int ?? 0) > 0 && (summary["sign-ins"] as? Int ?? 0) > 0)
        #expect((summary["faults injected"] as? Int ?? 0) > 0)
        // Issue 19: device 0 watches (the default --watchers 1): its waiting pulls were held by the daemon, woke it
        // into syncs, and met faults on the feed (a restart while waiting among them).
        #expect((summary["watch iterations"] as? Int ?? 0) > 0 && (summary["syncs run by watches"] as? Int ?? 0) > 0)
        #expect((summary["feed faults"] as? Int ?? 0) > 0)
    }

    static let limits = ["--max-batch", "32", "--max-page", "8"]

    /// A restart command: SIGKILL the daemon named in `pidFile`, wait until it is gone, start a new one on the same
    /// port and data directory in the background, record its process ID, and append a line to `log`.
    static func restartScript(port: Int, dataDirectory: URL, pidFile: URL, log: URL) -> String {
        """
        #!/bin/sh
        set -eu
        old=$(cat '\(pidFile.path)')
        kill -9 "$old" 2>/dev/null || true
        # Gone, or a zombie nobody has reaped yet: either way its sockets are closed.
        while [ -e /proc/"$old" ] && ! grep -q '^State:[[:space:]]*Z' /proc/"$old"/status 2>/dev/null; do sleep 0.01; done
        '\(NotesE2E.daemonBinary.path)' --port \(port) --data-dir '\(dataDirectory.path)' --bcrypt-cost 4 --log-level warning --sign-up open \(limits.joined(separator: " ")) \\
            >>'\(log.path).daemon' 2>&1 </dev/null &
        echo $! > '\(pidFile.path)'
        echo "restarted $old as $!" >> '\(log.path)'

        """
    }

    /// Runs `notes-sim` with its output in files (a daemon started by a restart could hold a pipe open), killing
    /// it if it outlives ``hangGuard``.
    static func runSimulation(_ arguments: [String]) async throws -> NotesRun {
        let scratch = try NotesE2E.temporaryDirectory("sim")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outputFile = scratch.appendingPathComponent("stdout")
        let errorFile = scratch.appendingPathComponent("stderr")
        let child = try Subprocess.spawn(
            NotesE2E.simBinary.path, arguments, stdout: .file(outputFile.path), stderr: .file(errorFile.path))
        let status = await child.waitForExit(timeLimit: .seconds(hangGuard))
        let stdout = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        var stderr = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
        if status == .timedOut { stderr = "KILLED: still running after \(Int(hangGuard)) s\n" + stderr }
        return NotesRun(status: status == .timedOut ? -1 : status.code, stdout: stdout, stderr: String(stderr.suffix(4000)))
    }
}
