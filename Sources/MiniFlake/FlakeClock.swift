import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The wall clock a generator reads, injected so tests and simulations control time.
public protocol FlakeClock: Sendable {
    /// The current time in milliseconds since the Unix epoch.
    func unixMilliseconds() -> Int64
    /// Blocks the calling thread for at least `milliseconds` of real time (a manual clock advances itself instead).
    func sleep(milliseconds: Int64)
}

/// The system's real-time clock, read with `clock_gettime`.
public struct SystemFlakeClock: FlakeClock {
    @usableFromInline let clockID: clockid_t

    @usableFromInline init(clockID: clockid_t) {
        self.clockID = clockID
    }

    /// `CLOCK_REALTIME_COARSE` on Linux: the cheapest read (about 6.5 ns), advancing in kernel ticks (4 ms on a
    /// 250 Hz kernel). Generators borrow sequence numbers within a tick, so the tick costs no IDs. Elsewhere it
    /// is ``precise``.
    public static let coarse: SystemFlakeClock = {
        #if os(Linux)
        SystemFlakeClock(clockID: clockid_t(CLOCK_REALTIME_COARSE))
        #else
        precise
        #endif
    }()

    /// `CLOCK_REALTIME`: millisecond-accurate, about 23 ns a read on Linux.
    public static let precise = SystemFlakeClock(clockID: CLOCK_REALTIME)

    /// Milliseconds since the Unix epoch.
    @inlinable
    public func unixMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(clockID, &now)
        return Int64(now.tv_sec) &* 1000 &+ Int64(now.tv_nsec) / 1_000_000
    }

    /// Sleeps at least `milliseconds` with `nanosleep`, resuming after signals.
    public func sleep(milliseconds: Int64) {
        guard milliseconds > 0 else { return }
        var request = timespec(tv_sec: Int(milliseconds / 1000), tv_nsec: Int(milliseconds % 1000) * 1_000_000)
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0, errno == EINTR {
            request = remaining
        }
    }
}

/// A clock that moves only when told to: for tests and the simulation. Thread-safe.
///
/// ``sleep(milliseconds:)`` does not block: it advances the clock by that amount and counts the call, so a test
/// can see exactly when a generator had to wait.
public final class ManualFlakeClock: FlakeClock {
    private struct State {
        var now: Int64
        var sleepCount = 0
    }

    private let state: Mutex<State>

    /// A clock reading `unixMilliseconds` until moved.
    public init(unixMilliseconds: Int64) {
        state = Mutex(State(now: unixMilliseconds))
    }

    /// The current reading, in Unix milliseconds.
    public func unixMilliseconds() -> Int64 {
        state.withLock { $0.now }
    }

    /// Sets the reading, backward or forward.
    public func set(unixMilliseconds: Int64) {
        state.withLock { $0.now = unixMilliseconds }
    }

    /// Moves the reading by `milliseconds` (negative moves it back).
    public func advance(milliseconds: Int64) {
        state.withLock { $0.now += milliseconds }
    }

    /// How many times ``sleep(milliseconds:)`` was called.
    public var sleepCount: Int {
        state.withLock { $0.sleepCount }
    }

    /// Advances the clock by `milliseconds` and counts the call; returns at once.
    public func sleep(milliseconds: Int64) {
        state.withLock {
            $0.now += milliseconds
            $0.sleepCount += 1
        }
    }
}
