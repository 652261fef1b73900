import Synchronization

/// CDCounter: the 64-bit ID scheme of a 2016 Core Data pattern, kept for comparison and compatibility. Never
/// FlakeNotes' default; see Docs/MINIFLAKE.md ("Other ID schemes") for what it costs.
///
/// A counter that, at its first use, starts at the clock's whole Unix seconds × 1,000,000, and adds 1 per ID
/// under a lock (the original used a serial queue): the first ID is `seconds × 1_000_000 + 1`, the next one more.
/// Its author meant one counter per process and assumed fewer than a million IDs per run. Faithful to that, it
/// reads the clock once, so:
/// - two counters (two devices, or two runs of one app) whose first use falls in the same second issue the same
///   sequence;
/// - a run of more than a million IDs walks into the range of runs that start in the following seconds;
/// - a clock set back before a run starts repeats the IDs of an earlier run that started in that second.
///
/// The IDs are positive `Int64`s of about 1.8 × 10^15 today, so they are valid MiniFlake values on the wire (read
/// as MiniFlake, their timestamp falls in March 2018; it means nothing).
public final class CDCounter<Clock: FlakeClock>: Sendable {
    /// How far apart the starting values of runs one second apart are: 1,000,000.
    public static var idsPerSecond: Int64 { 1_000_000 }

    private let clock: Clock
    /// The last ID issued; nil before the first use.
    private let counter = Mutex<Int64?>(nil)

    /// A counter reading `clock` at its first use (not now).
    public init(clock: Clock) {
        self.clock = clock
    }

    /// The next ID: at the first call the counter starts at the clock's whole Unix seconds × 1,000,000; every call
    /// adds 1 and returns the counter.
    ///
    /// - Throws: ``FlakeError/zero`` or ``FlakeError/negative(_:)`` when the clock read before 1970 at the first
    ///   use; ``FlakeError/timeRangeExhausted`` if the counter would pass `Int64.max` (a clock some 292,000 years
    ///   ahead).
    public func next() throws(FlakeError) -> FlakeID {
        try counter.withLock { (counter) throws(FlakeError) -> FlakeID in
            let value: Int64
            if let last = counter {
                let (sum, overflow) = last.addingReportingOverflow(1)
                if overflow { throw .timeRangeExhausted }
                value = sum
            } else {
                let start = try Self.start(unixMilliseconds: clock.unixMilliseconds())
                let (sum, overflow) = start.addingReportingOverflow(1)
                if overflow { throw .timeRangeExhausted }
                value = sum
            }
            let id = try FlakeID(validating: value)
            counter = value
            return id
        }
    }

    /// The last ID issued, nil before the first use.
    public var lastIssued: FlakeID? {
        counter.withLock { value in value.flatMap { try? FlakeID(validating: $0) } }
    }

    /// The counter's starting value for a clock reading: the whole Unix seconds (rounded down) × 1,000,000.
    ///
    /// - Throws: ``FlakeError/timeRangeExhausted`` when the product does not fit an `Int64`.
    public static func start(unixMilliseconds: Int64) throws(FlakeError) -> Int64 {
        let seconds = unixMilliseconds >= 0 ? unixMilliseconds / 1000 : (unixMilliseconds - 999) / 1000
        let (start, overflow) = seconds.multipliedReportingOverflow(by: idsPerSecond)
        if overflow { throw .timeRangeExhausted }
        return start
    }
}
