import Foundation
import Testing
import TestSupport

/// Issue 28, item 10: `scripts/start.sh` with the built binaries (`FLAKENOTES_BIN_DIR`, so nothing is installed or
/// compiled) and data of its own (`FLAKENOTES_DATA`).
@Suite(.serialized, .enabled(if: Binaries.exist(Binaries.notesyncd, Binaries.notes), "build notesyncd and notes first"))
struct StartScriptTests {
    static let script = Binaries.packageRoot.appendingPathComponent("scripts/start.sh").path

    /// Starts the script on `port`; returns it once it printed its "running" line, with that line's URL.
    static func start(port: Int, data: URL, log: URL) async throws -> (ChildProcess, String) {
        var environment = ProcessInfo.processInfo.environment
        environment["PORT"] = "\(port)"
        environment["FLAKENOTES_BIN_DIR"] = Binaries.directory.path
        environment["FLAKENOTES_DATA"] = data.path
        environment["NOTES_HOME"] = nil
        let child = try Subprocess.spawn(
            "/bin/bash", [script], environment: environment, stdout: .pipe, stderr: .file(log.path), newProcessGroup: true)
        do {
            let url = try await Subprocess.blocking {
                try child.readLine { line in
                    line.range(of: "notesyncd is running at ").map { String(line[$0.upperBound...].prefix { $0 != " " }) }
                }
            }
            return (child, url)
        } catch {
            child.signal(SIGTERM)
            _ = await child.waitForExit(timeLimit: .seconds(60))
            throw SubprocessError("start.sh did not get running: \(error); stderr: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
    }

    /// The demo client's `notes status --json`.
    static func clientStatus(data: URL) async throws -> [String: Any] {
        let (status, output) = try await Subprocess.run(
            Binaries.notes.path, ["status", "--json", "--home", data.appendingPathComponent("client").path], timeLimit: .seconds(60))
        try #require(status == .exited(0), "\(output)")
        return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
    }

    /// Whether something accepts connections on 127.0.0.1:`port`.
    static func isListening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// A second run on another port signs the demo client in to that server, keeping its notes. Failed before: the
    /// client remembered the first server, `notes sync` could not reach it, and the script exited 3.
    @Test func aRunOnAnotherPortFollowsThatPort() async throws {
        try await withTemporaryDirectory("start-sh") { directory in
            let data = directory.appendingPathComponent("data")
            var notes: [Int] = []
            for (run, port) in [try DaemonProcess.freePort(), try DaemonProcess.freePort()].enumerated() {
                let log = directory.appendingPathComponent("run\(run).log")
                let (script, url) = try await Self.start(port: port, data: data, log: log)
                #expect(url == "http://127.0.0.1:\(port)")
                let status = try await Self.clientStatus(data: data)
                #expect(status["signedIn"] as? Bool == true, "\(status)")
                #expect(status["server"] as? String == url, "\(status)")
                notes.append(status["notes"] as? Int ?? -1)
                // Ctrl-C's signal: the script stops the daemon and exits 0, leaving nothing listening.
                script.signal(SIGINT)
                #expect(await script.waitForExit(timeLimit: .seconds(60)) == .exited(0))
                #expect(!Self.isListening(port), "a daemon was left on \(port)")
            }
            // The welcome note once, still there after the move to the second server.
            #expect(notes == [1, 1])
        }
    }

    /// A run whose daemon cannot start says why in one line on stderr, exits 1 and leaves no daemon. Failed before:
    /// it printed the daemon's whole log.
    @Test func aRunOnAPortInUseSaysWhyInOneLine() async throws {
        try await withTemporaryDirectory("start-sh-busy") { directory in
            let taken = try await DaemonProcess.start(
                ["--port", "0", "--data-dir", directory.appendingPathComponent("other").path],
                log: directory.appendingPathComponent("other.log"))
            let log = directory.appendingPathComponent("script.log")
            var environment = ProcessInfo.processInfo.environment
            environment["PORT"] = "\(taken.port)"
            environment["FLAKENOTES_BIN_DIR"] = Binaries.directory.path
            environment["FLAKENOTES_DATA"] = directory.appendingPathComponent("data").path
            let child = try Subprocess.spawn(
                "/bin/bash", [Self.script], environment: environment, stdout: .null, stderr: .file(log.path), newProcessGroup: true)
            #expect(await child.waitForExit(timeLimit: .seconds(60)) == .exited(1))
            let stderr = try String(contentsOf: log, encoding: .utf8)
            #expect(stderr == "start.sh: notesyncd did not start: address 127.0.0.1:\(taken.port) is in use\n", "\(stderr)")
            #expect(await taken.terminate() == .exited(0))
        }
    }
}
