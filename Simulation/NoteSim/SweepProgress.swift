/// Progress of a long sweep, for stderr: a line at most every `interval` as seeds finish, none for sweeps that end
/// sooner (the CI sweep, a single run), so a maintainer running thousands of seeds sees it move and when it will end.
struct SweepProgress {
    let total: Int
    let started: ContinuousClock.Instant
    let interval: Duration
    private var lastLine: ContinuousClock.Instant
    private(set) var done = 0
    private(set) var violating = 0

    init(total: Int, started: ContinuousClock.Instant, interval: Duration = .seconds(30)) {
        self.total = total
        self.started = started
        self.interval = interval
        lastLine = started
    }

    /// Counts a finished seed; returns the line to print, if one is due.
    mutating func finished(_ outcome: SimOutcome, at now: ContinuousClock.Instant) -> String? {
        done += 1
        if outcome.violation != nil { violating += 1 }
        guard done < total, now - lastLine >= interval else { return nil }
        lastLine = now
        let elapsed = Self.seconds(now - started)
        let left = elapsed * Double(total - done) / Double(done)
        let state = violating == 0 ? "no violation" : "\(violating) seed\(violating == 1 ? "" : "s") with a violation (the lowest is reported at the end)"
        return "notes-sim: \(done) of \(total) seeds done, \(state), \(Self.format(elapsed)) elapsed, about \(Self.format(left)) left"
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// `42 s`, `4 min 12 s`, `1 h 03 min`.
    static func format(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        if total < 60 { return "\(total) s" }
        if total < 3600 { return "\(total / 60) min \(total % 60) s" }
        let minutes = total / 60 % 60
        return "\(total / 3600) h \(minutes < 10 ? "0" : "")\(minutes) min"
    }
}
