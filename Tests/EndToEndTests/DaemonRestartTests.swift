import Foundation
import NoteSyncProtocol
import NotesClient
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The real `notesyncd` binary, killed with SIGKILL and started again on the same port and data directory while a
/// client keeps one `URLSessionTransport` (and so its pooled keep-alive connections) across the restart.
@Suite(
    "URLSessionTransport across a daemon restart", .serialized,
    .enabled(if: Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)"))
struct DaemonRestartTests {
    @Test func theFirstSyncAfterAKillAndRestartSucceedsWithoutARetry() async throws {
        let directory = try makeTemporaryDirectory("restart")
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = ["--data-dir", directory.appendingPathComponent("data").path]
        let log = directory.appendingPathComponent("notesyncd.log")
        var daemon = try await DaemonProcess.startOnRestartablePort(data, log: log)
        let url = "http://127.0.0.1:\(daemon.port)"

        // One transport for every request, as the simulation and long-lived apps use it.
        let transport = CountingTransport(URLSessionTransport(baseURL: URL(string: url)!))
        let environment = NotesEnvironment(
            transport: NotesEnvironment.fixed(transport), sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3),
            deviceName: "restart-test")
        let client = try NotesClient.inMemory(environment: environment)
        _ = try await client.signUp(server: url, username: "restart", password: "correct horse battery").sync.get()
        _ = try client.add("written before the restart")
        _ = try await client.sync()
        #expect(transport.failures == 0)

        for round in 1...3 {
            // The premise: the session pools a keep-alive connection to the daemon about to be killed.
            #expect(Connections.established(toPort: daemon.port) > 0, "round \(round): no pooled connection")
            // The pooled connection now points at a process that no longer exists.
            await daemon.kill9()
            daemon = try await DaemonProcess.start(["--port", "\(daemon.port)"] + data, log: log)
            _ = try client.add("written after restart \(round)")
            let before = transport.attempts
            let report = try await client.sync()
            #expect(report.pushed == 1)
            // Every request of that sync went through on its first attempt: no dead connection was reused.
            #expect(transport.failures == 0, "round \(round): \(transport.errors)")
            #expect(transport.attempts - before == report.requests + 1, "round \(round): one try per request (info + push + pull)")
        }
        #expect(try client.status().pending == 0)
        await daemon.kill9()
    }
}

/// Counts the requests a transport carries and the transport errors it throws.
final class CountingTransport: SyncTransport {
    private let base: any SyncTransport
    private let state = Mutex<(attempts: Int, errors: [String])>((0, []))

    init(_ base: any SyncTransport) { self.base = base }

    var attempts: Int { state.withLock { $0.attempts } }
    var failures: Int { state.withLock { $0.errors.count } }
    var errors: [String] { state.withLock { $0.errors } }

    func send(_ request: WireRequest) async throws -> WireResponse {
        state.withLock { $0.attempts += 1 }
        do {
            return try await base.send(request)
        } catch {
            state.withLock { $0.errors.append("\(request.path): \(error)") }
            throw error
        }
    }
}

/// Counts of TCP connections, from the kernel's table.
enum Connections {
    /// Client-side TCP connections on this machine in state ESTABLISHED to `port` on the loopback, from
    /// `/proc/net/tcp` (the daemon's own ends have it as their local port, so they are not counted).
    static func established(toPort port: Int) -> Int {
        // read(2) until end of file: Foundation's String(contentsOfFile:) returns only the first page (about 4 KB)
        // of a /proc file, which misses the connection once the machine has a few dozen sockets.
        let fd = open("/proc/net/tcp", O_RDONLY)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        let table = String(decoding: bytes, as: UTF8.self)
        let remote = String(format: "0100007F:%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2] == remote && fields[3] == "01"
        }.count
    }
}
