/// Shortens a failing schedule to a smaller one that still fails (Zeller's ddmin over the step list, then a pass
/// that drops single steps), re-running the simulation from scratch for every candidate.
public enum Shrinker {
    /// - Parameters:
    ///   - steps: a schedule for which `stillFails` is true (its steps, or their indices in a longer schedule, so that
    ///     the caller learns which of the original steps remain).
    ///   - maxRuns: a bound on re-runs, so shrinking always ends.
    ///   - stillFails: runs a candidate schedule and tells whether it fails the same way.
    /// - Returns: the smallest failing schedule found (at worst `steps` itself) and the number of runs it took.
    public static func shrink<Step>(
        _ steps: [Step], maxRuns: Int = 400, stillFails: ([Step]) async -> Bool
    ) async -> (steps: [Step], runs: Int) {
        var current = steps
        var runs = 0
        var granularity = 2
        while current.count >= 2 && runs < maxRuns {
            let chunk = Int((Double(current.count) / Double(granularity)).rounded(.up))
            var reduced = false
            var start = 0
            while start < current.count && runs < maxRuns {
                let end = min(current.count, start + chunk)
                let candidate = Array(current[..<start] + current[end...])
                runs += 1
                if !candidate.isEmpty, await stillFails(candidate) {
                    current = candidate
                    granularity = max(granularity - 1, 2)
                    reduced = true
                    break
                }
                start = end
            }
            if !reduced {
                if granularity >= current.count { break }
                granularity = min(current.count, granularity * 2)
            }
        }
        // Final pass: try dropping each remaining step once.
        var index = current.count - 1
        while index >= 0 && runs < maxRuns && current.count > 1 {
            var candidate = current
            candidate.remove(at: index)
            runs += 1
            if await stillFails(candidate) { current = candidate }
            index -= 1
        }
        return (current, runs)
    }
}
