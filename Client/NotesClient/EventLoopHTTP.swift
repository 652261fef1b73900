import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NoteSyncProtocol

/// Sends the requests that wait for their answer by design through AsyncHTTPClient: the waiting pull
/// (`GET /v1/notes/changes?…&wait=N`), attachment chunks' bodies (`PUT /v1/chunks/{hash}`) and the requests the server
/// answers after a slow password hash (``carries(_:)``); ``URLSessionTransport`` hands them here.
///
/// Why: URLSession on Linux (swift-corelibs-foundation over libcurl) burns CPU while a request waits for its answer:
/// libdispatch's write source on the socket fires in a loop (about 2,700 wake-ups a second), so a `notes watch`
/// waiting on an idle daemon used 9.7 s of CPU in 30 s (Docs/PERFORMANCE.md, "notes watch while it waits"). A chunk
/// PUT waits for the daemon's fsyncs the same way, a thousand times for a 1 GiB file (Docs/PERFORMANCE.md,
/// "attachments, two chunks in flight"), and a sign-in or password change for the server's bcrypts. AsyncHTTPClient
/// waits in epoll without waking. Every other request stays on URLSession.
///
/// The request is the one URLSession would send: the same URL (``URLSessionTransport/url(for:)``), the same headers
/// (`Accept`, `Authorization`, `Content-Type` with a body), the transport's timeout as its deadline; https uses
/// NIOSSL with the system's trust roots. Failures are ``TransportError``s in the words of
/// ``URLSessionTransport/describe(_:)``.
enum EventLoopHTTP {
    /// The largest answer collected: 16 MiB. The protocol bounds a pull page in notes (`limits.maxPageSize`), not in
    /// bytes, so it names no largest answer; the watch's waiting pull asks for one change (`limit=1`: one note of at
    /// most `limits.maxNoteBytes`, 256 KiB, in JSON), far below it. A larger answer fails the request.
    static let maxResponseBytes = 16 << 20

    /// One client for the process (never shut down): `HTTPClient.shared`'s configuration, except that a connection
    /// that cannot be made fails the request at once. The shared client retries it until the request's deadline,
    /// so a watch whose daemon had stopped noticed only after the transport's 30-s timeout, where URLSession
    /// reports `connection refused` at once.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Whether `request` goes this way when it is not a chunk's body: a waiting pull, or a request the server answers
    /// only after a slow password hash (bcrypt: sign-up, sign-in, password change, account deletion, the set-up of
    /// encryption), where URLSession spun for most of a password change's client CPU (Docs/PERFORMANCE.md, "End-to-end
    /// encryption").
    static func carries(_ request: WireRequest) -> Bool {
        isWaitingPull(request) || waitsOnPasswordHash(request)
    }

    /// The endpoints the server answers after hashing or checking a password.
    static let passwordHashed: [Endpoint] = [.signUp, .signIn, .changePassword, .deleteAccount, .setUpEncryption]

    static func waitsOnPasswordHash(_ request: WireRequest) -> Bool {
        passwordHashed.contains { $0.method == request.method && $0.path == request.path }
    }

    /// Whether `request` is a waiting pull (a pull whose query has ``PullQuery/wait``).
    static func isWaitingPull(_ request: WireRequest) -> Bool {
        request.method == Endpoint.pull.method && request.path == Endpoint.pull.path
            && request.query.contains { $0.0 == PullQuery.wait }
    }

    /// Sends `request` to `url` and collects its answer (at most ``maxResponseBytes``) within `timeout` seconds.
    static func send(_ request: WireRequest, to url: URL, timeout: TimeInterval) async throws -> WireResponse {
        try await send(request, body: request.body.map { ByteBuffer(bytes: $0) }, contentType: request.contentType ?? "application/json", to: url, timeout: timeout)
    }

    /// Sends `request` to `url` with the bytes of `file` (a chunk: at most 1 MiB, read into one buffer: no copy of it
    /// in between) as its body, of type `contentType`, as ``send(_:to:timeout:)`` does.
    static func upload(_ request: WireRequest, file: URL, contentType: String, to url: URL, timeout: TimeInterval) async throws -> WireResponse {
        try await send(request, body: try contents(of: file), contentType: contentType, to: url, timeout: timeout)
    }

    /// The bytes of `file` in one buffer of their size.
    static func contents(of file: URL) throws -> ByteBuffer {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let size = Int(try handle.seekToEnd())
        try handle.seek(toOffset: 0)
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        let descriptor = handle.fileDescriptor
        try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { target in
            var done = 0
            while done < size {
                let count = read(descriptor, target.baseAddress! + done, size - done)
                if count < 0, errno == EINTR { continue }
                guard count >= 0 else { throw TransportError("cannot read \(file.path): \(String(cString: strerror(errno)))") }
                if count == 0 { break }
                done += count
            }
            return done
        }
        return buffer
    }

    private static func send(
        _ request: WireRequest, body: ByteBuffer?, contentType: String, to url: URL, timeout: TimeInterval
    ) async throws -> WireResponse {
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        outgoing.headers.add(name: "Accept", value: "application/json")
        if let token = request.bearerToken { outgoing.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            outgoing.headers.add(name: "Content-Type", value: contentType)
            outgoing.body = .bytes(body)
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(timeout * 1e9))
        let place = url.host ?? url.absoluteString
        do {
            let response = try await client.execute(outgoing, deadline: deadline)
            let body = try await response.body.collect(upTo: maxResponseBytes)
            var headers: [String: String] = [:]
            for (name, value) in response.headers {
                headers[name] = headers[name].map { "\($0), \(value)" } ?? value
            }
            return WireResponse(status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
        } catch {
            throw TransportError("\(place): \(describe(error))")
        }
    }

    /// One human reason for a failed exchange, in ``URLSessionTransport/describe(_:)``'s words.
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout, .readTimeout, .writeTimeout, .deadlineExceeded, .getConnectionFromPoolTimeout:
                return URLSessionTransport.describe(URLError(.timedOut))
            case .tlsHandshakeTimeout:
                return URLSessionTransport.describe(URLError(.secureConnectionFailed))
            case .remoteConnectionClosed:
                return URLSessionTransport.describe(URLError(.networkConnectionLost))
            case .invalidURL, .emptyHost, .emptyScheme:
                return URLSessionTransport.describe(URLError(.badURL))
            default:
                return URLSessionTransport.describe(URLError(.badServerResponse))
            }
        }
        if error is NIOTooManyBytesError { return "the answer is larger than \(maxResponseBytes >> 20) MiB" }
        if let error = error as? NIOConnectionError {
            if error.connectionErrors.isEmpty, error.dnsAError != nil || error.dnsAAAAError != nil {
                return URLSessionTransport.describe(URLError(.cannotFindHost))
            }
            if let first = error.connectionErrors.first { return describe(first.error) }
            return URLSessionTransport.describe(URLError(.cannotConnectToHost))
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return URLSessionTransport.describe(URLError(.cannotConnectToHost))
            case ETIMEDOUT: return URLSessionTransport.describe(URLError(.timedOut))
            case ECONNRESET, EPIPE: return URLSessionTransport.describe(URLError(.networkConnectionLost))
            case ENETUNREACH, EHOSTUNREACH: return URLSessionTransport.describe(URLError(.notConnectedToInternet))
            default: return "\(error)"
            }
        }
        if case .connectTimeout = error as? ChannelError {
            return URLSessionTransport.describe(URLError(.timedOut))
        }
        if error is SocketAddressError { return URLSessionTransport.describe(URLError(.cannotFindHost)) }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return URLSessionTransport.describe(URLError(.secureConnectionFailed))
        }
        return "\(error)"
    }
}
