/// Runs the seeds of a sweep several at a time and reports what running them one after another would.
///
/// Each seed is an independent run (its own server, devices, clocks and generators), so running several at once
/// changes nothing in any of them. Seeds start in ascending order, at most `jobs` at a time; after a violation no
/// higher seed starts, and the lowest failing seed wins, as in a sequential sweep.
public enum Sweep {
    /// - Parameters:
    ///   - seeds: the seeds, in order.
    ///   - jobs: how many run at once (at least 1).
    ///   - run: one seed's run; it must not share mutable state with other seeds' runs.
    ///   - finished: called as each seed's run ends (in the order they end, one call at a time), e.g. for progress.
    /// - Returns: every seed's outcome up to and including the lowest failing seed (all of them when none failed),
    ///   in seed order.
    /// - Throws: the first error a run throws (a setup failure); runs still in flight are cancelled.
    public static func run(
        _ seeds: ClosedRange<UInt64>, jobs: Int, finished: (UInt64, SimOutcome) -> Void = { _, _ in },
        _ run: @escaping @Sendable (UInt64) async throws -> SimOutcome
    ) async throws -> [(seed: UInt64, outcome: SimOutcome)] {
        try await withThrowingTaskGroup(of: (UInt64, SimOutcome).self) { group in
            var pending = seeds.makeIterator()
            var lowestFailure: UInt64?
            var results: [UInt64: SimOutcome] = [:]
            func startNext() {
                guard let seed = pending.next() else { return }
                if let lowestFailure, seed > lowestFailure { return }
                group.addTask { (seed, try await run(seed)) }
            }
            for _ in 0..<max(1, jobs) { startNext() }
            while let (seed, outcome) = try await group.next() {
                results[seed] = outcome
                finished(seed, outcome)
                if outcome.violation != nil { lowestFailure = min(lowestFailure ?? seed, seed) }
                startNext()
            }
            return results.keys.sorted().filter { seed in lowestFailure.map { seed <= $0 } ?? true }.map { ($0, results[$0]!) }
        }
    }
}
