import Synchronization

/// Counts failed sign-ins per username and refuses attempts past the limit (429 `too_many_attempts`).
///
/// The daemon uses ``SignInThrottle`` (in memory, per daemon) with SQLite and ``PostgresSignInThrottle`` (in the
/// database, shared by every daemon) with PostgreSQL, so that N daemons behind one address do not give an attacker N
/// times the attempts. Usernames are canonical; times come from the caller (the service's injected clock).
public protocol SignInThrottling: Sendable {
    /// Failures allowed within the window; the next attempt is refused.
    var maxFailures: Int { get }
    /// Starts an attempt for `username` at `now`; returns the seconds to wait when it is refused, else nil. An
    /// attempt in progress counts as a failure until it ends, so a burst of concurrent guesses cannot slip past.
    ///
    /// Every attempt that was not refused must be ended with ``finish(username:outcome:now:)``.
    func begin(username: String, now: Int64) async throws -> Int?
    /// Ends an attempt: a failure is recorded; a success clears the username's failures, or keeps them (see
    /// ``AttemptOutcome``).
    func finish(username: String, outcome: AttemptOutcome, now: Int64) async throws
}

/// How a throttled attempt ended.
public enum AttemptOutcome: Sendable, Equatable {
    /// It failed: it counts until it ages out of the window.
    case failure
    /// It succeeded and clears the key's failures: a sign-in or password check with the right password (whoever knows
    /// it has nothing left to guess).
    case success
    /// It succeeded and leaves the key's earlier failures counting: a sign-up with an invite code, keyed by the
    /// client's address. A holder of a code good for several sign-ups could otherwise clear the address's failures
    /// between guesses (3 failures, 1 success, 5 more failures) and guess without end.
    case successKeepingFailures
}

extension SignInThrottling {
    /// Ends an attempt as a failure or as a success that clears the username's failures.
    public func finish(username: String, succeeded: Bool, now: Int64) async throws {
        try await finish(username: username, outcome: succeeded ? .success : .failure, now: now)
    }
}

extension SignInThrottle: SignInThrottling {}

/// Limits failed sign-ins per username: after ``maxFailures`` failures within ``windowMilliseconds``, further
/// attempts are refused (429 `too_many_attempts`) until the oldest of them ages out.
///
/// State is in memory, per daemon; times come from the caller (the service's injected clock). An attempt in
/// progress counts as a failure until it ends, so a burst of concurrent guesses cannot slip past the limit.
public final class SignInThrottle: Sendable {
    /// Failures allowed within the window; the next attempt is refused.
    public let maxFailures: Int
    /// The window, in milliseconds.
    public let windowMilliseconds: Int64

    private struct Entry {
        /// Failure times, ascending (Unix ms).
        var failures: [Int64] = []
        var inFlight = 0
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Entry count above which expired entries are swept.
        var sweepThreshold = 1024
    }

    private let state = Mutex(State())

    /// A throttle allowing `maxFailures` failures per `windowMilliseconds` (default: 5 per 15 minutes).
    public init(maxFailures: Int = 5, windowMilliseconds: Int64 = 15 * 60 * 1000) {
        self.maxFailures = maxFailures
        self.windowMilliseconds = windowMilliseconds
    }

    /// Starts an attempt for `username` at `now`; returns the seconds to wait when it is refused, else nil.
    ///
    /// Every attempt that was not refused must be ended with ``finish(username:outcome:now:)``.
    public func begin(username: String, now: Int64) -> Int? {
        state.withLock { state in
            sweepIfNeeded(&state, now: now)
            var entry = state.entries[username, default: Entry()]
            entry.failures.removeAll { $0 <= now - windowMilliseconds }
            if entry.failures.count + entry.inFlight >= maxFailures {
                state.entries[username] = entry
                // When enough failures age out to allow one more attempt (at least one second away).
                let index = entry.failures.count - maxFailures
                guard index >= 0 else { return 1 }
                let wait = entry.failures[index] + windowMilliseconds - now
                return max(1, Int((wait + 999) / 1000))
            }
            entry.inFlight += 1
            state.entries[username] = entry
            return nil
        }
    }

    /// Ends an attempt started by ``begin(username:now:)``: a failure is recorded; a success clears the username's
    /// failures or keeps them (``AttemptOutcome``).
    public func finish(username: String, outcome: AttemptOutcome, now: Int64) {
        state.withLock { state in
            guard var entry = state.entries[username] else { return }
            entry.inFlight = max(0, entry.inFlight - 1)
            switch outcome {
            case .failure: entry.failures.append(now)
            case .success: entry.failures.removeAll()
            case .successKeepingFailures: break
            }
            if entry.failures.isEmpty, entry.inFlight == 0 {
                state.entries[username] = nil
            } else {
                state.entries[username] = entry
            }
        }
    }

    /// Ends an attempt as a failure or as a success that clears the username's failures.
    public func finish(username: String, succeeded: Bool, now: Int64) {
        finish(username: username, outcome: succeeded ? .success : .failure, now: now)
    }

    /// How many usernames the throttle currently tracks (for tests).
    public var trackedCount: Int { state.withLock { $0.entries.count } }

    /// Drops usernames whose failures all aged out, when the table has grown past its threshold (amortized O(1)).
    private func sweepIfNeeded(_ state: inout State, now: Int64) {
        guard state.entries.count > state.sweepThreshold else { return }
        let cutoff = now - windowMilliseconds
        state.entries = state.entries.filter { _, entry in entry.inFlight > 0 || entry.failures.contains { $0 > cutoff } }
        state.sweepThreshold = max(1024, state.entries.count * 2)
    }
}
