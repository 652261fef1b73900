import Synchronization

/// A thread-safe ID generator: a `Mutex` around a ``FlakeMaker``, for async code and shared use.
///
/// Tasks hop threads at every `await`, so thread-local generators do not suit them; share one
/// `FlakeGenerator` per instance number instead. It has the maker's guarantees (strictly increasing IDs, drift
/// bound, high-water mark) at the cost of a lock per call; ``next(count:)`` takes the lock once for a batch.
public final class FlakeGenerator<Clock: FlakeClock>: Sendable {
    @usableFromInline let maker: Mutex<FlakeMaker<Clock>>

    /// The instance number in every ID, `0...1023`.
    public let instance: Int

    /// A generator for `instance` reading `clock`; see ``FlakeMaker/init(instance:clock:maxDriftMilliseconds:after:)``.
    ///
    /// - Throws: ``FlakeError/instanceOutOfRange(_:)``.
    public init(
        instance: Int, clock: Clock, maxDriftMilliseconds: Int64 = 100, after highWaterMark: FlakeID? = nil
    ) throws(FlakeError) {
        let maker = try FlakeMaker(
            instance: instance, clock: clock, maxDriftMilliseconds: maxDriftMilliseconds, after: highWaterMark
        )
        self.instance = instance
        self.maker = Mutex(maker)
    }

    /// The next ID, greater than every ID this generator issued before.
    ///
    /// - Throws: ``FlakeError/timeRangeExhausted`` past 2087-11-05T15:47:35.551Z.
    @inlinable
    public func next() throws(FlakeError) -> FlakeID {
        try maker.withLock { (maker) throws(FlakeError) -> FlakeID in try maker.next() }
    }

    /// `count` consecutive IDs in increasing order, under one lock acquisition.
    ///
    /// - Throws: ``FlakeError/timeRangeExhausted``; the IDs made before the error are dropped.
    public func next(count: Int) throws(FlakeError) -> [FlakeID] {
        precondition(count >= 0, "count must be >= 0")
        var ids: [FlakeID] = []
        ids.reserveCapacity(count)
        try maker.withLock { (maker) throws(FlakeError) in
            for _ in 0..<count { ids.append(try maker.next()) }
        }
        return ids
    }

    /// The last ID issued: the high-water mark to persist (see ``FlakeMaker/lastIssued``).
    public var lastIssued: FlakeID? {
        maker.withLock { $0.lastIssued }
    }
}

extension FlakeGenerator where Clock == SystemFlakeClock {
    /// A generator reading ``SystemFlakeClock/coarse``.
    ///
    /// - Throws: ``FlakeError/instanceOutOfRange(_:)``.
    public convenience init(
        instance: Int, maxDriftMilliseconds: Int64 = 100, after highWaterMark: FlakeID? = nil
    ) throws(FlakeError) {
        try self.init(instance: instance, clock: .coarse, maxDriftMilliseconds: maxDriftMilliseconds, after: highWaterMark)
    }
}
