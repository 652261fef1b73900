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
}

/// A transport failure: the request may or may not have reached the server.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The real transport: HTTP through URLSession.
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

    public func send(_ request: WireRequest) async throws -> WireResponse {
        guard let url = url(for: request) else { throw TransportError("cannot build a URL from \(baseURL)") }
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.setValue("application/json", forHTTPHeaderField: "Accept")
        if let token = request.bearerToken {
            urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        if let body = request.body {
            urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
            urlRequest.httpBody = body
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: urlRequest)
        } catch let error as URLError {
            throw TransportError("\(url.host ?? url.absoluteString): \(Self.describe(error))")
        } catch {
            throw TransportError("\(url.host ?? url.absoluteString): \(error.localizedDescription)")
        }
        guard let http = response as? HTTPURLResponse else { throw TransportError("not an HTTP answer from \(url)") }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key] = value }
        }
        return WireResponse(status: http.statusCode, headers: headers, body: data)
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
