import Foundation

/// An HTTP request reduced to what the protocol uses. The client builds these; its transports send them (URLSession
/// over the network, or straight into the server library in-process for tests and the simulation); the server's
/// router turns each incoming HTTP request into one and hands it to the same dispatcher.
public struct WireRequest: Sendable, Equatable {
    public var method: HTTPMethodName
    /// The path without query, e.g. `/v1/notes/push`.
    public var path: String
    /// Query parameters in order (already percent-decoded).
    public var query: [(String, String)]
    /// The bearer token, if any (sent as `Authorization: Bearer <token>`).
    public var bearerToken: String?
    /// The JSON body, if any.
    public var body: Data?
    /// The body's media type when it is not JSON (`application/octet-stream` for a chunk); nil: `application/json`.
    public var contentType: String? = nil
    /// The peer's address, for logs; set by the server side (nil in process).
    public var remoteAddress: String?
    /// The request id for logs; set by the server side.
    public var requestID: String?

    public init(
        method: HTTPMethodName, path: String, query: [(String, String)] = [], bearerToken: String? = nil,
        body: Data? = nil, remoteAddress: String? = nil, requestID: String? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.bearerToken = bearerToken
        self.body = body
        self.remoteAddress = remoteAddress
        self.requestID = requestID
    }

    /// A request for an endpoint.
    public init(_ endpoint: Endpoint, query: [(String, String)] = [], bearerToken: String? = nil, body: Data? = nil) {
        self.init(method: endpoint.method, path: endpoint.path, query: query, bearerToken: bearerToken, body: body)
    }

    /// The query value for a name (the first one).
    public func queryValue(_ name: String) -> String? { query.first { $0.0 == name }?.1 }

    public static func == (a: WireRequest, b: WireRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.query.elementsEqual(b.query, by: ==) && a.bearerToken == b.bearerToken
            && a.body == b.body && a.contentType == b.contentType && a.remoteAddress == b.remoteAddress && a.requestID == b.requestID
    }
}

/// An HTTP response reduced to what the protocol uses.
public struct WireResponse: Sendable, Equatable {
    public var status: Int
    /// Extra headers (e.g. `Retry-After`); `Content-Type: application/json` is implied when `body` is not empty.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// The error body of a non-2xx answer, if it carries one.
    public func errorBody() -> APIErrorBody? {
        guard !isSuccess else { return nil }
        return try? JSONDecoder().decode(APIErrorBody.self, from: body)
    }
}
