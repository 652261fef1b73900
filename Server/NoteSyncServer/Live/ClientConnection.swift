import Synchronization

/// Tells a held request (a waiting pull) that its client went away: it ended its side of the HTTP connection, or
/// the connection closed.
///
/// Hummingbird does not cancel a request's handler when its client goes, so without this a client that hung up
/// kept its waiter, and its place under the account's and the daemon's waiter limits, until the wait's deadline (up to
/// 55 s): a client dropping and redialling could fill its account's limit, and one opening waits and hanging up at
/// once could hold the daemon's without keeping a single socket. The HTTP server makes one for each waiting pull:
/// ``WaitingPullHandler`` calls ``closed()`` when the client goes (or the server quiesces); for a waiting pull that
/// goes through Hummingbird (pipelined behind another request, or sent with a body) the connection's
/// ``ConnectionGuard`` does (``ConnectionGuard/watch(_:)``). The pull's wait ends then. In-process callers have none.
public final class ClientConnection: Sendable {
    private struct State {
        var closed = false
        var onClose: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// The connection of the request this task answers, when the HTTP server watches it (set around a waiting pull).
    @TaskLocal public static var current: ClientConnection?

    public init() {}

    /// The client went: runs the action ``onClose(_:)`` set, once; later ones are refused.
    public func closed() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.closed = true
            defer { state.onClose = nil }
            return state.onClose
        }
        action?()
    }

    /// Runs `action` when the client goes before ``clearOnClose()`` (replacing an earlier action). Returns false,
    /// without keeping `action`, when it already went.
    public func onClose(_ action: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.onClose = action
            return true
        }
    }

    /// Forgets the action ``onClose(_:)`` set.
    public func clearOnClose() {
        state.withLock { $0.onClose = nil }
    }
}
