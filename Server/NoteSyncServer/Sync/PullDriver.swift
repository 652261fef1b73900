import Logging
import MiniFlake
import NoteSyncProtocol

/// Runs a pull, the same way for every transport, in steps that carry out ``PullPlanner``'s decisions:
/// ``begin(since:limit:wait:session:connection:)`` reads the first page and, when the pull must wait, registers it
/// with the feed; ``resume(_:after:connection:)`` continues a held pull after each wake-up. Between two steps a
/// transport waits for the held pull its own way, and that small loop is all it writes: in a task
/// (``HeldPull/wait()``, `SyncAPI`'s pull handler, in process and through Hummingbird) or parked with a callback and
/// no task at all (``HeldPull/park(_:)``, the HTTP pipeline's `WaitingPullHandler`).
///
/// Each step is a few store reads; nothing else is kept between steps than a ``HeldPull``.
public struct PullDriver: Sendable {
    /// Where pages come from.
    public let store: any NoteStore
    /// The page sizes.
    public let limits: SyncLimits
    /// The waiting pulls; nil when pulls never wait (`wait` is then accepted and ignored).
    public let feed: ChangeFeed?
    let logger: Logger

    public init(store: any NoteStore, limits: SyncLimits, feed: ChangeFeed?, logger: Logger) {
        self.store = store
        self.limits = limits
        self.feed = feed
        self.logger = logger
    }

    /// A pull's first step: parses the query, reads the first page; with `wait`, no change after the cursor and a
    /// feed, registers the waiter and re-reads (``PullPlanner`` rules 1 to 3). `connection` (the HTTP server's,
    /// nil in process) ends the wait when the client goes.
    ///
    /// - Throws: `invalid_cursor`, `invalid_limit`, `invalid_wait`, `too_many_waiters` (429 with `Retry-After`: the
    ///   account or the daemon holds as many waiting pulls as allowed), or a store error.
    public func begin(
        since: String?, limit: String?, wait: String?, session: SessionRecord, connection: ClientConnection?
    ) async throws -> PullStep {
        let query = try PullPlanner.query(since: since, limit: limit, wait: wait, limits: limits, live: feed?.limits ?? .default)
        let first = try await page(after: query.cursor, pageSize: query.pageSize, session: session)
        guard let feed, PullPlanner.waits(query, first: first, feedAvailable: true) else { return .answered(first) }
        return try await register(
            HeldPull.Plan(session: session, deadline: feed.deadline(afterSeconds: query.waitSeconds), pageSize: query.pageSize, first: first),
            feed: feed, connection: connection)
    }

    /// A held pull's next step after its wait ended with `wake` (``PullPlanner`` rule 4): the empty page, 401 when
    /// the session ended meanwhile, the page after a change, or another wait when nothing moved after all.
    ///
    /// - Throws: `unauthorized` (the session ended while the pull waited), `too_many_waiters`, or a store error.
    public func resume(_ held: HeldPull, after wake: ChangeFeed.Wake, connection: ClientConnection?) async throws -> PullStep {
        connection?.clearOnClose()
        var sessionStands: Bool?
        while true {
            switch PullPlanner.afterWake(wake, sessionStands: sessionStands) {
            case .answerEmpty:
                return .answered(held.plan.first)
            case .checkSession:
                // The wake-up may be this device's own sign-out (revoked, password changed, account deleted or
                // disabled), or the deadline of a wait whose sign-out nobody heard: a session that ended is told so,
                // and gets no change committed after it ended.
                sessionStands = try await store.session(byTokenHash: held.plan.session.tokenHash)?.id == held.plan.session.id
            case .unauthorized:
                throw SyncError(
                    .unauthorized,
                    "This device was signed out while its pull waited (revoked, password changed, account deleted or disabled); sign in again (nothing on the device is lost)."
                )
            case .register:
                return try await register(held.plan, feed: held.feed, connection: connection)
            }
        }
    }

    /// Registers a waiter, then re-reads the account's change sequence (rule 3): a commit between the page read and
    /// the registration is seen here, one after the registration signals the waiter.
    private func register(_ plan: HeldPull.Plan, feed: ChangeFeed, connection: ClientConnection?) async throws -> PullStep {
        let account = plan.session.accountID
        let ticket: ChangeFeed.Ticket
        do {
            ticket = try feed.register(account: account, deadline: plan.deadline)
        } catch .closed {
            return .answered(plan.first)
        } catch .account(let limit) {
            throw SyncError(
                .tooManyWaiters, "This account already has \(limit) waiting pulls on this server; retry later or pull without wait.",
                headers: [SyncError.retryAfterHeader: "5"]
            )
        } catch .daemon(let limit) {
            logger.warning("waiting pull refused: the daemon holds its most waiters", metadata: ["max_waiters": "\(limit)"])
            throw SyncError(
                .tooManyWaiters, "This server already holds \(limit) waiting pulls; retry later or pull without wait.",
                headers: [SyncError.retryAfterHeader: "5"]
            )
        }
        let current: Int64
        do {
            current = try await store.currentChangeSequence(accountID: account)
        } catch {
            feed.cancel(ticket)
            throw error
        }
        switch PullPlanner.afterRegistering(currentSequence: current, cursor: plan.first.cursor) {
        case .read:
            feed.cancel(ticket)
            return .answered(try await page(after: plan.first.cursor, pageSize: plan.pageSize, session: plan.session))
        case .wait:
            // A client that hangs up stops waiting at once: its waiter leaves the limits (see ClientConnection).
            if let connection, !connection.onClose({ feed.fire(ticket, .gone) }) {
                feed.cancel(ticket)
                return .answered(plan.first)
            }
            return .waiting(HeldPull(feed: feed, ticket: ticket, plan: plan))
        }
    }

    /// One page after `cursor`, without waiting (rule 2).
    private func page(after cursor: SyncCursor, pageSize: Int, session: SessionRecord) async throws -> PullResponse {
        try PullPlanner.page(
            try await store.pull(accountID: session.accountID, after: cursor.sequence, limit: pageSize, maxBytes: PullPlanner.pageBytes),
            after: cursor, pageSize: pageSize)
    }
}

/// Where a pull stands between its steps (``PullDriver``).
public enum PullStep: Sendable {
    /// The answer.
    case answered(PullResponse)
    /// Registered with the feed and nothing moved since: wait for the held pull (``HeldPull/wait()`` or
    /// ``HeldPull/park(_:)``), then ``PullDriver/resume(_:after:connection:)`` with the wake-up.
    case waiting(HeldPull)
}

/// A pull held until its account changes: what its next step needs, and nothing more (the HTTP server keeps one
/// per waiting client while no task runs for it).
public final class HeldPull: Sendable {
    /// What the pull waits with: its session, its deadline, its page size and the empty page it answers when
    /// nothing comes.
    struct Plan: Sendable {
        let session: SessionRecord
        /// Monotonic nanoseconds (``ChangeFeed/deadline(afterSeconds:)``).
        let deadline: UInt64
        let pageSize: Int
        /// An empty page at the pull's cursor.
        let first: PullResponse
    }

    let feed: ChangeFeed
    let ticket: ChangeFeed.Ticket
    let plan: Plan

    init(feed: ChangeFeed, ticket: ChangeFeed.Ticket, plan: Plan) {
        self.feed = feed
        self.ticket = ticket
        self.plan = plan
    }

    /// Waits in this task until the wait ends (``ChangeFeed/wait(_:)``; cancelling the task ends it as
    /// ``ChangeFeed/Wake/gone``).
    public func wait() async -> ChangeFeed.Wake {
        await feed.wait(ticket)
    }

    /// Calls `onWake` once, when the wait ends, with no task waiting meanwhile (``ChangeFeed/park(_:onWake:)``).
    public func park(_ onWake: @escaping @Sendable (ChangeFeed.Wake) -> Void) {
        feed.park(ticket, onWake: onWake)
    }

    /// Ends the wait now with `wake` (the HTTP server's graceful shutdown: ``ChangeFeed/Wake/shutdown``).
    public func end(_ wake: ChangeFeed.Wake) {
        feed.fire(ticket, wake)
    }
}
