import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import MiniFlake
import NIOCore
import NoteSyncProtocol
import ServiceLifecycle
import Synchronization

/// The request context of the sync server: Hummingbird's core context plus the peer's address.
public struct SyncRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connected peer (nil in router tests).
    public let remoteAddress: SocketAddress?
    /// The connection, watched while a pull waits (``ConnectionGuard/watch(_:)``).
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
    }
}

/// Builds the HTTP router: one route per entry of ``SyncAPI/routes`` (one per ``Endpoint``), each calling its own
/// handler through ``HTTPBridge/respond(to:context:route:api:)``, and a middleware answering what no route matches
/// with the protocol's JSON 404/405 (``SyncAPI/routeMiss(method:path:requestID:)``).
public func buildRouter(api: SyncAPI, logger: Logger) -> Router<SyncRequestContext> {
    let router = Router(context: SyncRequestContext.self)
    // No LogRequestsMiddleware: `SyncAPI` logs each request at debug (endpoint, status, request id), and the
    // middleware's async frame cost every waiting pull 2.4 KiB more (PERFORMANCE.md, live sync).
    for route in api.routes {
        guard let method = HTTPRequest.Method(route.endpoint.method.rawValue) else {
            preconditionFailure("\(route.endpoint.method.rawValue) is not an HTTP method")
        }
        router.on(RouterPath(route.endpoint.path), method: method) { request, context in
            if case .bytes = route.handler { return await HTTPBridge.respondBytes(to: request, context: context, route: route, api: api) }
            return await HTTPBridge.respond(to: request, context: context, route: route, api: api)
        }
    }
    // Added after the routes, so it wraps only the responder Hummingbird calls when no route matches.
    router.add(middleware: RouteMissMiddleware(api: api))
    logger.debug("routes registered", metadata: ["count": "\(api.routes.count)"])
    return router
}

/// Builds the daemon: opens the store, seeds the ID generator past every stored ID, and wires the router, the
/// HTTP server and a service that closes the store after the server has drained (graceful shutdown).
///
/// - Parameters:
///   - onListening: Called with the listening line (`notesyncd listening on http://HOST:PORT`, the real port when 0
///     was asked), then with the metrics line when `--metrics-address` is set, only once every listener is bound;
///     the daemon prints them to stdout. A listener that cannot be bound fails the application's run with a
///     ``ListenerError`` naming it and its address, and no line is printed.
///   - changeFeed: The feed of waiting pulls (tests pass one they observe); nil makes one from the configuration.
/// - Throws: ``ConfigurationError`` for a bad configuration, or the SQLite store's open error. PostgreSQL is migrated
///   and the instance number leased when the application runs, before the server starts listening.
public func buildApplication(
    configuration: ServerConfiguration, logger: Logger? = nil, changeFeed: ChangeFeed? = nil,
    onListening: @escaping @Sendable (String) -> Void = { line in print(line); fflush(nil) }
) async throws -> some ApplicationProtocol {
    try configuration.validate()
    let logger = {
        var logger = logger ?? Logger(label: "notesyncd")
        logger.logLevel = configuration.logLevel
        return logger
    }()

    // The store, the ID source, and what must run before the server starts and beside it.
    let store: any NoteStore
    let mintID: @Sendable () throws -> FlakeID
    let throttle: any SignInThrottling
    var services: [any Service] = []
    var prelude: (@Sendable () async throws -> Void)?
    switch configuration.database {
    case .sqlite:
        let sqlite = try SQLiteNoteStore(dataDirectory: configuration.dataDirectory)
        let highWaterMark = try await sqlite.largestIssuedID()
        let generator = try FlakeGenerator(instance: configuration.instance, clock: SystemFlakeClock.coarse, after: highWaterMark)
        logger.info(
            "database open",
            metadata: [
                "path": "\(configuration.dataDirectory)/\(SQLiteNoteStore.fileName)", "instance": "\(configuration.instance)",
                "high_water_mark": "\(highWaterMark.map { "\($0)" } ?? "none")",
            ]
        )
        store = sqlite
        mintID = { try generator.next() }
        throttle = SignInThrottle()
    case .postgres(let url):
        let database = PostgresDatabase(
            configuration: try PostgresDatabase.configuration(url: url, maximumConnections: configuration.databaseConnections),
            logger: logger
        )
        let lease = InstanceLease(database: database, ttl: .seconds(configuration.instanceLeaseSeconds), logger: logger)
        store = PostgresNoteStore(database: database)
        mintID = { try lease.next() }
        // Shared by every daemon on the database: N daemons must not give an attacker N times the attempts.
        throttle = PostgresSignInThrottle(database: database)
        // The pool first (it stops last), then the lease (released after the server has drained).
        services = [database.client, InstanceLeaseService(lease: lease, logger: logger)]
        let shown = configuration.database.description
        let startupDeadline = configuration.postgresStartupDeadline
        prelude = {
            try await withStartupDeadline(startupDeadline, what: "connecting to PostgreSQL at \(shown)") {
                try await database.migrate()
                try await lease.acquire()
            }
            logger.info("database open", metadata: ["database": "\(shown)", "schema_version": "\(PostgresDatabase.schemaVersion)"])
        }
    }
    // Waiting pulls: woken by this daemon's pushes and, on PostgreSQL, by every daemon's (LISTEN/NOTIFY).
    let feed = changeFeed ?? ChangeFeed(limits: configuration.live, maxWaiters: configuration.effectiveMaxWaiters)
    var listener: PostgresChangeListener?
    var externalCommits: ExternalCommitWatch?
    if let postgres = store as? PostgresNoteStore {
        listener = PostgresChangeListener(database: postgres.database, feed: feed, logger: logger)
    } else if let sqlite = store as? SQLiteNoteStore {
        // The operator's commands end sessions from processes of their own: heard on the feed's sweep.
        externalCommits = ExternalCommitWatch(store: sqlite, feed: feed, logger: logger)
    }
    let serverServices = ServerServices(
        ServiceContext(store: store, clock: SystemFlakeClock.coarse, mintID: mintID, logger: logger, changeFeed: feed),
        configuration: ServiceConfiguration(
            limits: configuration.limits, quota: configuration.quota, passwords: .bcrypt(cost: configuration.bcryptCost),
            throttle: throttle, randomBytes: .system, signUpPolicy: configuration.signUp, sessionIdleDays: configuration.sessionIdleDays,
            history: configuration.history)
    )
    logger.info("sign-up policy", metadata: ["sign_up": "\(configuration.signUp.rawValue)"])
    let metrics = configuration.metricsAddress.map { _ in SyncMetrics() }
    let api = SyncAPI(services: serverServices, logger: logger, metrics: metrics)
    let host = configuration.host
    let serverName = "notesyncd"
    let gate = ReadinessGate(expected: configuration.metricsAddress == nil ? [.sync] : [.sync, .metrics], onReady: onListening)
    var app = Application(
        router: buildRouter(api: api, logger: logger),
        server: .guardedHTTP1(timeouts: configuration.timeouts, api: api, serverName: serverName, logger: logger),
        configuration: ApplicationConfiguration(
            address: .hostname(host, port: configuration.port), serverName: serverName,
            // Past the cap, new connections wait in the listen backlog (256) until one closes.
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections, logger: logger)
        ),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            logger.info("listening", metadata: ["host": "\(host)", "port": "\(port)"])
            gate.bound(.sync, line: "notesyncd listening on http://\(Listener.shown(host: host, port: port))")
        },
        logger: logger
    )
    app.addServices(services)
    if let metrics, let address = configuration.metricsAddress {
        let metricsApp = buildMetricsApplication(
            metrics: metrics, store: store, feed: feed, address: address, logger: logger,
            onListening: { gate.bound(.metrics, line: $0) })
        app.addServices(ListenerService(app: metricsApp, listener: .metrics, address: address.description, gate: gate))
    }
    app.addServices(StoreService(store: store, logger: logger))
    // After the store (it stops before the store closes); the HTTP server answers its own waiters as it drains.
    app.addServices(ChangeFeedService(feed: feed, listener: listener, externalCommits: externalCommits, logger: logger))
    // Applied edits and kept versions past their retention (when there is one) and chunks past their grace period.
    app.addServices(
        PruneService(
            store: store, editRetention: PruneService.milliseconds(days: configuration.editRetentionDays),
            historyRetention: PruneService.milliseconds(days: configuration.history.retentionDays),
            chunks: serverServices.chunks, chunkReferences: store, chunkGraceDays: configuration.chunkGraceDays,
            interval: .seconds(3600), clock: SystemFlakeClock.coarse, logger: logger
        )
    )
    if let prelude { app.beforeServerStarts(perform: prelude) }
    return NotesyncdApplication(base: app, address: Listener.shown(host: host, port: configuration.port), gate: gate)
}

/// Runs `body`, failing with a ``ConfigurationError`` naming `what` if it has not finished after `deadline` (a
/// database that cannot be reached at start is an operator's error, not a hang).
func withStartupDeadline(_ deadline: Duration, what: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withinDeadline(deadline, timedOut: ConfigurationError("timed out after \(deadline) \(what)"), body)
}

/// Runs `body` and returns its value, or throws `timedOut` once `deadline` has passed. At the deadline `body` is
/// cancelled and the error thrown at once, without waiting for `body` to end: a PostgreSQL query does not stop when its
/// task is cancelled, and a task group would wait for it (a daemon stuck in its migration's lock then neither listened
/// nor exited; an operator's command stayed stuck the same way).
func withinDeadline<T: Sendable>(
    _ deadline: Duration, timedOut: @autoclosure () -> any Error, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await body() }
    let race = FirstAnswer<T>()
    let value = try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T?, any Error>) in
            race.wait(continuation)
            Task { race.answer(await work.result.map { $0 }) }
            race.startTimer(Task {
                guard (try? await Task.sleep(for: deadline)) != nil else { return }
                race.answer(.success(nil))
            })
        }
    } onCancel: {
        work.cancel()
    }
    race.stopTimer()
    guard let value else {
        work.cancel()
        throw timedOut()
    }
    return value
}

/// The first of two answers (the work's value, the deadline's nil) resumes the waiter; the other is dropped.
private final class FirstAnswer<T: Sendable>: Sendable {
    private let state = Mutex<(waiter: CheckedContinuation<T?, any Error>?, timer: Task<Void, Never>?)>((nil, nil))

    func wait(_ continuation: CheckedContinuation<T?, any Error>) { state.withLock { $0.waiter = continuation } }
    func answer(_ result: Result<T?, any Error>) { state.withLock { $0.waiter.take() }?.resume(with: result) }
    func startTimer(_ timer: Task<Void, Never>) { state.withLock { $0.timer = timer } }
    func stopTimer() { state.withLock { $0.timer }?.cancel() }
}

/// Keeps the store open while the server runs and closes it once the server has finished its in-flight requests
/// (services shut down in reverse order, and this one is registered before the HTTP server).
struct StoreService: Service {
    let store: any NoteStore
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        do {
            try await store.close()
            logger.info("database closed")
        } catch {
            logger.error("closing the database failed", metadata: ["error": "\(error)"])
            throw error
        }
    }
}

/// Prunes applied edits older than the edit retention and kept versions older than the history retention (a note's
/// newest kept version excepted), and collects the attachment chunks no note has referred to for the grace period
/// (``ChunkService/collect(references:graceDays:)``), once a minute after start and then every `interval`, until
/// graceful shutdown. A failure is logged and retried at the next round. With several daemons on PostgreSQL each
/// prunes; deleting what another already deleted is harmless.
struct PruneService: Service {
    let store: any NoteStore
    /// Milliseconds; nil keeps applied edits forever.
    let editRetention: Int64?
    /// Milliseconds; nil keeps every version forever.
    let historyRetention: Int64?
    /// The chunks to collect, nil for none.
    var chunks: ChunkService?
    /// Which chunks notes refer to (the note store: ``NoteStore`` is the collector's ``ChunkReferences``).
    var chunkReferences: any ChunkReferences = NoChunkReferences()
    var chunkGraceDays = 7
    let interval: Duration
    let clock: any FlakeClock
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var wait: Duration = .seconds(60)
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: wait)
                } catch {
                    break
                }
                wait = interval
                await pruneOnce()
            }
        }
    }

    /// A retention of `days` days in milliseconds; nil for 0 (forever).
    static func milliseconds(days: Int) -> Int64? {
        days > 0 ? Int64(days) * 86_400_000 : nil
    }

    func pruneOnce() async {
        let now = clock.unixMilliseconds()
        if let editRetention {
            let cutoff = now - editRetention
            do {
                let deleted = try await store.pruneAppliedEdits(createdBefore: cutoff)
                if deleted > 0 { logger.info("applied edits pruned", metadata: ["deleted": "\(deleted)", "cutoff": "\(cutoff)"]) }
            } catch {
                logger.warning("pruning applied edits failed; retrying later", metadata: ["error": "\(error)"])
            }
        }
        if let historyRetention {
            let cutoff = now - historyRetention
            do {
                let deleted = try await store.pruneHistory(savedBefore: cutoff)
                if deleted > 0 { logger.info("note versions pruned", metadata: ["deleted": "\(deleted)", "cutoff": "\(cutoff)"]) }
            } catch {
                logger.warning("pruning note versions failed; retrying later", metadata: ["error": "\(error)"])
            }
        }
        if let chunks, chunks.store != nil {
            do {
                _ = try await chunks.collect(references: chunkReferences, graceDays: chunkGraceDays)
            } catch {
                logger.warning("collecting chunks failed; retrying later", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Answers requests no route matches (unknown path, or a known path with another method) with the protocol's JSON
/// 404/405 instead of Hummingbird's empty 404 (which its router throws as `HTTPError(.notFound)` for both).
struct RouteMissMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let api: SyncAPI

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            return HTTPBridge.response(from: api.routeMiss(method: request.method.rawValue, path: request.uri.path, requestID: context.id))
        }
    }
}

/// Converts between Hummingbird's requests and responses and the protocol's transport-neutral ones.
enum HTTPBridge {
    /// Answers a request Hummingbird routed to `route`: reads the bearer token and the body (at most
    /// `maxBodyBytes`), then lets ``SyncAPI/respond(_:to:requestID:contentType:)`` answer.
    ///
    /// Two steps, so that the first one's large async frame (Hummingbird's request, the body collection) is gone
    /// before the answer is awaited: a waiting pull that comes this way (``WaitingPullHandler`` passes on one
    /// pipelined behind another request, or one with a body) keeps this frame alive for up to 55 s.
    static func respond(to request: Request, context: SyncRequestContext, route: SyncAPI.Route, api: SyncAPI) async -> Response {
        switch await wireRequest(from: request, context: context, route: route, api: api) {
        case .answer(let response):
            return response
        case .forward(let wire, let contentType):
            let requestID = wire.requestID ?? context.id
            // A pull that may wait hears its connection close (a client that hangs up leaves no waiter behind).
            if route.endpoint == .pull, PullPlanner.mayWait(wire.queryValue(PullQuery.wait).map { $0[...] }) {
                return await ClientConnection.$current.withValue(ConnectionGuard.watch(context.channel)) {
                    response(from: await api.respond(route, to: wire, requestID: requestID, contentType: contentType))
                }
            }
            return response(from: await api.respond(route, to: wire, requestID: requestID, contentType: contentType))
        }
    }

    /// Answers a request Hummingbird routed to a bytes route (the chunks'): the body is handed over as it arrives,
    /// never collected, and a chunk's bytes are written as they are read (`Content-Length` known beforehand).
    static func respondBytes(to request: Request, context: SyncRequestContext, route: SyncAPI.Route, api: SyncAPI) async -> Response {
        let requestID = context.id
        let path = request.uri.path
        guard Endpoint.matching(method: request.method.rawValue, path: path) == route.endpoint else {
            return response(from: api.routeMiss(method: request.method.rawValue, path: path, requestID: requestID))
        }
        var bearerToken: String?
        if let authorization = request.headers[.authorization] {
            guard let token = bearer(from: authorization) else {
                return response(from: SyncError.malformedAuthorization.response(requestID: requestID))
            }
            bearerToken = token
        }
        let wire = WireRequest(
            method: route.endpoint.method, path: path, bearerToken: bearerToken, remoteAddress: context.remoteAddress?.ipAddress,
            requestID: requestID)
        let body = SyncAPI.ByteBody(contentLength: request.headers[.contentLength].flatMap { Int($0) }, buffers: request.body)
        switch await api.respond(route, to: wire, body: body, requestID: requestID, contentType: request.headers[.contentType]) {
        case .wire(let answer):
            return response(from: answer)
        case .octets(let content, let headers):
            var fields = HTTPFields()
            fields[.contentType] = ChunkRules.mediaType
            for (name, value) in headers {
                if let name = HTTPField.Name(name) { fields[name] = value }
            }
            return Response(
                status: .ok, headers: fields,
                body: ResponseBody(contentLength: content.size) { writer in
                    try await content.read { piece in try await writer.write(piece) }
                    try await writer.finish(nil)
                })
        }
    }

    /// What the first step of ``respond(to:context:route:api:)`` found.
    enum Prepared: Sendable {
        /// Answered already (a route miss, a malformed `Authorization`, a body too large or unreadable).
        case answer(Response)
        /// For ``SyncAPI``, with the request's `Content-Type`.
        case forward(WireRequest, contentType: String?)
    }

    /// The protocol's request for a Hummingbird request, or the answer when it cannot be one.
    @inline(never)
    static func wireRequest(from request: Request, context: SyncRequestContext, route: SyncAPI.Route, api: SyncAPI) async -> Prepared {
        let requestID = context.id
        let path = request.uri.path
        // Hummingbird's router skips empty path components (`/v1/info/` reaches `/v1/info`); protocol paths are exact
        // (a template's parameter is one non-empty segment).
        guard route.endpoint.matches(path: path) else {
            return .answer(response(from: api.routeMiss(method: request.method.rawValue, path: path, requestID: requestID)))
        }
        // Public routes ignore the Authorization header (a stale or malformed one must not lock a client out of
        // `/healthz`, `/v1/info`, sign-up or sign-in); authenticated routes refuse a malformed one.
        var bearerToken: String?
        if route.endpoint.requiresAuthentication, let authorization = request.headers[.authorization] {
            guard let token = bearer(from: authorization) else {
                return .answer(response(from: SyncError.malformedAuthorization.response(requestID: requestID)))
            }
            bearerToken = token
        }
        let body: Data?
        do {
            body = try await collectBody(of: request, limit: api.limits.maxBodyBytes)
        } catch {
            return .answer(response(from: error.response(requestID: requestID)))
        }
        var query: [(String, String)] = []
        for (name, value) in request.uri.queryParameters {
            query.append((String(name), String(value)))
        }
        let wire = WireRequest(
            method: route.endpoint.method, path: path, query: query, bearerToken: bearerToken, body: body,
            remoteAddress: context.remoteAddress?.ipAddress, requestID: requestID
        )
        return .forward(wire, contentType: request.headers[.contentType])
    }

    /// The request's body (nil when empty), at most `limit` bytes: a declared `Content-Length` over the limit is
    /// refused before reading, and reading stops at the limit.
    ///
    /// - Throws: `body_too_large`, or `invalid_json` when the body cannot be read.
    static func collectBody(of request: Request, limit: Int) async throws(SyncError) -> Data? {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw SyncError.bodyTooLarge(limit: limit)
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return buffer.readableBytes > 0 ? Data(buffer.readableBytesView) : nil
        } catch is NIOTooManyBytesError {
            throw SyncError.bodyTooLarge(limit: limit)
        } catch {
            throw SyncError(.invalidJSON, "The body could not be read.", underlying: error)
        }
    }

    /// The token of `Bearer <token>` (scheme case-insensitive), or nil when the header is malformed.
    static func bearer(from authorization: String) -> String? {
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty || token.contains(" ") ? nil : token
    }

    /// The header fields of a protocol response: `Content-Type: application/json` when there is a body, then its
    /// own (`X-Request-Id`, `Retry-After`, `Allow`, ...). Every answer the daemon writes starts from these.
    static func headerFields(of wire: WireResponse) -> HTTPFields {
        var fields = HTTPFields()
        if !wire.body.isEmpty { fields[.contentType] = "application/json" }
        for (name, value) in wire.headers {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        return fields
    }

    /// A Hummingbird response for a protocol response (``headerFields(of:)``).
    static func response(from wire: WireResponse) -> Response {
        Response(
            status: HTTPResponse.Status(code: wire.status), headers: headerFields(of: wire),
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: wire.body))
        )
    }
}
