import Foundation
import NIOCore
import NIOHTTP1

/// Answers a request head carrying `Expect: 100-continue` with `100 Continue` before the request goes on to its
/// route, so that a client that waits for it before sending the body (curl does for every `PUT`, and for a `POST`
/// over 1 MiB) sends it at once instead of after its own timeout (curl's is 1 s: a second per chunk uploaded).
///
/// The 100 is sent for every such head, whatever the route will answer (RFC 9110 §10.1.1 lets a server send it and
/// then refuse the request: a refusal of a body it need not read, such as a chunk declared larger than 1 MiB, is
/// answered as before). Not sent to an HTTP/1.0 client (the RFC forbids it), nor for a head that arrives while an
/// earlier request on the connection is still being answered (its interim answer would land inside that answer): that
/// client sends its body after its own timeout, as before. Other expectations are ignored, as before.
///
/// Sits between NIO's HTTP/1 request decoder and Hummingbird's conversion to HTTP types (``GuardedHTTP1Channel``
/// adds it), where request heads still carry their HTTP version.
final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Requests whose head was read and whose answer's end has not been written.
    private var requestsInProgress = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            requestsInProgress += 1
            if requestsInProgress == 1, Self.expectsContinue(head) {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { requestsInProgress = max(0, requestsInProgress - 1) }
        context.write(data, promise: promise)
    }

    /// Whether `head` is HTTP/1.1 (or later) and expects `100-continue` (compared without case, RFC 9110 §10.1.1).
    static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        guard head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1) else { return false }
        return head.headers["expect"].contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue" }
    }
}
