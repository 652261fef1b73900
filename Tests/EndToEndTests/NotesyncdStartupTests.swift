import Foundation
import Testing
import TestSupport

/// Issue 28, item 2, with the real binary: a daemon prints its ready line only once every listener is bound. A
/// listener it cannot bind is named with its address on one stderr line, exit 1, and no ready line. (Failed before:
/// with the metrics address in use it printed `notesyncd listening on http://...`, then exited with
/// `notesyncd: bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`; the sync port in use gave that
/// same line, naming neither the listener nor the address.)
@Suite(.enabled(if: Binaries.exist(Binaries.notesyncd), "notesyncd is not built"))
struct NotesyncdStartupTests {
    @Test(arguments: ["metrics address", "address"])
    func aListenerInUseIsNamedAndNothingIsAnnounced(_ listener: String) async throws {
        try await withTemporaryDirectory("listeners") { directory in
            // A running daemon holds a port: the second daemon's metrics endpoint or its sync port asks for it.
            let first = try await DaemonProcess.start(
                ["--port", "0", "--data-dir", directory.appendingPathComponent("first").path],
                log: directory.appendingPathComponent("first.log"))
            let taken = "127.0.0.1:\(first.port)"
            let listeners = listener == "address" ? ["--port", "\(first.port)"] : ["--port", "0", "--metrics-address", taken]
            let (status, output) = try await Subprocess.run(
                Binaries.notesyncd.path,
                listeners + ["--host", "127.0.0.1", "--data-dir", directory.appendingPathComponent("second").path, "--log-level", "critical"],
                timeLimit: .seconds(120))
            #expect(status == .exited(1), "\(output)")
            #expect(output == "notesyncd: \(listener) \(taken) is in use\n")
            #expect(!output.contains("listening"))
            #expect(await first.terminate() == .exited(0))
        }
    }

    /// Both listeners bound: the sync port's ready line comes first, then the metrics line.
    @Test func bothLinesOnceBothListen() async throws {
        try await withTemporaryDirectory("listeners") { directory in
            let child = try Subprocess.spawn(
                Binaries.notesyncd.path,
                [
                    "--host", "127.0.0.1", "--port", "0", "--metrics-address", "127.0.0.1:0", "--log-level", "critical",
                    "--data-dir", directory.appendingPathComponent("data").path,
                ],
                stdout: .pipe, stderr: .null)
            defer { child.signal(SIGKILL) }
            let lines = try await Subprocess.blocking {
                var seen: [String] = []
                return try child.readLine { line in
                    seen.append(line)
                    return seen.count == 2 ? seen : nil
                }
            }
            let (first, second) = (lines[0], lines[1])
            #expect(first.hasPrefix("notesyncd listening on http://127.0.0.1:"), "\(first)")
            #expect(second.hasPrefix("notesyncd metrics on http://127.0.0.1:") && second.hasSuffix("/metrics"), "\(second)")
            child.signal(SIGTERM)
            #expect(await child.waitForExit(timeLimit: .seconds(60)) == .exited(0))
        }
    }
}
