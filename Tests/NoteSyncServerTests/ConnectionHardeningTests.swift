import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

#if canImport(Glibc)
import Glibc
#endif

/// Issue 15, items 2 and 5, over real loopback sockets: malformed HTTP gets the protocol's JSON answer; idle,
/// half-sent and unread connections are closed by the daemon's timeouts while normal requests go on; the connection
/// cap holds.
@Suite("Hardening: connections")
struct ConnectionHardeningTests {
    // MARK: - Item 5: malformed HTTP

    /// Failed before: each of these got a bare `400` with no body and no `X-Request-Id`.
    @Test(arguments: [
        ("a header line without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400, "invalid_http"),
        ("a negative Content-Length", "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, "invalid_http"),
        ("a non-numeric Content-Length", "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", 400, "invalid_http"),
        (
            "both Content-Length and Transfer-Encoding",
            "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "invalid_http"
        ),
        // The head was fine, so the endpoint is answering: its body read fails, and it answers (then the daemon
        // closes the connection instead of letting a second, bare 400 follow).
        (
            "a bad chunk size", "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            400, "invalid_json"
        ),
        ("a garbage request line", "HELLO\r\n\r\n", 400, "invalid_http"),
        ("1,000 header fields", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + (0..<1000).map { "X-F\($0): v\r\n" }.joined() + "\r\n", 431, "headers_too_large"),
        ("one 100 KB header field", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 100_000) + "\r\n\r\n", 431, "headers_too_large"),
    ])
    func malformedHTTPGetsTheProtocolsJSON(_ what: String, _ request: String, _ status: Int, _ code: String) async throws {
        try await LiveDaemon.test { port, _ in
            let connection = try RawConnection(port: port)
            try connection.send(request)
            let answer = try #require(await connection.readUntilClosed(timeout: .seconds(30)), "\(what): the daemon did not close")
            let response = try #require(RawResponse(answer), "\(what): \(String(decoding: answer, as: UTF8.self))")
            #expect(response.status == status, "\(what)")
            #expect(response.headers["content-type"] == "application/json", "\(what)")
            #expect(response.headers["x-request-id"]?.isEmpty == false, "\(what)")
            #expect(response.headers["connection"] == "close", "\(what)")
            let body = try JSONDecoder().decode(APIErrorBody.self, from: response.body)
            #expect(body.code == APIErrorCode(code), "\(what)")
        }
    }

    /// The limits themselves: 100 header fields and 80 KiB pass; one more field is refused.
    @Test func headerLimitsAtTheirBoundary() async throws {
        try await LiveDaemon.test { port, _ in
            // Host + 99 fields = 100.
            let atLimit = "GET /healthz HTTP/1.1\r\nHost: x\r\n" + (0..<99).map { "X-F\($0): v\r\n" }.joined() + "Connection: close\r\n\r\n"
            let overLimit = "GET /healthz HTTP/1.1\r\nHost: x\r\n" + (0..<100).map { "X-F\($0): v\r\n" }.joined() + "Connection: close\r\n\r\n"
            for (request, status) in [(atLimit.replacingOccurrences(of: "X-F98: v\r\n", with: ""), 200), (overLimit, 431)] {
                let connection = try RawConnection(port: port)
                try connection.send(request)
                let answer = try #require(await connection.readUntilClosed(timeout: .seconds(30)))
                #expect(RawResponse(answer)?.status == status)
            }
        }
    }

    // MARK: - Item 2: timeouts and the connection cap

    /// Failed before: idle and half-sent connections stayed open indefinitely (one was still open after 180 s).
    /// Here idle, half-sent-head and half-sent-body connections are all closed by the daemon, and normal requests
    /// made while they are held are all answered before the first of them is closed.
    @Test func idleAndHalfSentConnectionsAreClosedWhileNormalRequestsGoOn() async throws {
        try await LiveDaemon.test({
            // Long enough that the normal requests below finish first even on a loaded machine.
            $0.idleTimeoutSeconds = 20
            $0.readTimeoutSeconds = 20
        }) { port, api in
            let opened = ContinuousClock.now
            var held: [RawConnection] = []
            for _ in 0..<20 { held.append(try RawConnection(port: port)) }  // idle: nothing sent
            for index in 0..<20 {  // half a head
                let connection = try RawConnection(port: port)
                try connection.send("GET /v1/info HTTP/1.1\r\nHost: x\r\nX-Slow-\(index): ")
                held.append(connection)
            }
            for _ in 0..<10 {  // a head, then half the body
                let connection = try RawConnection(port: port)
                try connection.send("POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"user")
                held.append(connection)
            }
            // Normal requests meanwhile: all answered while every held connection is still open.
            for index in 0..<20 {
                #expect(try await api.call(.info).status == 200)
                if index % 5 == 0 { try await api.signUp("user\(index)") }
            }
            let stillOpen = held.filter { !$0.isClosedByPeer() }.count
            // Only when the normal requests took less than the timeouts: on a machine loaded enough to take longer,
            // the daemon rightly closed the held connections meanwhile (the requests above were answered anyway).
            if ContinuousClock.now - opened < .seconds(19) {
                #expect(stillOpen == held.count, "the held connections outlived the normal requests")
            }
            // Then the daemon closes every held connection (bounded wait, no sleep: each read returns at EOF).
            for (index, connection) in held.enumerated() {
                #expect(await connection.readUntilClosed(timeout: .seconds(60)) != nil, "held connection \(index) was never closed")
            }
            #expect(try await api.call(.info).status == 200)
        }
    }

    /// A keep-alive connection that finished its request is closed after the idle timeout; one that keeps making
    /// requests is not.
    @Test func keepAliveConnectionsCloseWhenIdle() async throws {
        try await LiveDaemon.test({ $0.idleTimeoutSeconds = 2 }) { port, _ in
            let connection = try RawConnection(port: port)
            try connection.send("GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = try #require(await connection.readResponse(timeout: .seconds(30)))
            #expect(first.status == 200)
            #expect(await connection.readUntilClosed(timeout: .seconds(60)) != nil, "the idle keep-alive connection stayed open")
        }
    }

    /// Past the cap, a new connection waits (in the listen backlog) until a held one is closed: its request is
    /// answered only after the daemon closed an idle connection.
    @Test func theConnectionCapHolds() async throws {
        try await LiveDaemon.run({
            $0.maxConnections = 3
            $0.idleTimeoutSeconds = 3
        }) { port, _ in
            // Three kept-alive connections, each served once (so the daemon has accepted it), then idle.
            var held: [RawConnection] = []
            for _ in 0..<3 {
                let connection = try RawConnection(port: port)
                try connection.send("GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(await connection.readResponse(timeout: .seconds(30))?.status == 200)
                held.append(connection)
            }
            let late = try RawConnection(port: port)
            try late.send("GET /v1/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let answer = try #require(await late.readUntilClosed(timeout: .seconds(60)), "the waiting connection was never served")
            #expect(RawResponse(answer)?.status == 200)
            #expect(held.contains { $0.isClosedByPeer() }, "answered before any held connection was closed: no cap")
        }
    }
}

/// A blocking TCP connection to 127.0.0.1 for tests that need bytes the HTTP clients will not send.
final class RawConnection: @unchecked Sendable {
    private let fd: Int32
    private var buffered = Data()
    private var sawEOF = false

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawConnectionError("socket: \(errno)") }
        // A send the daemon never reads (it answered early and stopped reading, without closing) fails after a
        // minute instead of blocking its thread, and its test, for ever.
        var limit = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw RawConnectionError("connect: \(errno)")
        }
    }

    deinit { close(fd) }

    /// Hangs up (both directions; the descriptor is closed at deinit): the server reads the end of the stream.
    func hangUp() { _ = shutdown(fd, Int32(SHUT_RDWR)) }

    /// Stops sending (a half-close: the server reads the end of the stream, and may still answer).
    func finishSending() { _ = shutdown(fd, Int32(SHUT_WR)) }

    func send(_ text: String) throws {
        try send(bytes: Array(text.utf8))
    }

    func send(bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else {
                throw RawConnectionError(errno == EAGAIN ? "send: the daemon read nothing for a minute" : "send: \(errno)")
            }
            sent += n
        }
    }

    /// ``send(bytes:)`` on a thread of its own: a body larger than the socket's buffers blocks until the daemon reads
    /// it, and a blocked thread of the cooperative pool (two on two cores) starves the daemon that must read it (under
    /// the full suite's load the daemon's body timeout then closed the connection: `readResponse` saw no answer).
    func sendOffPool(bytes: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { continuation.resume(with: Result { try self.send(bytes: bytes) }) }
        }
    }

    /// Reads what is available within `timeout` (nil: wait until data or EOF); returns false on EOF or error.
    private func readSome(timeoutMilliseconds: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, timeoutMilliseconds) > 0 else { return true }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n <= 0 {
            sawEOF = true
            return false
        }
        buffered.append(contentsOf: chunk[0..<n])
        return true
    }

    /// Runs blocking socket work on a thread of its own: blocking a thread of Swift's cooperative pool (two on a
    /// two-core machine) would starve the in-process daemon's handlers, which run on that pool.
    private func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }

    /// Everything until the peer closes, or nil when it has not closed within `timeout`.
    func readUntilClosed(timeout: Duration) async -> Data? {
        await offPool { self.readUntilClosedBlocking(timeout: timeout) }
    }

    /// One response (head and Content-Length body), or nil when none arrived within `timeout`.
    func readResponse(timeout: Duration) async -> RawResponse? {
        await offPool { self.readResponseBlocking(timeout: timeout) }
    }

    private func readUntilClosedBlocking(timeout: Duration) -> Data? {
        let deadline = ContinuousClock.now + timeout
        while !sawEOF {
            guard ContinuousClock.now < deadline else { return nil }
            _ = readSome(timeoutMilliseconds: 200)
        }
        return buffered
    }

    private func readResponseBlocking(timeout: Duration) -> RawResponse? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let response = RawResponse(buffered), response.isComplete {
                buffered.removeFirst(response.length)
                return response
            }
            if !readSome(timeoutMilliseconds: 200) { return RawResponse(buffered) }
        }
        return nil
    }

    /// Whether the peer has closed the connection (reads what is pending without waiting).
    func isClosedByPeer() -> Bool {
        while !sawEOF {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 0) > 0 else { return false }
            _ = readSome(timeoutMilliseconds: 0)
        }
        return true
    }
}

struct RawConnectionError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// An HTTP/1.1 response parsed from raw bytes (header names lowercased).
struct RawResponse {
    var status: Int
    var headers: [String: String]
    var body: Data
    /// Bytes the response takes in the stream (head and body).
    var length: Int
    var isComplete: Bool

    init?(_ data: Data) {
        guard let headEnd = data.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: data[data.startIndex..<headEnd.lowerBound], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        self.status = status
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        self.headers = headers
        let bodyStart = headEnd.upperBound
        let available = data.count - (bodyStart - data.startIndex)
        let declared = headers["content-length"].flatMap { Int($0) } ?? available
        isComplete = available >= declared
        body = Data(data[bodyStart..<(bodyStart + min(declared, available))])
        length = (bodyStart - data.startIndex) + min(declared, available)
    }
}
