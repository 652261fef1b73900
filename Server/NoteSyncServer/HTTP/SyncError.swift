import Foundation
import HTTPTypes
import Hummingbird
import NoteSyncProtocol

/// A request-level failure: a stable protocol code, a human message, optionally the field to blame, extra headers
/// (`Retry-After`) and the underlying cause (logged, never sent).
///
/// Every error a client sees is one of these, answered as a JSON ``APIErrorBody`` with the code's HTTP status.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    /// What the client receives.
    public var body: APIErrorBody
    /// Extra response headers, e.g. `Retry-After` for `too_many_attempts`.
    public var extraHeaders: [String: String]
    /// The cause, for logs only.
    public var underlying: (any Error)?

    public init(
        _ code: APIErrorCode, _ message: String, field: String? = nil, headers: [String: String] = [:],
        underlying: (any Error)? = nil
    ) {
        self.body = APIErrorBody(code: code, message: message, field: field)
        self.extraHeaders = headers
        self.underlying = underlying
    }

    /// Wraps an error body (e.g. from ``WireJSON/decodeRequest(_:from:)``).
    public init(_ body: APIErrorBody) {
        self.body = body
        self.extraHeaders = [:]
        self.underlying = nil
    }

    /// The stable code.
    public var code: APIErrorCode { body.code }
    /// The HTTP status the code maps to.
    public var httpStatus: Int { body.code.httpStatus }

    public var description: String {
        if let underlying { return "\(body.description) (\(underlying))" }
        return body.description
    }

    /// The header that tells how many seconds to wait before retrying.
    public static let retryAfterHeader = "Retry-After"

    /// The protocol's answer to an arbitrary error: a ``SyncError`` as is, a store's "unavailable" as 503, anything
    /// else as 500 `internal` (a server fault).
    public static func from(_ error: any Error) -> SyncError {
        switch error {
        case let error as SyncError:
            return error
        case let error as APIErrorBody:
            return SyncError(error)
        case NoteStoreError.unavailable, NoteStoreError.closed:
            return SyncError(.unavailable, "The database is unavailable; retry shortly.", underlying: error)
        case is CancellationError:
            // The caller went, or the server is stopping: not a fault, and nobody may be left to read this.
            return SyncError(.unavailable, "The request was cancelled (the server is stopping or the caller went); retry.", underlying: error)
        default:
            return SyncError(.internalError, "The server failed to handle the request.", underlying: error)
        }
    }

    /// The JSON response carrying this error.
    public func response(requestID: String?) -> WireResponse {
        var headers = extraHeaders
        if let requestID { headers[ProtocolHeader.requestID] = requestID }
        let data = (try? WireJSON.encoder().encode(body)) ?? Data(#"{"code":"internal","message":"error"}"#.utf8)
        return WireResponse(status: httpStatus, headers: headers, body: data)
    }
}

extension SyncError: HTTPResponseError {
    public var status: HTTPResponse.Status { .init(code: body.code.httpStatus) }

    public var headers: HTTPFields {
        var fields = HTTPFields()
        for (name, value) in extraHeaders {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        return fields
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        HTTPBridge.response(from: response(requestID: nil))
    }
}
