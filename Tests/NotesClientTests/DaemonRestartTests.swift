import Foundation
import NoteSyncProtocol
import NotesClient
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `notesyncd` binary, killed with SIGKILL and started again on the same port and data directory while a
/// client keeps one `URLSessionTransport` (and so its pooled keep-alive connections) across the restart.
@Suite(
    "URLSessionTransport across a daemon restart", .serialized,
    .enabled(if: DaemonProcess.binaryExists, "build notesyncd first (swift build)"))
struct DaemonRestartTests {
    @Test func theFirstSyncAfterAKillAndRestartSucceedsWithoutARetry() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notes-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var daemon = try DaemonProcess.onRestartablePort(dataDirectory: directory.appendingPathComponent("data"))
        defer { daemon.kill() }
        let url = "http://127.0.0.1:\(daemon.port)"

        // One transport for every request, as the simulation and long-lived apps use it.
        let transport = CountingTransport(URLSessionTransport(baseURL: URL(string: url)!))
        let environment = NotesEnvironment(
            transport: NotesEnvironment.fixed(transport), sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3),
            deviceName: "restart-test")
        let client = try NotesClient.inMemory(environment: environment)
        _ = try await client.signUp(server: url, username: "restart", password: "correct horse battery").sync.get()
        _ = try client.add("written before the restart")
        try await client.syncOK()
        #expect(transport.failures == 0)

        for round in 1...3 {
            // The premise: the session pools a keep-alive connection to the daemon about to be killed.
            #expect(DaemonProcess.establishedConnections(toPort: daemon.port) > 0, "round \(round): no pooled connection")
            // The pooled connection now points at a process that no longer exists.
            daemon.kill()
            daemon = try DaemonProcess(dataDirectory: directory.appendingPathComponent("data"), port: daemon.port)
            _ = try client.add("written after restart \(round)")
            let before = transport.attempts
            let report = try await client.syncOK()
            #expect(report.pushed == 1)
            // Every request of that sync went through on its first attempt: no dead connection was reused.
            #expect(transport.failures == 0, "round \(round): \(transport.errors)")
            #expect(transport.attempts - before == report.requests + 1, "round \(round): one try per request (info + push + pull)")
        }
        #expect(try client.status().pending == 0)
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

/// A `notesyncd` process on a port (0: a free one) with a data directory; ``kill()`` sends SIGKILL.
struct DaemonProcess {
    let process: Process
    let port: Int

    /// Where the built products are: `$FLAKENOTES_BIN_DIR` (scripts/test.sh sets it), else beside the test bundle,
    /// else `.build/debug`.
    static let binDirectory: URL = {
        if let directory = ProcessInfo.processInfo.environment["FLAKENOTES_BIN_DIR"], !directory.isEmpty {
            return URL(fileURLWithPath: directory)
        }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        if FileManager.default.isExecutableFile(atPath: beside.appendingPathComponent("notesyncd").path) { return beside }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug")
    }()

    static var binary: URL { binDirectory.appendingPathComponent("notesyncd") }
    static var binaryExists: Bool { FileManager.default.isExecutableFile(atPath: binary.path) }

    /// Starts the daemon and returns once it printed its listening line (reading its stdout; no sleeping).
    init(dataDirectory: URL, port: Int) throws {
        process = Process()
        process.executableURL = Self.binary
        process.arguments = [
            "--port", "\(port)", "--data-dir", dataDirectory.path, "--bcrypt-cost", "4", "--log-level", "error",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let fd = output.fileHandleForReading.fileDescriptor
        var line: [UInt8] = []
        var byte: UInt8 = 0
        var found: Int?
        while found == nil {
            guard read(fd, &byte, 1) == 1 else { throw DaemonProcessError("notesyncd exited before listening") }
            if byte != UInt8(ascii: "\n") {
                line.append(byte)
                continue
            }
            let text = String(decoding: line, as: UTF8.self)
            line.removeAll()
            if let range = text.range(of: "notesyncd listening on http://"), let colon = text[range.upperBound...].lastIndex(of: ":") {
                found = Int(text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
        }
        self.port = found!
        // Keep draining stdout so the daemon never blocks on a full pipe.
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while read(fd, &buffer, buffer.count) > 0 {}
        }
    }

    /// Client-side TCP connections on this machine in state ESTABLISHED to `port` on the loopback, from
    /// `/proc/net/tcp` (the daemon's own ends have it as their local port, so they are not counted).
    static func establishedConnections(toPort port: Int) -> Int {
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

    /// A daemon on a random port below the kernel's ephemeral range (so that nothing else takes the port while the
    /// daemon is down between a kill and a restart); tries a few ports.
    static func onRestartablePort(dataDirectory: URL) throws -> DaemonProcess {
        var low = 32768
        if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
            let first = text.split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) })
        {
            low = first
        }
        var failures: [String] = []
        for _ in 0..<20 {
            let port = Int.random(in: 10_000..<max(10_001, low))
            do { return try DaemonProcess(dataDirectory: dataDirectory, port: port) } catch { failures.append("\(port): \(error)") }
        }
        throw DaemonProcessError("no port worked: \(failures)")
    }

    /// SIGKILL, then waits for the process to be gone (its sockets closed by the kernel).
    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

struct DaemonProcessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
