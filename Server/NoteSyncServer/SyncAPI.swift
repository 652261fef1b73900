import Foundation
import Logging
import NoteSyncProtocol
import Synchronization

/// The protocol dispatcher: one ``WireRequest`` in, one ``WireResponse`` out.
///
/// Both the HTTP router (``buildRouter(api:logger:)``) and in-process callers (tests, the simulation) call
/// ``handle(_:)``, so both paths behave identically. It matches the endpoint (404 `not_found`, 405
/// `method_not_allowed`), checks the body size (413 `body_too_large`) and media type (415
/// `unsupported_media_type`), authenticates (401 `unauthorized`), decodes strictly (400 `invalid_json`,
/// `unknown_field`, `invalid_id`), calls ``SyncService`` and encodes the answer. Every failure is a JSON
/// ``APIErrorBody`` with its code's status; a 500 `internal` means a server fault and is logged with the request id.
public struct SyncAPI: Sendable {
    /// The rules behind the endpoints.
    public let service: SyncService
    let logger: Logger

    public init(service: SyncService, logger: Logger) {
        self.service = service
        self.logger = logger
    }

    /// The limits the API enforces.
    public var limits: SyncLimits { service.limits }

    /// Handles a request whose media type is unknown (in-process callers always send JSON).
    public func handle(_ request: WireRequest) async -> WireResponse {
        await handle(request, contentType: nil)
    }

    /// Handles a request.
    ///
    /// - Parameter contentType: The request's `Content-Type` header, if any. A POST with a non-empty body must send
    ///   `application/json` (parameters such as `charset=utf-8` allowed) or none.
    public func handle(_ request: WireRequest, contentType: String?) async -> WireResponse {
        let requestID = request.requestID ?? Self.makeRequestID()
        var logger = self.logger
        logger[metadataKey: "request_id"] = .string(requestID)
        guard let endpoint = Endpoint.matching(method: request.method.rawValue, path: request.path) else {
            return routeMiss(method: request.method.rawValue, path: request.path, requestID: requestID)
        }
        do {
            var response = try await dispatch(endpoint, request, contentType: contentType, logger: logger)
            response.headers[ProtocolHeader.requestID] = requestID
            logger.debug("request", metadata: ["endpoint": "\(endpoint.rawValue)", "status": "\(response.status)"])
            return response
        } catch {
            let failure = SyncError.from(error)
            if failure.code == .internalError {
                logger.error(
                    "request failed with a server fault",
                    metadata: ["endpoint": "\(endpoint.rawValue)", "error": "\(failure.underlying.map { "\($0)" } ?? "\(error)")"]
                )
            } else if failure.code == .unavailable {
                logger.warning("request failed: database unavailable", metadata: ["endpoint": "\(endpoint.rawValue)", "error": "\(failure)"])
            } else {
                logger.debug("request refused", metadata: ["endpoint": "\(endpoint.rawValue)", "code": "\(failure.code)"])
            }
            return failure.response(requestID: requestID)
        }
    }

    /// The answer for a method and path no endpoint has: 405 (with `Allow`) when the path exists with another
    /// method, else 404. Used for methods ``WireRequest`` cannot carry (PUT, PATCH, ...) too.
    public func routeMiss(method: String, path: String, requestID: String?) -> WireResponse {
        let methods = Endpoint.allCases.filter { $0.path == path }.map(\.method.rawValue)
        if methods.isEmpty {
            return SyncError(.notFound, "No such endpoint: \(path).").response(requestID: requestID)
        }
        var error = SyncError(.methodNotAllowed, "\(path) does not accept \(method); it accepts \(methods.joined(separator: ", ")).")
        error.extraHeaders["Allow"] = methods.joined(separator: ", ")
        return error.response(requestID: requestID)
    }

    /// The answer for a body over `maxBodyBytes` (the router stops reading at the limit).
    public func bodyTooLarge(requestID: String?) -> WireResponse {
        SyncError(.bodyTooLarge, "The body is larger than \(limits.maxBodyBytes) bytes.").response(requestID: requestID)
    }

    /// The answer for a malformed `Authorization` header.
    public func malformedAuthorization(requestID: String?) -> WireResponse {
        SyncError(.unauthorized, "The Authorization header must be 'Bearer <token>'.").response(requestID: requestID)
    }

    // MARK: - Dispatch

    private func dispatch(_ endpoint: Endpoint, _ request: WireRequest, contentType: String?, logger: Logger) async throws -> WireResponse {
        let body = request.body ?? Data()
        if body.count > limits.maxBodyBytes {
            throw SyncError(.bodyTooLarge, "The body is larger than \(limits.maxBodyBytes) bytes.")
        }
        if endpoint.method == .post, !body.isEmpty, let contentType, !Self.isJSON(contentType) {
            throw SyncError(.unsupportedMediaType, "The body must be application/json, not \(contentType).")
        }
        let session = endpoint.requiresAuthentication ? try await service.authenticate(bearerToken: request.bearerToken) : nil

        switch endpoint {
        case .health:
            return try encode(try await service.health(), endpoint)
        case .info:
            return try encode(service.info, endpoint)
        case .signUp:
            let decoded = try WireJSON.decodeRequest(SignUpRequest.self, from: body)
            return try encode(try await service.signUp(decoded), endpoint)
        case .signIn:
            let decoded = try WireJSON.decodeRequest(SignInRequest.self, from: body)
            return try encode(try await service.signIn(decoded), endpoint)
        case .signOut:
            try await service.signOut(session!)
            return WireResponse(status: endpoint.successStatus)
        case .account:
            return try encode(try await service.account(session!), endpoint)
        case .push:
            let decoded = try PushJSON.decodeRequest(body)
            return WireResponse(status: endpoint.successStatus, body: PushJSON.encode(try await service.push(decoded, session: session!)))
        case .pull:
            let result = try await service.pull(
                since: request.queryValue(PullQuery.since), limit: request.queryValue(PullQuery.limit), session: session!
            )
            return WireResponse(status: endpoint.successStatus, body: try PullJSON.encode(result))
        }
    }

    private func encode(_ value: some Encodable, _ endpoint: Endpoint) throws -> WireResponse {
        WireResponse(status: endpoint.successStatus, body: try WireJSON.encoder().encode(value))
    }

    /// Whether a Content-Type names JSON (`application/json`, any parameters, any case).
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    private static let requestCounter = Atomic<UInt64>(0)

    /// A request id for in-process callers that bring none.
    static func makeRequestID() -> String {
        "local-\(requestCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
    }
}
