import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NoteSyncProtocol

/// The daemon's connection timeouts (see OPERATIONS.md). Every connection is in one phase at a time:
///
/// | phase | ends when | closed when |
/// | --- | --- | --- |
/// | idle (no request in progress; also before the first) | the first byte of a request arrives | `idle` passes with no byte |
/// | reading a head | the head is complete | `read` passes since its first byte (however slowly it trickles) |
/// | reading a body | the body is complete | `read` passes with no byte |
/// | responding (the request is read, its answer not yet written) | the answer's last byte is written | the client stops reading for `write` (the socket stays unwritable) |
///
/// While the server is still producing an answer, neither read timeout applies, so a long answer (a pull that waits
/// for changes) is never cut off; only a client that stops reading it is.
public struct ConnectionTimeouts: Sendable, Equatable {
    /// Keep-alive idle: how long a connection with no request in progress may stay silent.
    public var idle: Duration = .seconds(60)
    /// How long a request head may take from its first byte, and how long a body may stall between two reads.
    public var read: Duration = .seconds(30)
    /// How long an answer may wait for a client that does not read it.
    public var write: Duration = .seconds(60)
}

/// HTTP/1.1 for the daemon: Hummingbird's `HTTP1Channel` (its parser limits set explicitly), plus the
/// ``ConnectionTimeouts``, a JSON answer to requests the HTTP parser refuses, and `100 Continue` for a request that
/// expects it (``ExpectContinueHandler``, right after the HTTP decoder).
///
/// Two handlers share one ``ConnectionGuard``: ``ConnectionGuard/ByteHandler`` first in the pipeline (it sees every
/// byte read and the socket's writability) and ``ConnectionGuard/PartHandler`` after the HTTP codec (it sees request
/// heads and ends and answer ends, and the parser's errors). After them, ``WaitingPullHandler`` answers waiting pulls
/// itself, with no task held while they wait.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let http1: HTTP1Channel
    let timeouts: ConnectionTimeouts

    /// The parser's limits: 80 KiB for one header field and for all of them, 100 fields (431 `headers_too_large`
    /// past any of them).
    static let decoderLimits = HTTP1Channel.Configuration.DecoderConfiguration(
        maxHeaderFieldSize: 80 * 1024, maxHeaderListSize: 80 * 1024, maxHeaderFieldCount: 100
    )

    init(responder: @escaping HTTPChannelHandler.Responder, timeouts: ConnectionTimeouts, api: SyncAPI, serverName: String, logger: Logger) {
        self.timeouts = timeouts
        self.http1 = HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [
                    ConnectionGuard.PartHandler(timeouts: timeouts, logger: logger), WaitingPullHandler(api: api, serverName: serverName),
                ],
                idleTimeout: nil, httpDecoderConfiguration: Self.decoderLimits
            )
        )
    }

    /// Reads into buffers of 512 bytes at first (a request head fits), growing as reads fill them (to 64 KiB, for
    /// large pushes). A channel keeps its last read buffer for the next read: with NIO's default first size of
    /// 2,048 bytes, every connection that has sent a request, a waiting pull included, holds 2 KiB for nothing.
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.receiveBuffers)
            let parts = try channel.pipeline.syncOperations.handler(type: ConnectionGuard.PartHandler.self)
            try channel.pipeline.syncOperations.addHandler(ConnectionGuard.ByteHandler(parts.state), position: .first)
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(ExpectContinueHandler(), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// The daemon's HTTP/1.1 server (``GuardedHTTP1Channel``) for `api`.
    static func guardedHTTP1(timeouts: ConnectionTimeouts, api: SyncAPI, serverName: String, logger: Logger) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(responder: responder, timeouts: timeouts, api: api, serverName: serverName, logger: logger)
        }
    }
}

/// One connection's phase and its timer (see ``ConnectionTimeouts``). Lives on the channel's event loop; only its
/// two handlers touch it.
final class ConnectionGuard {
    let timeouts: ConnectionTimeouts
    let logger: Logger
    /// The channel to close, set when the byte handler is added.
    private var channel: (any Channel)?

    /// Requests whose head was read and whose answer has not been written.
    private(set) var requestsInProgress = 0
    /// A head was read and its end not yet.
    private var readingBody = false
    /// Bytes arrived while no request was in progress: a head is on its way.
    private var readingHead = false
    /// When the current phase started (idle, head) or the last byte arrived (body).
    private var mark = NIODeadline.now()
    private var unwritableSince: NIODeadline?
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// The waiting pull being answered on this connection, told when the client hangs up (``watch(_:)``).
    private var heldRequest: ClientConnection?
    /// The client closed its side (Hummingbird allows half-closure: a client's FIN does not close the channel, which
    /// stays open until the answer in progress is written).
    private var inputClosed = false

    init(timeouts: ConnectionTimeouts, logger: Logger) {
        self.timeouts = timeouts
        self.logger = logger
    }

    private static func amount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// When the connection is to be closed in its current phase, nil when no timeout applies.
    private var deadline: NIODeadline? {
        if readingBody { return mark + Self.amount(timeouts.read) }
        if requestsInProgress > 0 { return unwritableSince.map { $0 + Self.amount(timeouts.write) } }
        if readingHead { return mark + Self.amount(timeouts.read) }
        return mark + Self.amount(timeouts.idle)
    }

    private var phase: String {
        if readingBody { return "reading a body" }
        if requestsInProgress > 0 { return "writing an answer the client does not read" }
        if readingHead { return "reading a head" }
        return "idle"
    }

    // MARK: Events

    func started(_ channel: any Channel) {
        self.channel = channel
        mark = .now()
        arm()
    }

    func stopped() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        channel = nil
        clientLeft()
    }

    /// The client hung up (its FIN, or the channel closed): a held request stops waiting.
    func clientLeft() {
        inputClosed = true
        heldRequest?.closed()
        heldRequest = nil
    }

    /// Hands the connection's held request its ``ClientConnection`` (told at once when the client already left).
    private func hold(_ connection: ClientConnection) {
        if inputClosed {
            connection.closed()
        } else {
            heldRequest = connection
        }
    }

    /// A ``ClientConnection`` for a request about to be held on `channel` (a waiting pull): it hears the client hang
    /// up (the end of its stream; a client that only half-closes gets its empty page early and may pull again). It is
    /// handed to the channel's guard on the event loop (this call does not wait for that); a channel already closed by
    /// then tells it at once, and a channel without the guard (router tests) never does.
    static func watch(_ channel: any Channel) -> ClientConnection {
        let connection = ClientConnection()
        channel.eventLoop.execute {
            if let parts = try? channel.pipeline.syncOperations.handler(type: PartHandler.self), channel.isActive {
                parts.state.hold(connection)
            } else {
                // Closed already (its handlers are gone), or never guarded: the close future tells which.
                channel.closeFuture.whenComplete { _ in connection.closed() }
            }
        }
        return connection
    }

    func bytesRead() {
        if readingBody {
            mark = .now()
        } else if requestsInProgress == 0, !readingHead {
            readingHead = true
            mark = .now()
            arm()
        }
    }

    func headRead() {
        requestsInProgress += 1
        readingHead = false
        readingBody = true
        mark = .now()
        arm()
    }

    func endRead() {
        readingBody = false
        arm()
    }

    func answerWritten() {
        requestsInProgress = max(0, requestsInProgress - 1)
        if requestsInProgress == 0, !readingBody {
            readingHead = false
            mark = .now()
        }
        arm()
    }

    func writabilityChanged(isWritable: Bool) {
        if isWritable {
            unwritableSince = nil
        } else if unwritableSince == nil {
            unwritableSince = .now()
            arm()
        }
    }

    // MARK: Timer

    /// Makes sure the timer fires no later than the current deadline (it re-checks when it fires, so a deadline
    /// that moved later only needs the timer to fire and look again).
    private func arm() {
        guard let channel, let deadline else { return }
        if let timerDeadline, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = channel.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            self.timer = nil
            self.timerDeadline = nil
            self.fire()
        }
    }

    private func fire() {
        guard let channel, let deadline = deadline else { return }
        if NIODeadline.now() >= deadline {
            logger.debug(
                "connection closed: timed out", metadata: ["phase": "\(phase)", "remote_address": "\(channel.remoteAddress?.ipAddress ?? "-")"]
            )
            channel.close(promise: nil)
            stopped()
        } else {
            arm()
        }
    }

    // MARK: Handlers

    /// First in the pipeline: every byte read, and the socket's writability.
    final class ByteHandler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let state: ConnectionGuard

        init(_ state: ConnectionGuard) { self.state = state }

        func handlerAdded(context: ChannelHandlerContext) {
            if context.channel.isActive { state.started(context.channel) }
        }

        func channelActive(context: ChannelHandlerContext) {
            state.started(context.channel)
            context.fireChannelActive()
        }

        func channelInactive(context: ChannelHandlerContext) {
            state.stopped()
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            state.stopped()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            state.bytesRead()
            context.fireChannelRead(data)
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            state.writabilityChanged(isWritable: context.channel.isWritable)
            context.fireChannelWritabilityChanged()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .inputClosed = event as? ChannelEvent { state.clientLeft() }
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// After the HTTP codec: request heads and ends, answer ends, and the parser's errors. A parser error with no
    /// request in progress (a bad head) it answers itself with the protocol's JSON (400 `invalid_http`, 431
    /// `headers_too_large`) and `X-Request-Id`; one inside a request being answered (a bad body) makes that request's
    /// answer the last. Either way the connection is then closed.
    final class PartHandler: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart
        let state: ConnectionGuard

        init(timeouts: ConnectionTimeouts, logger: Logger) {
            state = ConnectionGuard(timeouts: timeouts, logger: logger)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head: state.headRead()
            case .body: break
            case .end: state.endRead()
            }
            context.fireChannelRead(data)
        }

        /// The parser failed while a request was being answered: that answer is the last one on the connection.
        private var parserFailed = false
        /// ... and it has been written: anything after it (Hummingbird's bare 400) is dropped.
        private var closing = false

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if closing {
                promise?.succeed(())
                return
            }
            if parserFailed, case .head(var head) = unwrapOutboundIn(data) {
                // The last answer on this connection says so.
                head.headerFields[.connection] = "close"
                context.write(wrapOutboundOut(.head(head)), promise: promise)
                return
            }
            if case .end = unwrapOutboundIn(data) {
                state.answerWritten()
                if parserFailed {
                    closing = true
                    let channel = context.channel
                    let written = promise ?? context.eventLoop.makePromise()
                    context.writeAndFlush(data, promise: written)
                    written.futureResult.whenComplete { _ in channel.close(promise: nil) }
                    return
                }
            }
            context.write(data, promise: promise)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            guard let parserError = error as? HTTPParserError, state.requestsInProgress == 0, !closing else {
                // A request is being answered (its body read fails, so the endpoint answers 400 `invalid_json`):
                // its answer is the last, and the connection is closed after it instead of Hummingbird's bare
                // 400 that would follow.
                if error is HTTPParserError { parserFailed = true }
                context.fireErrorCaught(error)
                return
            }
            closing = true
            if !context.channel.isActive || parserError == .invalidEOFState || parserError == .closedConnection {
                // The client closed in the middle of a request: nobody is left to answer.
                context.close(promise: nil)
                return
            }
            let failure = Self.failure(for: parserError)
            let requestID = RequestID().description
            state.logger.debug(
                "request refused by the HTTP parser",
                metadata: [
                    "request_id": "\(requestID)", "error": "\(parserError)", "code": "\(failure.code)",
                    "remote_address": "\(context.channel.remoteAddress?.ipAddress ?? "-")",
                ]
            )
            let wire = failure.response(requestID: requestID)
            var fields = HTTPBridge.headerFields(of: wire)
            fields[.contentLength] = String(wire.body.count)
            fields[.connection] = "close"
            let channel = context.channel
            context.write(wrapOutboundOut(.head(HTTPResponse(status: .init(code: wire.status), headerFields: fields))), promise: nil)
            context.write(wrapOutboundOut(.body(ByteBuffer(bytes: wire.body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }

        /// The protocol's error for a parser error: 431 for header limits, 400 for everything else.
        static func failure(for error: HTTPParserError) -> SyncError {
            switch error {
            case .headerOverflow:
                SyncError(
                    .headersTooLarge,
                    "The request's header fields are too many or too large (at most \(GuardedHTTP1Channel.decoderLimits.maxHeaderFieldCount) fields and \(GuardedHTTP1Channel.decoderLimits.maxHeaderListSize / 1024) KiB)."
                )
            default:
                SyncError(.invalidHTTP, "The request is not valid HTTP/1.1 (\(error)).")
            }
        }
    }
}
