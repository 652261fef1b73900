import Foundation

/// The index of a sweep (`notes-sim --seeds A..B --report FILE`): every seed run, with its outcome and duration,
/// failing seeds first, each failing seed linking to its timeline (written beside the index); a passing seed shows
/// the command that writes its timeline on demand. One self-contained page, like ``TimelineReport``'s.
public enum SweepReport {
    /// One seed's line.
    public struct Row {
        public var seed: UInt64
        public var outcome: SimOutcome
        /// The timeline's file name, relative to the index, when one was written.
        public var link: String?
    }

    /// - Parameters:
    ///   - shape: the runs' parameters in words.
    ///   - seconds: the sweep's wall time.
    ///   - command: the command that writes a seed's timeline, with `{seed}` where the seed goes.
    ///   - note: a line for the reader (seeds not run after a failure), if any.
    public static func render(title: String, shape: String, seconds: Double, rows: [Row], command: String, note: String?) -> String {
        var total = SimSummary()
        for row in rows { total.add(row.outcome.summary) }
        let model = Model(
            title: title, shape: shape, seconds: seconds, command: command, note: note,
            totals: [
                ["steps", "\(total.steps)"], ["syncs", "\(total.syncs)"], ["faults injected", "\(total.faults)"],
                ["conflict copies", "\(total.conflicts)"], ["server restarts", "\(total.restarts)"],
            ],
            seeds: rows.map { row in
                let summary = row.outcome.summary
                return Model.Seed(
                    seed: row.seed, passed: row.outcome.violation == nil, invariant: row.outcome.violation?.invariant.rawValue,
                    step: row.outcome.violation?.step, detail: row.outcome.violation?.detail,
                    seconds: SweepProgress.seconds(row.outcome.duration),
                    syncs: summary.syncs, faults: summary.faults, conflicts: summary.conflicts, notes: summary.notes,
                    link: row.link)
            })
        return ReportPage.html(title: title, kind: "sweep", data: TimelineReport.encode(model))
    }

    struct Model: Encodable {
        struct Seed: Encodable {
            var seed: UInt64
            var passed: Bool
            var invariant: String?
            var step: Int?
            var detail: String?
            var seconds: Double
            var syncs: Int
            var faults: Int
            var conflicts: Int
            var notes: Int
            var link: String?
        }
        var title: String
        var shape: String
        var seconds: Double
        /// What writes a seed's timeline on demand, `{seed}` standing for the seed.
        var command: String
        var note: String?
        var totals: [[String]]
        var seeds: [Seed]
    }

    /// Where the timeline of `seed` goes beside the index at `path`: `sweep.html` → `sweep-seed-17.html`.
    public static func timelinePath(forSeed seed: UInt64, besideIndex path: String) -> String {
        let url = URL(fileURLWithPath: path)
        let base = url.pathExtension.lowercased() == "html" || url.pathExtension.lowercased() == "htm"
            ? url.deletingPathExtension().lastPathComponent : url.lastPathComponent
        return url.deletingLastPathComponent().appendingPathComponent("\(base)-seed-\(seed).html").path
    }
}
