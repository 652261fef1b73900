/// A single-owner ID generator: no locks, no allocation, the fastest path (about 8 ns an ID with
/// ``SystemFlakeClock/coarse``).
///
/// IDs from one maker strictly increase, even when the clock steps back: the maker keeps the last millisecond it
/// used and hands out the next sequence numbers of it, borrowing the following millisecond when 4096 are used
/// up. Borrowed time may run at most `maxDriftMilliseconds` ahead of the highest clock reading seen; past that,
/// ``next()`` sleeps a millisecond at a time (crediting each slept millisecond, so a clock set back by hours
/// does not stall it for hours). Sustained output is therefore capped at the format's 4096 IDs per millisecond.
///
/// A maker is a value: copying it copies its state, and two copies would issue the same IDs. Keep one owner
/// (a thread, an actor, a `Mutex`); for shared use see ``FlakeGenerator``. Persist ``lastIssued`` and pass it
/// back as `after:` on restart so that a clock set back across the restart never repeats an ID.
public struct FlakeMaker<Clock: FlakeClock>: Sendable {
    /// The default bound on borrowed time, 100 ms.
    public static var defaultMaxDriftMilliseconds: Int64 { 100 }

    /// The instance number in every ID, `0...1023`.
    public let instance: Int

    @usableFromInline let clock: Clock
    @usableFromInline let maxDrift: Int64
    @usableFromInline let instanceBits: Int64
    /// Milliseconds since the MiniFlake epoch of the last ID, -1 before the first.
    @usableFromInline var lastMilliseconds: Int64
    /// Sequence number of the last ID.
    @usableFromInline var sequence: Int64
    /// The highest clock reading seen (MiniFlake epoch ms), plus credited sleeps.
    @usableFromInline var clockHigh: Int64
    /// The mark the maker started after, returned by `lastIssued` until it issues an ID.
    @usableFromInline let startMark: FlakeID?

    /// A maker for `instance` reading `clock`.
    ///
    /// - Parameters:
    ///   - instance: `0...1023`, unique among the generators that can run at the same time.
    ///   - clock: The wall clock.
    ///   - maxDriftMilliseconds: How far borrowed time may run ahead of the clock, `>= 0` (0 waits for the
    ///     clock, like a classic snowflake generator).
    ///   - highWaterMark: The last ID issued before a restart (see ``lastIssued``); every ID will be greater.
    /// - Throws: ``FlakeError/instanceOutOfRange(_:)``.
    public init(
        instance: Int, clock: Clock, maxDriftMilliseconds: Int64 = 100, after highWaterMark: FlakeID? = nil
    ) throws(FlakeError) {
        guard (0...FlakeID.maxInstance).contains(instance) else { throw .instanceOutOfRange(instance) }
        precondition(maxDriftMilliseconds >= 0, "maxDriftMilliseconds must be >= 0")
        self.instance = instance
        self.instanceBits = Int64(instance)
        self.clock = clock
        self.maxDrift = maxDriftMilliseconds
        self.startMark = highWaterMark
        if let highWaterMark {
            lastMilliseconds = highWaterMark.milliseconds
            sequence = Int64(highWaterMark.sequence)
            clockHigh = highWaterMark.milliseconds
        } else {
            lastMilliseconds = -1
            sequence = 0
            clockHigh = -1
        }
    }

    /// The next ID: greater than every ID this maker issued before.
    ///
    /// May sleep when borrowed time reaches the drift bound (only when more than 4096 IDs a millisecond are
    /// asked for over a stretch, or the clock was set back).
    ///
    /// - Throws: ``FlakeError/timeRangeExhausted`` past 2087-11-05T15:47:35.551Z; the maker never wraps.
    @inlinable
    public mutating func next() throws(FlakeError) -> FlakeID {
        var reading = clock.unixMilliseconds() &- FlakeID.epochUnixMilliseconds
        if reading < 0 { reading = 0 }
        if reading > lastMilliseconds {
            if reading > FlakeID.maxMilliseconds { throw .timeRangeExhausted }
            lastMilliseconds = reading
            // Only at the epoch's first millisecond with instance 0 would sequence 0 give the invalid ID 0.
            sequence = reading == 0 && instanceBits == 0 ? 1 : 0
            clockHigh = reading
        } else {
            if reading > clockHigh { clockHigh = reading }
            sequence &+= 1
            if sequence > Int64(FlakeID.maxSequence) {
                try borrowNextMillisecond()
            }
        }
        return FlakeID(
            uncheckedRawValue: lastMilliseconds << FlakeID.millisecondsShift | sequence << FlakeID.sequenceShift
                | instanceBits
        )
    }

    /// The slow path: the millisecond's 4096 sequence numbers are used, move to the next millisecond, sleeping
    /// while that would put borrowed time more than `maxDrift` ahead of the clock.
    @usableFromInline
    mutating func borrowNextMillisecond() throws(FlakeError) {
        let next = lastMilliseconds + 1
        if next > FlakeID.maxMilliseconds {
            sequence = Int64(FlakeID.maxSequence)
            throw .timeRangeExhausted
        }
        while next - clockHigh > maxDrift {
            clock.sleep(milliseconds: 1)
            let reading = max(clock.unixMilliseconds() - FlakeID.epochUnixMilliseconds, 0)
            // Credit the slept millisecond even when the clock says otherwise (it was set back).
            clockHigh = max(clockHigh + 1, reading)
        }
        lastMilliseconds = next
        sequence = 0
    }

    /// The last ID issued: the high-water mark to persist. Before the first ``next()`` it is the `after:` mark
    /// the maker was started with, or `nil`.
    public var lastIssued: FlakeID? {
        guard lastMilliseconds >= 0 else { return nil }
        if let startMark, startMark.milliseconds == lastMilliseconds, Int64(startMark.sequence) == sequence {
            return startMark
        }
        return FlakeID(
            uncheckedRawValue: lastMilliseconds << FlakeID.millisecondsShift | sequence << FlakeID.sequenceShift
                | instanceBits
        )
    }
}

extension FlakeMaker where Clock == SystemFlakeClock {
    /// A maker reading ``SystemFlakeClock/coarse``.
    ///
    /// - Throws: ``FlakeError/instanceOutOfRange(_:)``.
    public init(instance: Int, maxDriftMilliseconds: Int64 = 100, after highWaterMark: FlakeID? = nil) throws(FlakeError) {
        try self.init(instance: instance, clock: .coarse, maxDriftMilliseconds: maxDriftMilliseconds, after: highWaterMark)
    }
}
