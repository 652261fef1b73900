import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NoteSyncProtocol

/// Answers waiting pulls (`GET /v1/notes/changes?wait=N`, `N` not 0, no body) in the channel pipeline, so that no
/// task lives while one waits.
///
/// Through Hummingbird a waiting pull kept its connection's task suspended inside the responder chain for up to 55 s,
/// every async frame of it alive: 17 KiB per waiting client on top of the idle connection's 12.3 (PERFORMANCE.md).
/// Here the request never reaches Hummingbird, whose connection task stays where an idle connection's is (waiting for
/// a request head). Each step runs in a short task of its own (``SyncAPI/beginWaitingPull(_:requestID:connection:)``,
/// then ``SyncAPI/continueWaitingPull(_:after:)`` after each wake-up: ``PullDriver``'s steps), and between steps the
/// pull is parked with the feed (``HeldPull/park(_:)``): a callback and a ``SyncAPI/HeldRequest`` are all it holds. The rules,
/// errors, log lines and metrics are the ones every other request gets from ``SyncAPI``.
///
/// Sits after ``ConnectionGuard/PartHandler`` (whose timeouts and answer tracking see this handler's answers as any
/// other) and before Hummingbird's connection state handler. It keeps HTTP/1.1's order: a waiting pull read while an
/// answer of Hummingbird's is still owed is passed on to Hummingbird (which answers it the old way,
/// ``HTTPBridge/respond(to:context:route:api:)``), and requests read while this handler owes an answer (a pipelining
/// client) are held and passed on after it. It answers at once, with the empty page, when the client hangs up (its
/// FIN or a closed channel) and on the server's graceful shutdown (the quiesce event, passed on once answered, so
/// the connection closes after the answer); a close asked for meanwhile waits for the answer too.
final class WaitingPullHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let api: SyncAPI
    /// The `Server` header of every answer (Hummingbird's configuration sets the same on the others).
    let serverName: String

    /// The waiting pull this handler owes an answer to: its head was read, its answer not written.
    private struct Owed {
        /// The request target and `Authorization`, until the first step starts (a waiting pull keeps nothing of its
        /// head after that).
        var request: (target: String, authorization: String?)?
        let requestID: String
        /// Ends its wait when the client goes or the server shuts down.
        let connection = ClientConnection()
        /// Its end was read and its first step started.
        var started = false
        /// The connection closes after its answer (the request said `Connection: close`, or the server shuts down).
        var closeAfter = false
    }

    private var owed: Owed?
    /// Request heads passed on to Hummingbird whose answer's end has not been written.
    private var passedOn = 0
    /// Parts read while an answer is owed (a pipelining client), passed on in order after it. (An array: empty, it
    /// costs a connection nothing.)
    private var held: [HTTPRequestPart] = []
    private var heldBytes = 0
    /// Graceful shutdown's quiesce event, when it came while an answer was owed: passed on after it.
    private var quiesce: Any?
    /// Closes asked for while an answer was owed, done after it.
    private var closes: [(mode: CloseMode, promise: EventLoopPromise<Void>?)] = []
    private var context: ChannelHandlerContext?

    init(api: SyncAPI, serverName: String) {
        self.api = api
        self.serverName = serverName
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        owed?.connection.closed()
        self.context = nil
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if owed?.started == true || !held.isEmpty {
            hold(part, context: context)
        } else {
            receive(part, context: context)
        }
    }

    private func receive(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        if owed != nil {
            // The parts after the head of a waiting pull: it has no body (``isWaitingPull``), so the end.
            if case .end = part { start(context: context) }
            return
        }
        switch part {
        case .head(let head):
            if passedOn == 0, Self.isWaitingPull(head) {
                var owed = Owed(request: (head.path ?? "", head.headerFields[.authorization]), requestID: RequestID().description)
                owed.closeAfter = head.headerFields[.connection]?.lowercased() == "close"
                self.owed = owed
                return
            }
            passedOn += 1
        case .body, .end:
            break
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    /// A pipelining client's next request, kept until the owed answer is written (at most the body limit and a full
    /// head's worth; past that the connection is closed).
    private func hold(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head): heldBytes += 1024 + head.headerFields.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count }
        case .body(let buffer): heldBytes += buffer.readableBytes
        case .end: break
        }
        guard heldBytes <= api.limits.maxBodyBytes + GuardedHTTP1Channel.decoderLimits.maxHeaderListSize + 1024 else {
            context.close(promise: nil)
            return
        }
        held.append(part)
    }

    /// Whether Hummingbird would route `head` to the pull endpoint with a `wait` that may make it wait
    /// (``PullPlanner/mayWait(_:)``) and no body.
    static func isWaitingPull(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let target = head.path, target.utf8.starts(with: Endpoint.pull.path.utf8) else { return false }
        guard head.headerFields[.contentLength].map({ $0 == "0" }) ?? true, head.headerFields[.transferEncoding] == nil else { return false }
        let uri = URI(target)
        guard uri.path == Endpoint.pull.path else { return false }
        return PullPlanner.mayWait(uri.queryParameters[PullQuery.wait[...]])
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let owed {
            if case .inputClosed = event as? ChannelEvent { owed.connection.closed() }
            if event is ChannelShouldQuiesceEvent {
                self.owed?.closeAfter = true
                owed.connection.closed()
                quiesce = event
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The parser failed on what followed a waiting pull (a pipelining client sent garbage): the owed answer, given at
    /// once (the connection cannot go on), is the connection's last, as through Hummingbird (the guard marks it
    /// `Connection: close` and closes after it). Hummingbird, which owes nothing here, would otherwise answer the
    /// error first, a bare 400 in the place of the pull's page.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let owed, error is HTTPParserError {
            self.owed?.closeAfter = true
            held.removeAll()
            owed.connection.closed()
            return
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        owed?.connection.closed()
        context.fireChannelInactive()
    }

    // MARK: The pull

    /// Runs the first step in a task of its own.
    private func start(context: ChannelHandlerContext) {
        guard let owed, let (target, authorization) = owed.request else { return }
        self.owed?.started = true
        self.owed?.request = nil
        let uri = URI(target)
        var bearerToken: String?
        if let authorization {
            guard let token = HTTPBridge.bearer(from: authorization) else {
                answer(SyncError.malformedAuthorization.response(requestID: owed.requestID))
                return
            }
            bearerToken = token
        }
        var query: [(String, String)] = []
        for (name, value) in uri.queryParameters {
            query.append((String(name), String(value)))
        }
        let request = WireRequest(
            method: .get, path: Endpoint.pull.path, query: query, bearerToken: bearerToken, body: nil,
            remoteAddress: context.channel.remoteAddress?.ipAddress, requestID: owed.requestID
        )
        Self.begin(request, connection: owed.connection, api: api, handler: NIOLoopBound(self, eventLoop: context.eventLoop))
    }

    private static func begin(_ request: WireRequest, connection: ClientConnection, api: SyncAPI, handler: NIOLoopBound<WaitingPullHandler>) {
        Task {
            let step = await api.beginWaitingPull(request, requestID: request.requestID ?? "-", connection: connection)
            next(step, api: api, handler: handler)
        }
    }

    /// Writes an answer (on the handler's event loop), or parks the pull until its wake-up runs the next step.
    private static func next(_ step: SyncAPI.WaitingPullStep, api: SyncAPI, handler: NIOLoopBound<WaitingPullHandler>) {
        switch step {
        case .answer(let response):
            handler.eventLoop.execute { handler.value.answer(response) }
        case .waiting(let held):
            held.pull.park { wake in
                Task { next(await api.continueWaitingPull(held, after: wake), api: api, handler: handler) }
            }
        }
    }

    /// Writes the owed answer, then passes on what waited for it.
    private func answer(_ wire: WireResponse) {
        guard let context, let owed else { return }
        var fields = HTTPBridge.headerFields(of: wire)
        fields[.contentLength] = String(wire.body.count)
        fields[.date] = Self.httpDate(Date())
        fields[.server] = serverName
        if owed.closeAfter { fields[.connection] = "close" }
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .init(code: wire.status), headerFields: fields))), promise: nil)
        if !wire.body.isEmpty { context.write(wrapOutboundOut(.body(ByteBuffer(bytes: wire.body))), promise: nil) }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        self.owed = nil
        if owed.closeAfter {
            // Nothing after this answer is read.
            held.removeAll()
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
        let closes = self.closes
        self.closes = []
        for (mode, promise) in closes { context.close(mode: mode, promise: promise) }
        if let quiesce {
            self.quiesce = nil
            context.fireUserInboundEventTriggered(quiesce)
        }
        // A pipelining client's next requests, in order (one may be a waiting pull again).
        guard !held.isEmpty else { return }
        while self.owed?.started != true, !held.isEmpty {
            receive(held.removeFirst(), context: context)
        }
        if held.isEmpty { heldBytes = 0 }
        // Hummingbird's async channel takes what was read at the read's completion.
        context.fireChannelReadComplete()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { passedOn = max(0, passedOn - 1) }
        context.write(data, promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Hummingbird closes a connection it sees as idle (its client's FIN, graceful shutdown): not before the
        // owed answer is written.
        if owed != nil, mode != .input, context.channel.isActive {
            closes.append((mode, promise))
            return
        }
        context.close(mode: mode, promise: promise)
    }

    // MARK: Date

    /// An HTTP date (RFC 9110's IMF-fixdate, as Hummingbird writes on its answers).
    static func httpDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 40)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
