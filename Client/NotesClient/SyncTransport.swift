import Foundation
import NoteSyncProtocol

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Carries one protocol request to a server and brings its answer back.
///
/// Implementations throw only for transport failures (unreachable, timeout, connection reset); every HTTP answer,
/// 4xx and 5xx included, is returned as a ``WireResponse``. The sync engine retries thrown errors and 5xx answers.
public protocol SyncTransport: Sendable {
    func send(_ request: WireRequest) async throws -> WireResponse

    /// Sends `request` with the bytes of `file` as its body (`application/octet-stream`: a chunk, at most 1 MiB). The
    /// default reads the file into ``WireRequest/body`` and calls ``send(_:)``.
    func upload(_ request: WireRequest, file: URL) async throws -> WireResponse

    /// Sends `request`; a 2xx answer's body is written to `destination` (created or replaced) and the returned
    /// response's body is empty; any other answer is returned whole and nothing is written. The default calls
    /// ``send(_:)`` and writes the body; ``URLSessionTransport`` downloads into a file as the bytes arrive.
    func download(_ request: WireRequest, to destination: URL) async throws -> WireResponse
}

extension SyncTransport {
    public func upload(_ request: WireRequest, file: URL) async throws -> WireResponse {
        var request = request
        request.body = try Data(contentsOf: file)
        request.contentType = ChunkRules.mediaType
        return try await send(request)
    }

    public func download(_ request: WireRequest, to destination: URL) async throws -> WireResponse {
        var response = try await send(request)
        guard response.isSuccess else { return response }
        try response.body.write(to: destination)
        response.body = Data()
        return response
    }
}

/// A transport failure: the request may or may not have reached the server.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The real transport: HTTP through URLSession, except the requests that wait by design (the waiting pull, chunk
/// uploads, the password-hashed ones), which go through AsyncHTTPClient (``EventLoopHTTP``: URLSession on Linux burns
/// CPU while a request waits).
///
/// Sets `Authorization: Bearer <token>` when the request carries one and `Content-Type: application/json` when it
/// has a body; builds the query from ``WireRequest/query``. `baseURL` may carry a path prefix
/// (`https://example.org/notes` sends `/v1/info` to `https://example.org/notes/v1/info`).
public struct URLSessionTransport: SyncTransport {
    public let baseURL: URL
    /// Seconds before a request with no answer fails.
    public let timeout: TimeInterval
    private let session: URLSession

    public init(baseURL: URL, timeout: TimeInterval = 30) {
        self.baseURL = baseURL
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout * 4
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
    }

    /// The URL a request goes to.
    public func url(for request: WireRequest) -> URL? {
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false) else { return nil }
        var prefix = components.path
        while prefix.hasSuffix("/") { prefix.removeLast() }
        components.path = prefix + request.path
        components.queryItems = request.query.isEmpty ? nil : request.query.map { URLQueryItem(name: $0.0, value: $0.1) }
        // URLQueryItem leaves "+" alone, which many servers read as a space.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.url
    }

    /// A waiting pull (a pull with ``PullQuery/wait``) and the requests the server answers after a password hash go
    /// through AsyncHTTPClient instead (``EventLoopHTTP/carries(_:)``): URLSession on Linux spins on the CPU for as
    /// long as a request waits for its answer.
    public func send(_ request: WireRequest) async throws -> WireResponse {
        if EventLoopHTTP.carries(request) {
            guard let url = url(for: request) else { throw TransportError("cannot build a URL from \(baseURL)") }
            return try await EventLoopHTTP.send(request, to: url, timeout: timeout)
        }
        let (urlRequest, url) = try self.urlRequest(for: request)
        let (data, response) = try await perform(url) { try await session.data(for: urlRequest) }
        return try Self.wireResponse(response, body: data, url: url)
    }

    /// Sends the file's bytes (a chunk: at most 1 MiB) as the body, through AsyncHTTPClient (``EventLoopHTTP``): a
    /// chunk's answer waits for the daemon's fsyncs, and URLSession spins on the CPU while it waits (13–16 s of CPU
    /// for a 1 GiB upload against 3–5 s: Docs/PERFORMANCE.md, "attachments, two chunks in flight"). The bytes are read
    /// into memory (one chunk bounds it).
    public func upload(_ request: WireRequest, file: URL) async throws -> WireResponse {
        guard let url = url(for: request) else { throw TransportError("cannot build a URL from \(baseURL)") }
        return try await EventLoopHTTP.upload(request, file: file, contentType: ChunkRules.mediaType, to: url, timeout: timeout)
    }

    /// URLSession writes the body to a file of its own as it arrives; a 2xx one is moved to `destination`.
    public func download(_ request: WireRequest, to destination: URL) async throws -> WireResponse {
        let (urlRequest, url) = try self.urlRequest(for: request)
        let (file, response) = try await perform(url) { try await session.download(for: urlRequest) }
        defer { try? FileManager.default.removeItem(at: file) }
        guard let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode) else {
            // An error answer is a small JSON body.
            return try Self.wireResponse(response, body: (try? Data(contentsOf: file)) ?? Data(), url: url)
        }
        guard rename(file.path, destination.path) == 0 else {
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.copyItem(at: file, to: destination)
            return try Self.wireResponse(response, body: Data(), url: url)
        }
        return try Self.wireResponse(response, body: Data(), url: url)
    }

    /// The URLRequest for a protocol request: method, `Accept`, bearer token, and its body when it has one (JSON, or
    /// the request's ``WireRequest/contentType``).
    private func urlRequest(for request: WireRequest) throws -> (URLRequest, URL) {
        guard let url = url(for: request) else { throw TransportError("cannot build a URL from \(baseURL)") }
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.setValue("application/json", forHTTPHeaderField: "Accept")
        if let token = request.bearerToken {
            urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        if let body = request.body {
            urlRequest.setValue(request.contentType ?? "application/json", forHTTPHeaderField: "Content-Type")
            urlRequest.httpBody = body
        }
        return (urlRequest, url)
    }

    /// Runs one URLSession exchange, its failures as ``TransportError``s in words.
    private func perform<T>(_ url: URL, _ exchange: () async throws -> T) async throws -> T {
        do {
            return try await exchange()
        } catch let error as URLError {
            throw TransportError("\(url.host ?? url.absoluteString): \(Self.describe(error))")
        } catch {
            throw TransportError("\(url.host ?? url.absoluteString): \(error.localizedDescription)")
        }
    }

    private static func wireResponse(_ response: URLResponse, body: Data, url: URL) throws -> WireResponse {
        guard let http = response as? HTTPURLResponse else { throw TransportError("not an HTTP answer from \(url)") }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key] = value }
        }
        return WireResponse(status: http.statusCode, headers: headers, body: body)
    }

    /// One human reason for a failed exchange. libcurl's own strings ("Send failure: Broken pipe", OpenSSL's
    /// handshake errors) say what broke, not what the person should check: they are translated here.
    static func describe(_ error: URLError) -> String {
        let notNotes = "is a FlakeNotes server (notesyncd) listening at that address and port?"
        switch error.code {
        case .timedOut: return "timed out"
        case .cannotConnectToHost: return "connection refused"
        case .cannotFindHost, .dnsLookupFailed: return "unknown host"
        case .notConnectedToInternet: return "no network"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected,
            .clientCertificateRequired:
            return tlsFailure
        case .badServerResponse, .cannotParseResponse, .zeroByteResource: return "the answer is not HTTP; \(notNotes)"
        case .networkConnectionLost: return "the connection was closed before an answer; \(notNotes)"
        default: break
        }
        let text = error.localizedDescription
        let lowered = text.lowercased()
        if ["ssl", "tls", "certificate", "handshake", "wrong version number"].contains(where: lowered.contains) { return tlsFailure }
        if ["send failure", "recv failure", "empty reply", "broken pipe", "connection reset", "unsupported protocol", "weird server reply"]
            .contains(where: lowered.contains)
        {
            return "the connection failed (\(text)); \(notNotes)"
        }
        return text
    }

    private static let tlsFailure =
        "the secure (https) connection could not be set up; if the server speaks plain HTTP (notesyncd does unless a proxy adds TLS), use an http:// URL"
}
