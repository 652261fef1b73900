import Dispatch
import Foundation
import MiniFlake
import NoteSyncProtocol
import Synchronization

/// The daemon's waiting pulls (`GET /v1/notes/changes?wait=N`), by account: a commit wakes the waiters of its own
/// account, nobody else's.
///
/// A waiting pull follows one protocol, which never misses a change committed between its pull and its wait (see
/// ``PullPlanner`` and ``PullDriver``): it registers a waiter (``register(account:deadline:)``), then re-reads the
/// account's change sequence, and only then waits (``wait(_:)`` or ``park(_:onWake:)``). A commit signals *after* it is
/// durable (``signal(account:)``), so a commit the re-read missed finds the waiter registered; a waiter signalled
/// before it waits keeps the signal and returns at once.
///
/// Waits end by ``expire(now:)`` (the daemon's ``ChangeFeedService`` calls it every tick), by ``close()`` at shutdown
/// or by ``fire(_:_:)`` (the HTTP server's graceful shutdown, a client that hung up, a cancelled task). Limits: at most
/// ``LiveLimits/maxWaitersPerAccount`` waiters per account and ``maxWaiters`` in the daemon; past either,
/// ``register(account:deadline:)`` refuses (429 `too_many_waiters`).
///
/// A waiter is awaited by a task (``wait(_:)``) or parked with a callback (``park(_:onWake:)``): the HTTP server
/// parks its waiting pulls, so that no task, and none of its async frames, lives while a pull waits.
///
/// One lock guards everything; a waiter is one small dictionary entry holding what resumes it (no task, no timer).
public final class ChangeFeed: Sendable {
    /// Why a wait ended.
    public enum Wake: Sendable, Equatable {
        /// A commit of the account (or a lost-notification recovery): re-read.
        case changed
        /// The wait's deadline passed.
        case expired
        /// The daemon is shutting down: answer now.
        case shutdown
        /// Nobody waits for the answer any more, or it must go now: the client hung up, its connection quiesces, the
        /// waiting task was cancelled.
        case gone
    }

    /// Why a waiter was not registered.
    public enum Refusal: Error, Sendable, Equatable {
        /// The account already has ``LiveLimits/maxWaitersPerAccount`` waiters.
        case account(limit: Int)
        /// The daemon already holds ``ChangeFeed/maxWaiters`` waiters.
        case daemon(limit: Int)
        /// The feed is closed (the daemon is shutting down): answer without waiting.
        case closed
    }

    /// A registered waiter.
    public struct Ticket: Sendable, Hashable {
        let account: FlakeID
        let id: UInt64
    }

    private struct Waiter {
        /// Monotonic nanoseconds (``now``).
        var deadline: UInt64
        /// Set while it waits: resumes its task, or runs its parked callback.
        var resume: (@Sendable (Wake) -> Void)?
        var fired: Wake?
    }

    private struct State {
        var accounts: [FlakeID: [UInt64: Waiter]] = [:]
        var count = 0
        var nextID: UInt64 = 0
        var closed = false
        /// No waiter's deadline is earlier (it may be later than the earliest left: it is lowered on registration
        /// and recomputed by each sweep), so ``expire(now:)`` skips the sweep while `now` is before it.
        var earliestDeadline = UInt64.max
    }

    private let state = Mutex(State())
    /// The limits served by `GET /v1/info` (`live`).
    public let limits: LiveLimits
    /// Most waiters in this daemon, all accounts together.
    public let maxWaiters: Int
    /// Monotonic nanoseconds.
    let now: @Sendable () -> UInt64
    /// Called after each registration, with the account (tests use it to act while a pull waits).
    let onRegister: (@Sendable (FlakeID) -> Void)?

    /// A feed.
    ///
    /// - Parameters:
    ///   - maxWaiters: Most waiters in the daemon (keep it below the connection cap, so pushes still get a
    ///     connection when every waiter is held).
    ///   - now: Monotonic nanoseconds (default: the system's uptime clock); tests pass their own and call
    ///     ``expire(now:)``.
    public init(
        limits: LiveLimits = .default, maxWaiters: Int = 750, now: (@Sendable () -> UInt64)? = nil,
        onRegister: (@Sendable (FlakeID) -> Void)? = nil
    ) {
        self.limits = limits
        self.maxWaiters = maxWaiters
        self.now = now ?? { DispatchTimeNanoseconds.now() }
        self.onRegister = onRegister
    }

    /// The deadline of a wait of `seconds` starting now.
    public func deadline(afterSeconds seconds: Int) -> UInt64 {
        now() &+ UInt64(max(0, seconds)) &* 1_000_000_000
    }

    /// Waiters registered now (all accounts).
    public var count: Int { state.withLock { $0.count } }

    /// Registers a waiter of `account` that ``wait(_:)`` then awaits; a signal arriving in between is kept.
    ///
    /// - Throws: ``Refusal``.
    public func register(account: FlakeID, deadline: UInt64) throws(Refusal) -> Ticket {
        let ticket = try state.withLock { state throws(Refusal) -> Ticket in
            if state.closed { throw .closed }
            if state.count >= maxWaiters { throw .daemon(limit: maxWaiters) }
            if let waiters = state.accounts[account], waiters.count >= limits.maxWaitersPerAccount {
                throw .account(limit: limits.maxWaitersPerAccount)
            }
            state.nextID &+= 1
            state.accounts[account, default: [:]][state.nextID] = Waiter(deadline: deadline)
            state.count += 1
            state.earliestDeadline = min(state.earliestDeadline, deadline)
            return Ticket(account: account, id: state.nextID)
        }
        onRegister?(account)
        return ticket
    }

    /// Waits until the waiter is signalled, expires, is fired or its task is cancelled (``Wake/gone``), and
    /// removes it. Returns at once when that already happened.
    public func wait(_ ticket: Ticket) async -> Wake {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Wake, Never>) in
                park(ticket) { continuation.resume(returning: $0) }
            }
        } onCancel: {
            fire(ticket, .gone)
        }
    }

    /// Calls `onWake` once, when the waiter is signalled, expires or is fired, and removes it; at once, on this
    /// thread, when that already happened. Nothing waits meanwhile: the callback (called outside the lock, on the
    /// thread of whoever ended the wait) is all the waiter holds.
    public func park(_ ticket: Ticket, onWake: @escaping @Sendable (Wake) -> Void) {
        let ready: Wake? = state.withLock { state in
            guard let waiter = state.accounts[ticket.account]?[ticket.id] else { return .expired }
            if let fired = waiter.fired {
                Self.remove(ticket, from: &state)
                return fired
            }
            state.accounts[ticket.account]?[ticket.id]?.resume = onWake
            return nil
        }
        if let ready { onWake(ready) }
    }

    /// Removes a waiter that will not wait (its re-read found changes, or it failed).
    public func cancel(_ ticket: Ticket) {
        state.withLock { Self.remove(ticket, from: &$0) }
    }

    /// Ends one waiter's wait with `wake` (kept if it is not waiting yet). A waiter already ended is left alone.
    public func fire(_ ticket: Ticket, _ wake: Wake) {
        let resume = state.withLock { state -> (@Sendable (Wake) -> Void)? in
            guard let waiter = state.accounts[ticket.account]?[ticket.id], waiter.fired == nil else { return nil }
            if let resume = waiter.resume {
                Self.remove(ticket, from: &state)
                return resume
            }
            state.accounts[ticket.account]?[ticket.id]?.fired = wake
            return nil
        }
        resume?(wake)
    }

    /// A commit of `account` is durable: wakes its waiters (``Wake/changed``). Returns how many were waiting.
    @discardableResult
    public func signal(account: FlakeID) -> Int {
        let woken = state.withLock { state in
            Self.fireAll(of: account, .changed, in: &state) { _ in true }
        }
        for resume in woken { resume(.changed) }
        return woken.count
    }

    /// Wakes every waiter (``Wake/changed``): after notifications may have been lost (the PostgreSQL listener
    /// reconnected), each re-reads its account's sequence and waits again if nothing moved.
    @discardableResult
    public func signalAll() -> Int {
        fireEveryone(.changed) { _ in true }
    }

    /// Ends the waits whose deadline is at or before `now` (``Wake/expired``); returns how many.
    @discardableResult
    public func expire(now: UInt64) -> Int {
        guard state.withLock({ $0.earliestDeadline <= now }) else { return 0 }
        let expired = fireEveryone(.expired) { $0.deadline <= now }
        state.withLock { state in
            var earliest = UInt64.max
            for waiters in state.accounts.values {
                for waiter in waiters.values where waiter.fired == nil { earliest = min(earliest, waiter.deadline) }
            }
            state.earliestDeadline = earliest
        }
        return expired
    }

    /// Answers every waiter (``Wake/shutdown``) and refuses new ones (``Refusal/closed``): graceful shutdown.
    public func close() {
        state.withLock { $0.closed = true }
        fireEveryone(.shutdown) { _ in true }
    }

    private func fireEveryone(_ wake: Wake, where matches: (Waiter) -> Bool) -> Int {
        let woken = state.withLock { state -> [@Sendable (Wake) -> Void] in
            var woken: [@Sendable (Wake) -> Void] = []
            for account in Array(state.accounts.keys) {
                woken += Self.fireAll(of: account, wake, in: &state, where: matches)
            }
            return woken
        }
        for resume in woken { resume(wake) }
        return woken.count
    }

    /// Fires the matching waiters of `account`: those waiting are removed and returned (to resume outside the lock);
    /// those not waiting yet keep `wake` (unless they already hold one).
    private static func fireAll(
        of account: FlakeID, _ wake: Wake, in state: inout State, where matches: (Waiter) -> Bool
    ) -> [@Sendable (Wake) -> Void] {
        guard var waiters = state.accounts[account] else { return [] }
        var woken: [@Sendable (Wake) -> Void] = []
        for (id, waiter) in waiters where waiter.fired == nil && matches(waiter) {
            if let resume = waiter.resume {
                woken.append(resume)
                waiters[id] = nil
            } else {
                waiters[id]?.fired = wake
            }
        }
        state.count -= woken.count
        state.accounts[account] = waiters.isEmpty ? nil : waiters
        return woken
    }

    private static func remove(_ ticket: Ticket, from state: inout State) {
        guard state.accounts[ticket.account]?.removeValue(forKey: ticket.id) != nil else { return }
        state.count -= 1
        if state.accounts[ticket.account]?.isEmpty == true { state.accounts[ticket.account] = nil }
    }
}

/// Monotonic nanoseconds since boot (not wall time: a clock set back must not stretch a wait).
enum DispatchTimeNanoseconds {
    static func now() -> UInt64 {
        // CLOCK_MONOTONIC on Linux (libdispatch's uptime clock).
        DispatchTime.now().uptimeNanoseconds
    }
}
