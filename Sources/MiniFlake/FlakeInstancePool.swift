import Synchronization

/// A process-wide set of the 1024 instance numbers, leased to generators that must not collide
/// (``ThreadFlake`` leases one per thread).
///
/// The pool only coordinates within one process. Generators in different processes or machines need instance
/// numbers assigned from outside (configuration, a registry).
public final class FlakeInstancePool: Sendable {
    /// The pool ``ThreadFlake`` leases from.
    public static let shared = FlakeInstancePool()

    private struct State {
        /// Bit `i % 64` of word `i / 64` is set when instance `i` is leased.
        var leased = [UInt64](repeating: 0, count: (FlakeID.maxInstance + 1) / 64)
        var count = 0
    }

    private let state = Mutex(State())

    /// An empty pool: all 1024 numbers free.
    public init() {}

    /// Leases a free instance number chosen at random (so that short-lived processes are unlikely to pick the
    /// same numbers).
    ///
    /// - Throws: ``FlakeError/instancesExhausted`` when all 1024 are leased.
    public func lease() throws(FlakeError) -> Int {
        var generator = SystemRandomNumberGenerator()
        return try lease(using: &generator)
    }

    /// Leases a free instance number chosen with `generator` (seed it in tests).
    ///
    /// - Throws: ``FlakeError/instancesExhausted`` when all 1024 are leased.
    public func lease(using generator: inout some RandomNumberGenerator) throws(FlakeError) -> Int {
        try state.withLock { (state) throws(FlakeError) -> Int in
            let capacity = FlakeID.maxInstance + 1
            guard state.count < capacity else { throw .instancesExhausted }
            // The k-th free number, uniformly among the free ones.
            var k = Int.random(in: 0..<(capacity - state.count), using: &generator)
            for (wordIndex, word) in state.leased.enumerated() {
                let free = 64 - word.nonzeroBitCount
                guard k < free else {
                    k -= free
                    continue
                }
                for bit in 0..<64 where word & (1 << UInt64(bit)) == 0 {
                    if k == 0 {
                        state.leased[wordIndex] |= 1 << UInt64(bit)
                        state.count += 1
                        return wordIndex * 64 + bit
                    }
                    k -= 1
                }
            }
            preconditionFailure("free count out of step with the bitmap")
        }
    }

    /// Returns `instance` to the pool. Its generator must no longer be used.
    ///
    /// Releasing a number that is not leased is a programming error (it could let two generators share it) and
    /// traps.
    public func release(_ instance: Int) {
        precondition((0...FlakeID.maxInstance).contains(instance), "instance \(instance) is outside 0...1023")
        state.withLock { state in
            let mask: UInt64 = 1 << UInt64(instance % 64)
            precondition(state.leased[instance / 64] & mask != 0, "instance \(instance) is not leased")
            state.leased[instance / 64] &= ~mask
            state.count -= 1
        }
    }

    /// How many numbers are leased now.
    public var leasedCount: Int {
        state.withLock { $0.count }
    }
}
