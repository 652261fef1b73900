import ArgumentParser
import Foundation
import MiniFlake

/// `notes-sim`: runs the multi-device sign-in/sign-out simulation and checks its invariants.
public struct NoteSimCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "notes-sim",
        abstract: "Simulate many devices signing in and out, editing offline and syncing, and check that nothing is duplicated, lost or leaked.",
        discussion: """
            Each run is generated from a seed: accounts, devices, and a schedule of steps (create, edit, delete, \
            sync, sign out, sign in to the same or another account, clock jumps, concurrent edits, tags, pins and \
            archiving, also concurrent, forced client-ID collisions, server restarts) with transport faults (lost \
            requests, lost responses, duplicated requests, interrupted syncs). After every step and at quiescence it \
            checks: no duplicates, no cross-account data, no lost edit, convergence (texts, tags and flags), cursors \
            only move forward, server IDs never change, valid IDs, pulls miss nothing, a push delivered twice is \
            answered the same; at quiescence also no lost tag change, and every version the server acknowledged in \
            the note's history. Half the accounts (--encrypted-share) are end-to-end encrypted, their notes written \
            in canary words: the server must serve them only as envelopes that open, and its store's files (the \
            SQLite database, WAL and -shm) must hold no canary word, scanned after every restart and at the end of \
            every run. Each step checks what it could have changed (the \
            accounts' changed notes, the stores of the devices it acted on); a server restart and the end of the run \
            check everything from scratch.

            A sweep runs --jobs seeds at once; every seed runs alone and the outcome is what a sequential sweep gives.

            On a violation it prints the seed, the step, the invariant and the shortest trace it could find that \
            still fails, writes that trace to --trace-out (replay it with --replay), and exits 1.

            Exit codes: 0 no violation; 1 a violation; 2 usage or setup error.
            """)

    @Option(help: "The seed of a single run.")
    var seed: UInt64 = 1

    @Option(help: "A sweep of seeds, FROM..TO inclusive (overrides --seed).")
    var seeds: String?

    @Option(help: "Accounts.")
    var accounts: Int = 2

    @Option(help: "Devices.")
    var devices: Int = 3

    @Option(help: "Steps per run, besides the tag steps (about one more in five).")
    var steps: Int = 300

    @Option(help: "Probability of a fault on each request of a network step (0...1).")
    var faults: Double = 0.05

    @Option(
        help: ArgumentHelp(
            "How every device mints client IDs: \(IDScheme.allCases.map(\.rawValue).joined(separator: ", ")) (default: miniflake). With this option the summary also counts the client-ID collisions inside one account.",
            valueName: "scheme"),
        transform: NoteSimCommand.parseIDScheme)
    var idScheme: IDScheme?

    @Option(help: "Devices in watch mode (devices 0..<N): their watch iterations, with faults on the feed, are mixed into the schedule, and at quiescence they must converge through them alone. 0: none, the schedules of earlier versions.")
    var watchers: Int = 1

    @Option(
        help: "Run against a notesyncd at this URL instead of in-process; several comma-separated URLs (daemons sharing one PostgreSQL) spread the devices over them."
    )
    var server: String?

    @Option(help: "With --server: a shell command that restarts the daemon (for restart steps).")
    var restartCommand: String?

    @Option(
        help: ArgumentHelp(
            "With --server: the daemon's SQLite database file (its -wal and -shm beside it, and the attachment chunk files under chunks/ beside it), scanned for canary words after every restart and at the end of every run. In-process, the simulation's own store is scanned.",
            valueName: "path"))
    var scanStore: String?

    @Option(
        help: ArgumentHelp(
            "With --server: the daemons' PostgreSQL database (a postgres:// URL), its tables dumped with pg_dump and scanned for canary words after every restart and at the end of every run.",
            valueName: "url"))
    var scanPostgres: String?

    @Option(help: "The share of accounts that are end-to-end encrypted, 0...1 (round(share × accounts) of them, from account seed mod accounts on; their notes are written in canary words).")
    var encryptedShare: Double = SimParameters.defaultEncryptedShare

    @Option(
        help: ArgumentHelp(
            "Write a self-contained HTML report: for one run, its timeline (a failing run opens on its failing step); for a sweep, an index of every seed run (outcome, duration; failing seeds first) with the timeline of each failing seed beside it (FILE-seed-N.html). A passing seed's timeline is written on demand: the index shows the command.",
            valueName: "file"))
    var report: String?

    @Option(help: "Where to write the shortened failing trace (JSON).")
    var traceOut: String?

    @Option(help: "Replay a trace written by --trace-out instead of generating one.")
    var replay: String?

    @Option(help: "Seeds run at once (default: the number of cores; 1 with --restart-command, which restarts the daemon every run uses).")
    var jobs: Int?

    @Flag(help: "Do not shorten a failing trace.")
    var noShrink = false

    @Flag(help: "Print the summary as one JSON object.")
    var json = false

    public init() {}

    /// Parses the process arguments and runs (what `main.swift` calls, so the executable needs no other import).
    public static func runFromCommandLine() async { await main() }

    public func validate() throws {
        guard accounts >= 1, accounts <= 100 else { throw ValidationError("--accounts must be 1...100") }
        guard devices >= 1, devices <= 100 else { throw ValidationError("--devices must be 1...100") }
        guard steps >= 1 else { throw ValidationError("--steps must be at least 1") }
        guard (0...1).contains(faults) else { throw ValidationError("--faults must be between 0 and 1") }
        if let seeds { _ = try Self.parseRange(seeds) }
        if restartCommand != nil && server == nil { throw ValidationError("--restart-command needs --server") }
        if scanStore != nil && server == nil { throw ValidationError("--scan-store needs --server (in-process, the simulation's own store is scanned)") }
        if scanPostgres != nil && server == nil { throw ValidationError("--scan-postgres needs --server (in-process, the simulation's own store is scanned)") }
        guard (0...1).contains(encryptedShare) else { throw ValidationError("--encrypted-share must be between 0 and 1") }
        if let jobs {
            guard jobs >= 1 else { throw ValidationError("--jobs must be at least 1") }
            if jobs > 1 && restartCommand != nil {
                throw ValidationError("--restart-command restarts the daemon under every run: use --jobs 1")
            }
        }
    }

    /// How many seeds run at once.
    var resolvedJobs: Int {
        if let jobs { return jobs }
        return restartCommand == nil ? max(1, ProcessInfo.processInfo.activeProcessorCount) : 1
    }

    static func parseIDScheme(_ text: String) throws -> IDScheme {
        guard let scheme = IDScheme(rawValue: text) else {
            throw ValidationError("--id-scheme takes \(IDScheme.allCases.map(\.rawValue).joined(separator: ", ")), not '\(text)'")
        }
        return scheme
    }

    static func parseRange(_ text: String) throws -> ClosedRange<UInt64> {
        let parts = text.split(separator: ".", omittingEmptySubsequences: true)
        guard text.contains(".."), parts.count == 2, let from = UInt64(parts[0]), let to = UInt64(parts[1]), from <= to else {
            throw ValidationError("--seeds takes FROM..TO, e.g. 1..200")
        }
        return from...to
    }

    public func run() async throws {
        let target: SimTarget = server.map { .http(url: $0, restartCommand: restartCommand, storePath: scanStore, postgresURL: scanPostgres) } ?? .inProcess
        let range: ClosedRange<UInt64> = try seeds.map(Self.parseRange) ?? seed...seed
        var total = SimSummary()
        var runs = 0
        let started = Date()
        let replayed: [SimAction]? = try replay.map(Self.readTrace)
        let seeds = replayed == nil ? range : range.lowerBound...range.lowerBound
        // A single run (or a replay) records itself for its timeline; a sweep's report is an index, and only its
        // failing seeds are run again, recorded.
        let isSweep = seeds.count > 1
        let (accounts, devices, steps, faults, server) = (accounts, devices, steps, faults, server)
        let (idScheme, watchers, encryptedShare) = (idScheme, watchers, encryptedShare)
        let recordsRuns = report != nil && !isSweep
        let results: [(seed: UInt64, outcome: SimOutcome)]
        var progress = SweepProgress(total: seeds.count, started: .now)
        var finished: [UInt64: SimOutcome] = [:]
        do {
            results = try await Sweep.run(
                seeds, jobs: resolvedJobs,
                finished: { seed, outcome in
                    finished[seed] = outcome
                    if let line = progress.finished(outcome, at: .now) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
                }
            ) { seed in
                let parameters = SimParameters(seed: seed, accounts: accounts, devices: devices, steps: steps, faultRate: faults, idScheme: idScheme, watchers: watchers, encryptedShare: encryptedShare)
                let schedule = replayed ?? ScheduleGenerator.generate(parameters)
                let tag = server == nil ? "" : "\(seed)-\(UInt32.random(in: 0...UInt32.max))"
                let clock = ContinuousClock()
                let start = clock.now
                do {
                    var outcome = try await Simulation.run(schedule, parameters: parameters, target: target, recordEvents: recordsRuns, runTag: tag)
                    outcome.duration = clock.now - start
                    return outcome
                } catch {
                    throw SweepSetupError(seed: seed, error: "\(error)")
                }
            }
        } catch let error as SweepSetupError {
            FileHandle.standardError.write(Data("notes-sim: seed \(error.seed): setup failed: \(error.error)\n".utf8))
            throw ExitCode(2)
        }
        let seconds = Date().timeIntervalSince(started)
        for (seed, outcome) in results {
            runs += 1
            total.add(outcome.summary)
            let parameters = SimParameters(seed: seed, accounts: accounts, devices: devices, steps: steps, faultRate: faults, idScheme: idScheme, watchers: watchers, encryptedShare: encryptedShare)
            let schedule = replayed ?? ScheduleGenerator.generate(parameters)
            if let violation = outcome.violation {
                let trace = try await reportViolation(violation, seed: seed, parameters: parameters, schedule: schedule, target: target)
                if let report {
                    let timeline = isSweep ? SweepReport.timelinePath(forSeed: seed, besideIndex: report) : report
                    try await writeTimeline(
                        timeline, seed: seed, parameters: parameters, schedule: schedule, target: target,
                        recorded: recordsRuns ? outcome : nil, violation: violation, trace: trace)
                    if isSweep {
                        try await writeIndex(
                            report, finished: finished, lowestFailure: seed, range: seeds, seconds: seconds, target: target)
                    }
                }
                throw ExitCode(1)
            }
            if let report, !isSweep {
                try await writeTimeline(report, seed: seed, parameters: parameters, schedule: schedule, target: target, recorded: outcome)
            }
        }
        if let report, isSweep {
            try await writeIndex(report, finished: finished, lowestFailure: nil, range: seeds, seconds: seconds, target: target)
        }
        if json {
            var object: [String: Any] = ["runs": runs, "seconds": (seconds * 100).rounded() / 100, "violations": 0]
            for (key, value) in total.fields { object[key] = Int(value) ?? value }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("notes-sim: \(runs) run\(runs == 1 ? "" : "s") (seeds \(range.lowerBound)...\(range.upperBound)), \(accounts) accounts, \(devices) devices, \(steps) steps each, faults \(faults): no violation in \(String(format: "%.1f", seconds)) s")
            for (key, value) in total.fields { print("  \(key): \(value)") }
        }
    }

    /// Prints the violation and its shortened trace (written to --trace-out); returns the steps of the shortened
    /// trace as indices into `schedule` (nil with --no-shrink).
    func reportViolation(
        _ violation: Violation, seed: UInt64, parameters: SimParameters, schedule: [SimAction], target: SimTarget
    ) async throws -> [Int]? {
        var stderr = FileHandle.standardError
        print("notes-sim: VIOLATION with seed \(seed): \(violation)", to: &stderr)
        var kept = Array(0..<min(violation.step + 1, schedule.count))
        if !noShrink {
            let invariant = violation.invariant
            // Shrunk as indices into the schedule, so the report can mark which of the run's steps remain.
            let shrunk = await Shrinker.shrink(kept) { candidate in
                let tag = server == nil ? "" : "shrink-\(UInt32.random(in: 0...UInt32.max))"
                guard let outcome = try? await Simulation.run(candidate.map { schedule[$0] }, parameters: parameters, target: target, runTag: tag)
                else { return false }
                return outcome.violation?.invariant == invariant
            }
            kept = shrunk.steps
            print("notes-sim: shortened the trace from \(violation.step + 1) to \(kept.count) steps in \(shrunk.runs) re-runs", to: &stderr)
        }
        let trace = kept.map { schedule[$0] }
        let final = try await Simulation.run(trace, parameters: parameters, target: target,
                                             runTag: server == nil ? "" : "final-\(UInt32.random(in: 0...UInt32.max))")
        var schemeArgument = parameters.idScheme.map { " --id-scheme \($0.rawValue)" } ?? ""
        // Which accounts are encrypted depends on the seed (and the share).
        if parameters.encryptedShare ?? 0 > 0 { schemeArgument += " --seed \(seed) --encrypted-share \(parameters.encryptedShare ?? 0)" }
        print("notes-sim: trace (replay with --replay \(traceOut ?? "<--trace-out FILE>") --accounts \(parameters.accounts) --devices \(parameters.devices)\(schemeArgument)):", to: &stderr)
        for (index, action) in trace.enumerated() { print("  \(index): \(action)", to: &stderr) }
        if let shortViolation = final.violation { print("notes-sim: the shortened trace fails with: \(shortViolation)", to: &stderr) }
        if let traceOut {
            let data = try JSONEncoder().encode(Trace(seed: seed, parameters: parameters, violation: violation.description, steps: trace))
            try data.write(to: URL(fileURLWithPath: traceOut))
        }
        return noShrink ? nil : kept
    }

    /// Writes the timeline of one run. A failing run's timeline is of the run as it went up to its violation (run
    /// again, recorded, unless `recorded` holds it), with the shortened trace's steps marked.
    func writeTimeline(
        _ path: String, seed: UInt64, parameters: SimParameters, schedule: [SimAction], target: SimTarget, recorded: SimOutcome?,
        violation: Violation? = nil, trace: [Int]? = nil
    ) async throws {
        var outcome: SimOutcome
        if let recorded, recorded.recording != nil {
            outcome = recorded
        } else {
            let steps = violation.map { Array(schedule.prefix($0.step + 1)) } ?? schedule
            let tag = server == nil ? "" : "report-\(UInt32.random(in: 0...UInt32.max))"
            outcome = try await Simulation.run(steps, parameters: parameters, target: target, recordEvents: true, runTag: tag)
            // Over HTTP a second run may go otherwise; the page still names the violation found first.
            if outcome.violation == nil { outcome.violation = violation }
        }
        let run = TimelineReport.Run(
            seed: seed, parameters: parameters, steps: schedule, outcome: outcome, trace: trace, command: reproduceCommand(seed: seed))
        try TimelineReport.render(run).write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Writes a sweep's index, and a timeline beside it for each failing seed other than `lowestFailure` (whose
    /// timeline, with its shortened trace, the caller wrote).
    func writeIndex(
        _ path: String, finished: [UInt64: SimOutcome], lowestFailure: UInt64?, range: ClosedRange<UInt64>, seconds: Double,
        target: SimTarget
    ) async throws {
        var rows: [SweepReport.Row] = []
        for (seed, outcome) in finished.sorted(by: { $0.key < $1.key }) {
            var link: String?
            if let violation = outcome.violation {
                let timeline = SweepReport.timelinePath(forSeed: seed, besideIndex: path)
                if seed != lowestFailure {
                    let parameters = SimParameters(
                        seed: seed, accounts: accounts, devices: devices, steps: steps, faultRate: faults, idScheme: idScheme, watchers: watchers, encryptedShare: encryptedShare)
                    try await writeTimeline(
                        timeline, seed: seed, parameters: parameters, schedule: ScheduleGenerator.generate(parameters), target: target,
                        recorded: nil, violation: violation)
                }
                link = URL(fileURLWithPath: timeline).lastPathComponent
            }
            rows.append(.init(seed: seed, outcome: outcome, link: link))
        }
        var note: String?
        if let lowestFailure, lowestFailure < range.upperBound {
            let skipped = range.upperBound - lowestFailure - UInt64(finished.keys.filter { $0 > lowestFailure }.count)
            note = "A sweep stops at its lowest failing seed (\(lowestFailure)): the higher seeds listed were already running; \(skipped) other\(skipped == 1 ? " was" : "s were") not run."
        }
        let html = SweepReport.render(
            title: "notes-sim sweep, seeds \(range.lowerBound)...\(range.upperBound)",
            shape: TimelineReport.shape(
                SimParameters(seed: range.lowerBound, accounts: accounts, devices: devices, steps: steps, faultRate: faults, idScheme: idScheme, watchers: watchers, encryptedShare: encryptedShare),
                steps: steps),
            seconds: seconds, rows: rows, command: reproduceCommand(seed: nil) + " --report seed-{seed}.html", note: note)
        try html.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// The command line that runs `seed` again with this run's options (nil: `{seed}` in its place).
    func reproduceCommand(seed: UInt64?) -> String {
        var parts = ["notes-sim"]
        if let replay { parts += ["--replay", replay] } else { parts += ["--seed", seed.map { "\($0)" } ?? "{seed}", "--steps", "\(steps)"] }
        parts += ["--accounts", "\(accounts)", "--devices", "\(devices)", "--faults", "\(faults)", "--watchers", "\(watchers)"]
        if let idScheme { parts += ["--id-scheme", idScheme.rawValue] }
        if encryptedShare != SimParameters.defaultEncryptedShare { parts += ["--encrypted-share", "\(encryptedShare)"] }
        if let server { parts += ["--server", server] }
        if let restartCommand { parts += ["--restart-command", restartCommand] }
        if let scanStore { parts += ["--scan-store", scanStore] }
        if let scanPostgres { parts += ["--scan-postgres", scanPostgres] }
        return parts.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ")
    }
}

/// A run that could not be set up, with its seed.
struct SweepSetupError: Error {
    var seed: UInt64
    var error: String
}

extension NoteSimCommand {
    /// The steps of a trace written by --trace-out.
    ///
    /// - Throws: exit status 2 with one line on stderr when the file cannot be read or is not a trace this notes-sim
    ///   can replay (traces name their steps; one written by a notes-sim with other steps does not decode).
    static func readTrace(_ path: String) throws -> [SimAction] {
        var stderr = FileHandle.standardError
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            print("notes-sim: cannot read the trace \(path): \(error.localizedDescription)", to: &stderr)
            throw ExitCode(2)
        }
        do {
            return try JSONDecoder().decode(Trace.self, from: data).steps
        } catch {
            print(
                "notes-sim: \(path) is not a trace this notes-sim can replay (written by another version of it, whose steps differ, or not a trace): \(error)",
                to: &stderr)
            throw ExitCode(2)
        }
    }
}

/// A replayable failing trace.
struct Trace: Codable {
    var seed: UInt64
    var parameters: SimParameters
    var violation: String
    var steps: [SimAction]
}

extension FileHandle: @retroactive TextOutputStream {
    public func write(_ string: String) { write(Data(string.utf8)) }
}
