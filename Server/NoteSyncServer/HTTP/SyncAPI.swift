import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NoteSyncProtocol
import ServiceLifecycle
import Synchronization

/// The protocol's endpoints over the ``ServerServices``: one handler per ``Endpoint``, built once, each turning a
/// ``WireRequest`` into a ``WireResponse``.
///
/// Two adapters reach the same handlers, and each matches an endpoint once and checks the body size once (413
/// `body_too_large`): the HTTP router (``buildRouter(api:logger:)``) registers one route per entry of ``routes`` and
/// checks the size while collecting the body; in-process callers (tests, the simulation) call
/// ``handle(_:contentType:)``, which finds the entry by method and path. Both then call
/// ``respond(_:to:requestID:contentType:)``: it checks the media type (415 `unsupported_media_type`), authenticates
/// (401 `unauthorized`) when the endpoint needs it, runs the handler (strict decoding: 400 `invalid_json`,
/// `unknown_field`, `invalid_id`) and answers every failure with a JSON ``APIErrorBody`` of its code's status. Every
/// answer carries `X-Request-Id`; a 500 `internal` means a server fault and is logged with the request id. A method
/// and path with no endpoint are answered by ``routeMiss(method:path:requestID:)`` (404 `not_found`, 405
/// `method_not_allowed`).
///
/// A class for the same reason as the services: request frames hold a reference, not a copy.
public final class SyncAPI: Sendable {
    /// The rules behind the endpoints.
    public let services: ServerServices
    let logger: Logger
    /// One route per endpoint, in `Endpoint.allCases` order.
    let routes: [Route]
    /// What is counted for the metrics endpoint; nil measures nothing (the daemon without `--metrics-address`).
    let metrics: SyncMetrics?

    public init(services: ServerServices, logger: Logger, metrics: SyncMetrics? = nil) {
        self.services = services
        self.logger = logger
        self.metrics = metrics
        self.routes = Endpoint.allCases.map { Route(endpoint: $0, handler: Self.handler(for: $0, services: services, metrics: metrics)) }
    }

    /// The limits the API enforces.
    public var limits: SyncLimits { services.sync.limits }

    /// An endpoint and what answers it.
    struct Route: Sendable {
        let endpoint: Endpoint
        let handler: Handler
    }

    /// What answers an endpoint: a public handler gets the request; an authenticated one also gets the session its
    /// bearer token stands for.
    enum Handler: Sendable {
        case `public`(@Sendable (WireRequest) async throws -> WireResponse)
        case authenticated(@Sendable (WireRequest, SessionRecord) async throws -> WireResponse)
        /// An authenticated route whose bodies are bytes (the chunks'): it takes the request's body as it arrives
        /// and may answer with bytes as they are read.
        case bytes(@Sendable (WireRequest, SessionRecord, ByteBody) async throws -> ByteAnswer)
    }

    /// A request body as it arrives (Hummingbird's, or one buffer in process), with its declared length.
    struct ByteBody: Sendable {
        let contentLength: Int?
        let buffers: RequestBody
    }

    /// What a bytes route answers: a protocol response, or bytes read as they are sent.
    enum ByteAnswer: Sendable {
        case wire(WireResponse)
        case octets(ChunkContent)
    }

    // MARK: - In process

    /// Handles a request from an in-process caller, whose body is always JSON (as if it said
    /// `Content-Type: application/json`).
    public func handle(_ request: WireRequest) async -> WireResponse {
        let endpoint = Endpoint.matching(method: request.method.rawValue, path: request.path)
        return await handle(request, contentType: endpoint?.requestMediaType ?? Self.jsonMediaType)
    }

    /// Handles a request: finds its endpoint, checks the body size, then ``respond(_:to:requestID:contentType:)``.
    ///
    /// - Parameter contentType: The request's `Content-Type` header, nil when it sent none. A POST with a non-empty
    ///   body must say `application/json` (parameters such as `charset=utf-8` allowed): any other type, or none, is
    ///   415 `unsupported_media_type`.
    public func handle(_ request: WireRequest, contentType: String?) async -> WireResponse {
        let requestID = request.requestID ?? Self.makeRequestID()
        var request = request
        request.requestID = requestID
        guard let endpoint = Endpoint.matching(method: request.method.rawValue, path: request.path),
            let route = routes.first(where: { $0.endpoint == endpoint })
        else {
            return routeMiss(method: request.method.rawValue, path: request.path, requestID: requestID)
        }
        if case .bytes = route.handler {
            // The chunk's own limit applies, as the bytes arrive (``ChunkService``); the answer's bytes are collected.
            let body = ByteBody(contentLength: request.body?.count ?? 0, buffers: RequestBody(buffer: ByteBuffer(bytes: request.body ?? Data())))
            switch await respond(route, to: request, body: body, requestID: requestID, contentType: contentType) {
            case .wire(let response):
                return response
            case .octets(let content, let headers):
                do {
                    let bytes = try await content.collect()
                    return WireResponse(status: 200, headers: headers, body: Data(bytes.readableBytesView))
                } catch {
                    return failed(error, endpoint: endpoint, requestID: requestID, since: .now)
                }
            }
        }
        if let body = request.body, body.count > limits.maxBodyBytes {
            return SyncError.bodyTooLarge(limit: limits.maxBodyBytes).response(requestID: requestID)
        }
        return await respond(route, to: request, requestID: requestID, contentType: contentType)
    }

    // MARK: - Both adapters

    /// Answers a request for `route` whose body is within the limit: media type, authentication, the handler, and
    /// the error mapping. The answer carries `X-Request-Id: requestID`.
    func respond(_ route: Route, to request: WireRequest, requestID: String, contentType: String?) async -> WireResponse {
        let start = ContinuousClock.now
        let endpoint = route.endpoint
        do {
            try Self.checkMediaType(endpoint, hasBody: request.body.map { !$0.isEmpty } ?? false, contentType: contentType)
            let response: WireResponse
            switch route.handler {
            case .public(let handle):
                response = try await handle(request)
            case .authenticated(let handle):
                response = try await handle(request, try await services.sessions.authenticate(bearerToken: request.bearerToken))
            case .bytes:
                preconditionFailure("bytes routes are answered by respond(_:to:body:requestID:contentType:)")
            }
            return answered(response, endpoint: endpoint, requestID: requestID, since: start)
        } catch {
            return failed(error, endpoint: endpoint, requestID: requestID, since: start)
        }
    }

    /// What a bytes route answered: a protocol response (an error, or a JSON answer), or bytes to send with these
    /// headers (`X-Request-Id`).
    enum ByteResult: Sendable {
        case wire(WireResponse)
        case octets(ChunkContent, headers: [String: String])
    }

    /// Answers a request for a bytes route (``Handler/bytes(_:)``): authentication, media type
    /// (`application/octet-stream` or none for a body), the handler taking `body` as it arrives, and the same error
    /// mapping, log line and metrics as ``respond(_:to:requestID:contentType:)``.
    func respond(_ route: Route, to request: WireRequest, body: ByteBody, requestID: String, contentType: String?) async -> ByteResult {
        let start = ContinuousClock.now
        let endpoint = route.endpoint
        do {
            guard case .bytes(let handle) = route.handler else { preconditionFailure("\(endpoint) is not a bytes route") }
            // Authentication first: a request without a valid session learns nothing else (401, as every endpoint).
            let session = try await services.sessions.authenticate(bearerToken: request.bearerToken)
            try Self.checkMediaType(endpoint, hasBody: (body.contentLength ?? 1) > 0, contentType: contentType)
            switch try await handle(request, session, body) {
            case .wire(let response):
                return .wire(answered(response, endpoint: endpoint, requestID: requestID, since: start))
            case .octets(let content):
                let logged = answered(WireResponse(status: endpoint.successStatus), endpoint: endpoint, requestID: requestID, since: start)
                return .octets(content, headers: logged.headers)
            }
        } catch {
            return .wire(failed(error, endpoint: endpoint, requestID: requestID, since: start))
        }
    }

    /// Refuses a body whose `Content-Type` is not the endpoint's (415 `unsupported_media_type`): a JSON endpoint's
    /// POST body must say `application/json`; a chunk's body may say `application/octet-stream` or nothing.
    static func checkMediaType(_ endpoint: Endpoint, hasBody: Bool, contentType: String?) throws {
        if endpoint.method == .put, hasBody, let contentType, !isMediaType(contentType, ChunkRules.mediaType) {
            throw SyncError(.unsupportedMediaType, "The body must be \(ChunkRules.mediaType), not \(contentType).")
        }
        if endpoint.method == .post, hasBody, !(contentType.map(Self.isJSON) ?? false) {
                throw SyncError(
                    .unsupportedMediaType,
                    contentType.map { "The body must be application/json, not \($0)." }
                        ?? "The body must be application/json; the request has no Content-Type."
                )
            }
    }

    /// The last step of every answer: `X-Request-Id`, the debug log line, the metrics.
    private func answered(_ response: WireResponse, endpoint: Endpoint, requestID: String, since start: ContinuousClock.Instant) -> WireResponse {
        var response = response
        response.headers[ProtocolHeader.requestID] = requestID
        logger.debug("request", metadata: ["request_id": "\(requestID)", "endpoint": "\(endpoint.rawValue)", "status": "\(response.status)"])
        metrics?.request(route: endpoint.rawValue, status: response.status, duration: ContinuousClock.now - start)
        return response
    }

    /// The answer for a failure: its code's status and JSON body, logged (a server fault at error, an unavailable
    /// database at warning, a client's mistake at debug).
    private func failed(_ error: any Error, endpoint: Endpoint, requestID: String, since start: ContinuousClock.Instant) -> WireResponse {
        var logger = self.logger
        logger[metadataKey: "request_id"] = .string(requestID)
        let failure = SyncError.from(error)
        if error is CancellationError {
            logger.debug("request cancelled", metadata: ["endpoint": "\(endpoint.rawValue)"])
        } else if failure.code == .internalError {
            logger.error(
                "request failed with a server fault",
                metadata: ["endpoint": "\(endpoint.rawValue)", "error": "\(failure.underlying.map { "\($0)" } ?? "\(error)")"]
            )
        } else if failure.code == .unavailable {
            logger.warning("request failed: database unavailable", metadata: ["endpoint": "\(endpoint.rawValue)", "error": "\(failure)"])
        } else {
            logger.debug("request refused", metadata: ["endpoint": "\(endpoint.rawValue)", "code": "\(failure.code)"])
        }
        let response = failure.response(requestID: requestID)
        metrics?.request(route: endpoint.rawValue, status: response.status, duration: ContinuousClock.now - start)
        return response
    }

    // MARK: - Held waiting pulls

    /// A waiting pull the HTTP server holds with no task running for it (``WaitingPullHandler``): the driver's
    /// ``HeldPull`` plus what its answer needs.
    final class HeldRequest: Sendable {
        let pull: HeldPull
        let requestID: String
        let start: ContinuousClock.Instant
        let connection: ClientConnection

        init(pull: HeldPull, requestID: String, start: ContinuousClock.Instant, connection: ClientConnection) {
            self.pull = pull
            self.requestID = requestID
            self.start = start
            self.connection = connection
        }
    }

    /// Where a held waiting pull stands after a step.
    enum WaitingPullStep: Sendable {
        /// Write this.
        case answer(WireResponse)
        /// Park it (``HeldPull/park(_:)``) and continue with the wake-up (``continueWaitingPull(_:after:)``).
        case waiting(HeldRequest)
    }

    /// The first step of a waiting pull (`GET /v1/notes/changes` with `wait`), the driver's
    /// (``PullDriver/begin(since:limit:wait:session:connection:)``) with the same authentication, errors, log lines
    /// and metrics as ``respond(_:to:requestID:contentType:)``: a pull that must wait comes back registered with the
    /// feed instead of waiting in this task.
    func beginWaitingPull(_ request: WireRequest, requestID: String, connection: ClientConnection) async -> WaitingPullStep {
        let start = ContinuousClock.now
        do {
            let session = try await services.sessions.authenticate(bearerToken: request.bearerToken)
            let step = try await services.sync.pulls.begin(
                since: request.queryValue(PullQuery.since), limit: request.queryValue(PullQuery.limit),
                wait: request.queryValue(PullQuery.wait), session: session, connection: connection
            )
            return settled(step, requestID: requestID, start: start, connection: connection)
        } catch {
            return .answer(failed(error, endpoint: .pull, requestID: requestID, since: start))
        }
    }

    /// The next step of a held waiting pull after its wait ended with `wake` (``PullDriver/resume(_:after:connection:)``).
    func continueWaitingPull(_ held: HeldRequest, after wake: ChangeFeed.Wake) async -> WaitingPullStep {
        do {
            let step = try await services.sync.pulls.resume(held.pull, after: wake, connection: held.connection)
            return settled(step, requestID: held.requestID, start: held.start, connection: held.connection)
        } catch {
            return .answer(failed(error, endpoint: .pull, requestID: held.requestID, since: held.start))
        }
    }

    private func settled(_ step: PullStep, requestID: String, start: ContinuousClock.Instant, connection: ClientConnection) -> WaitingPullStep {
        switch step {
        case .answered(let page):
            metrics?.pulled(page.changes.count)
            let response = WireResponse(status: Endpoint.pull.successStatus, body: page.encodedJSON())
            return .answer(answered(response, endpoint: .pull, requestID: requestID, since: start))
        case .waiting(let pull):
            return .waiting(HeldRequest(pull: pull, requestID: requestID, start: start, connection: connection))
        }
    }

    /// A pull answered in the task that asked (in process, and through Hummingbird): the driver's steps, each wait
    /// awaited here under a graceful-shutdown handler, so the HTTP server's shutdown answers it at once.
    static func pull(_ request: WireRequest, session: SessionRecord, pulls: PullDriver, connection: ClientConnection?) async throws -> PullResponse {
        var step = try await pulls.begin(
            since: request.queryValue(PullQuery.since), limit: request.queryValue(PullQuery.limit),
            wait: request.queryValue(PullQuery.wait), session: session, connection: connection
        )
        while case .waiting(let held) = step {
            let wake = await withGracefulShutdownHandler {
                await held.wait()
            } onGracefulShutdown: {
                held.end(.shutdown)
            }
            step = try await pulls.resume(held, after: wake, connection: connection)
        }
        guard case .answered(let page) = step else { preconditionFailure("the loop ends only on an answer") }
        return page
    }

    /// The answer for a method and path no endpoint has: 405 (with `Allow`) when the path exists with another
    /// method, else 404. Used for methods ``WireRequest`` cannot carry (PUT, PATCH, ...) too.
    public func routeMiss(method: String, path: String, requestID: String?) -> WireResponse {
        let response = answerRouteMiss(method: method, path: path, requestID: requestID)
        metrics?.request(route: SyncMetrics.unmatched, status: response.status, duration: .zero)
        return response
    }

    private func answerRouteMiss(method: String, path: String, requestID: String?) -> WireResponse {
        let methods = Endpoint.endpoints(at: path).map(\.method.rawValue)
        if methods.isEmpty {
            return SyncError(.notFound, "No such endpoint: \(path).").response(requestID: requestID)
        }
        var error = SyncError(.methodNotAllowed, "\(path) does not accept \(method); it accepts \(methods.joined(separator: ", ")).")
        error.extraHeaders["Allow"] = methods.joined(separator: ", ")
        return error.response(requestID: requestID)
    }

    // MARK: - Handlers

    /// The handler of `endpoint`: decodes the request, calls the service, encodes the answer.
    private static func handler(for endpoint: Endpoint, services: ServerServices, metrics: SyncMetrics?) -> Handler {
        let (accounts, sessions, sync, chunks, encryption) = (
            services.accounts, services.sessions, services.sync, services.chunks, services.encryption)
        return switch endpoint {
        case .health:
            .public { _ in try encode(try await sync.health(), endpoint) }
        case .info:
            .public { _ in try encode(sync.info, endpoint) }
        case .signUp:
            .public { request in
                let decoded = try request.decoded(SignUpRequest.self)
                return try encode(try await accounts.signUp(decoded, peer: request.peer), endpoint)
            }
        case .signIn:
            .public { request in
                let decoded = try request.decoded(SignInRequest.self)
                do {
                    let response = try encode(try await sessions.signIn(decoded, peer: request.peer), endpoint)
                    metrics?.signIn(failure: nil)
                    return response
                } catch {
                    metrics?.signIn(failure: SyncError.from(error).code)
                    throw error
                }
            }
        case .signOut:
            .authenticated { _, session in
                try await sessions.signOut(session)
                return WireResponse(status: endpoint.successStatus)
            }
        case .account:
            .authenticated { _, session in try encode(try await accounts.account(session), endpoint) }
        case .push:
            .authenticated { request, session in
                let decoded = try PushRequest.decodeBody(request.body ?? Data())
                let response = try await sync.push(decoded, session: session)
                metrics?.push(response.results)
                return WireResponse(status: endpoint.successStatus, body: response.encodedJSON())
            }
        case .pull:
            .authenticated { request, session in
                let page = try await pull(request, session: session, pulls: sync.pulls, connection: ClientConnection.current)
                metrics?.pulled(page.changes.count)
                return WireResponse(status: endpoint.successStatus, body: page.encodedJSON())
            }
        case .sessions:
            .authenticated { _, session in try encode(try await sessions.sessions(session), endpoint) }
        case .revokeSession:
            .authenticated { request, session in
                let decoded = try request.decoded(RevokeSessionRequest.self)
                try await sessions.revokeSession(decoded, session: session)
                return WireResponse(status: endpoint.successStatus)
            }
        case .revokeOtherSessions:
            .authenticated { _, session in try encode(try await sessions.revokeOtherSessions(session), endpoint) }
        case .changePassword:
            .authenticated { request, session in
                let decoded = try request.decoded(ChangePasswordRequest.self)
                return try encode(try await sessions.changePassword(decoded, session: session, peer: request.peer), endpoint)
            }
        case .deleteAccount:
            .authenticated { request, session in
                let decoded = try request.decoded(DeleteAccountRequest.self)
                try await sessions.deleteAccount(decoded, session: session, peer: request.peer)
                return WireResponse(status: endpoint.successStatus)
            }
        case .noteVersions:
            .authenticated { request, session in
                let query = try HistoryPlanner.query(
                    serverID: endpoint.parameter(in: request.path) ?? "", after: request.queryValue(HistoryQuery.after),
                    limit: request.queryValue(HistoryQuery.limit), limits: sync.history)
                return try encode(try await sync.versions(query, session: session), endpoint)
            }
        case .missingChunks:
            .authenticated { request, session in
                let decoded = try request.decoded(MissingChunksRequest.self)
                return try encode(try await chunks.missing(decoded, session: session), endpoint)
            }
        case .putChunk:
            .bytes { request, session, body in
                let (hash, write) = try await chunks.put(
                    hash: String(endpoint.parameter(in: request.path) ?? ""), contentLength: body.contentLength, body: body.buffers,
                    session: session)
                let status = if case .created = write { endpoint.successStatus } else { 200 }
                let answer = ChunkStoredResponse(hash: hash, size: write.size)
                return .wire(WireResponse(status: status, body: try WireJSON.encoder().encode(answer)))
            }
        case .getChunk:
            .bytes { request, session, _ in
                .octets(try await chunks.get(hash: String(endpoint.parameter(in: request.path) ?? ""), session: session))
            }
        case .prelogin:
            .public { request in
                let decoded = try request.decoded(PreloginRequest.self)
                return try encode(try await encryption.prelogin(decoded), endpoint)
            }
        case .accountKeys:
            .authenticated { request, session in
                try encode(try await encryption.keys(after: request.queryValue(AccountKeysQuery.after), session: session), endpoint)
            }
        case .setUpEncryption:
            .authenticated { request, session in
                let decoded = try request.decoded(AccountEncryptionRequest.self)
                return try encode(try await sessions.setUpEncryption(decoded, session: session, peer: request.peer), endpoint)
            }
        case .rotateKeys:
            .authenticated { request, session in
                let decoded = try request.decoded(RotateKeysRequest.self)
                return try encode(try await encryption.rotate(decoded, session: session), endpoint)
            }
        }
    }

    private static func encode(_ value: some Encodable, _ endpoint: Endpoint) throws -> WireResponse {
        WireResponse(status: endpoint.successStatus, body: try WireJSON.encoder().encode(value))
    }

    /// The media type in-process requests are taken to have.
    static let jsonMediaType = "application/json"

    /// Whether a Content-Type names JSON (`application/json`, any parameters, any case).
    static func isJSON(_ contentType: String) -> Bool {
        isMediaType(contentType, "application/json")
    }

    /// Whether a Content-Type names `mediaType` (any parameters, any case).
    static func isMediaType(_ contentType: String, _ mediaType: String) -> Bool {
        let given = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return given.trimmingCharacters(in: .whitespaces).lowercased() == mediaType
    }

    private static let requestCounter = Atomic<UInt64>(0)

    /// A request id for in-process callers that bring none.
    static func makeRequestID() -> String {
        "local-\(requestCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
    }
}

extension SyncError {
    /// A body over the limit (413 `body_too_large`).
    static func bodyTooLarge(limit: Int) -> SyncError {
        SyncError(.bodyTooLarge, "The body is larger than \(limit) bytes.")
    }

    /// An `Authorization` header that is not `Bearer <token>` (401 `unauthorized`).
    static let malformedAuthorization = SyncError(.unauthorized, "The Authorization header must be 'Bearer <token>'.")
}

extension WireRequest {
    /// The body decoded strictly as a `T` request (``WireJSON/decodeRequest(_:from:)``); no body decodes as empty.
    ///
    /// - Throws: the protocol's error body (`invalid_json`, `unknown_field`, `invalid_field`, `invalid_id`).
    fileprivate func decoded<T: Decodable>(_ type: T.Type) throws(APIErrorBody) -> T {
        try WireJSON.decodeRequest(type, from: body ?? Data())
    }

    /// Who sent it, for the sign-in throttle and the logs.
    fileprivate var peer: Peer { Peer(address: remoteAddress, requestID: requestID) }
}
