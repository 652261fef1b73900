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
            sync, sign out, sign in to the same or another account, clock jumps, concurrent edits, forced client-ID \
            collisions, server restarts) with transport faults (lost requests, lost responses, duplicated requests, \
            interrupted syncs). After every step and at quiescence it checks: no duplicates, no cross-account data, \
            no lost edit, convergence, cursors only move forward, server IDs never change, valid IDs, pulls miss \
            nothing, a push delivered twice is answered the same. Each step checks what it could have changed (the \
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

    @Option(help: "Steps per run.")
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

    @Option(help: "Write a self-contained HTML timeline of the run (of the first failing run in a sweep, else the last run).")
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
        let target: SimTarget = server.map { .http(url: $0, restartCommand: restartCommand) } ?? .inProcess
        let range: ClosedRange<UInt64> = try seeds.map(Self.parseRange) ?? seed...seed
        var total = SimSummary()
        var runs = 0
        let started = Date()
        let replayed: [SimAction]? = try replay.map(Self.readTrace)
        let seeds = replayed == nil ? range : range.lowerBound...range.lowerBound
        let (accounts, devices, steps, faults, server, report) = (accounts, devices, steps, faults, server, report)
        let (idScheme, watchers) = (idScheme, watchers)
        let results: [(seed: UInt64, outcome: SimOutcome)]
        var progress = SweepProgress(total: seeds.count, started: .now)
        do {
            results = try await Sweep.run(
                seeds, jobs: resolvedJobs,
                finished: { _, outcome in
                    if let line = progress.finished(outcome, at: .now) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
                }
            ) { seed in
                let parameters = SimParameters(seed: seed, accounts: accounts, devices: devices, steps: steps, faultRate: faults, idScheme: idScheme, watchers: watchers)
                let schedule = replayed ?? ScheduleGenerator.generate(parameters)
                let tag = server == nil ? "" : "\(seed)-\(UInt32.random(in: 0...UInt32.max))"
                let wantEvents = report != nil && (seed == range.upperBound || replayed != nil)
                do {
                    return try await Simulation.run(schedule, parameters: parameters, target: target, recordEvents: wantEvents, runTag: tag)
                } catch {
                    throw SweepSetupError(seed: seed, error: "\(error)")
                }
            }
        } catch let error as SweepSetupError {
            FileHandle.standardError.write(Data("notes-sim: seed \(error.seed): setup failed: \(error.error)\n".utf8))
            throw ExitCode(2)
        }
        for (seed, outcome) in results {
            runs += 1
            total.add(outcome.summary)
            let parameters = SimParameters(seed: seed, accounts: accounts, devices: devices, steps: steps, faultRate: faults, idScheme: idScheme, watchers: watchers)
            if let violation = outcome.violation {
                let schedule = replayed ?? ScheduleGenerator.generate(parameters)
                try await reportViolation(violation, seed: seed, parameters: parameters, schedule: schedule, target: target)
                throw ExitCode(1)
            }
            if let report, seed == range.upperBound || replayed != nil {
                try writeReport(report, seed: seed, summary: outcome.summary, events: outcome.events, steps: replayed?.count ?? steps)
            }
        }
        let seconds = Date().timeIntervalSince(started)
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

    func reportViolation(
        _ violation: Violation, seed: UInt64, parameters: SimParameters, schedule: [SimAction], target: SimTarget
    ) async throws {
        var stderr = FileHandle.standardError
        print("notes-sim: VIOLATION with seed \(seed): \(violation)", to: &stderr)
        var trace = Array(schedule.prefix(violation.step + 1))
        if !noShrink {
            let invariant = violation.invariant
            let shrunk = await Shrinker.shrink(trace) { candidate in
                let tag = server == nil ? "" : "shrink-\(UInt32.random(in: 0...UInt32.max))"
                guard let outcome = try? await Simulation.run(candidate, parameters: parameters, target: target, runTag: tag)
                else { return false }
                return outcome.violation?.invariant == invariant
            }
            trace = shrunk.steps
            print("notes-sim: shortened the trace from \(violation.step + 1) to \(trace.count) steps in \(shrunk.runs) re-runs", to: &stderr)
        }
        let final = try await Simulation.run(trace, parameters: parameters, target: target, recordEvents: true,
                                             runTag: server == nil ? "" : "final-\(UInt32.random(in: 0...UInt32.max))")
        let schemeArgument = parameters.idScheme.map { " --id-scheme \($0.rawValue)" } ?? ""
        print("notes-sim: trace (replay with --replay \(traceOut ?? "<--trace-out FILE>") --accounts \(parameters.accounts) --devices \(parameters.devices)\(schemeArgument)):", to: &stderr)
        for (index, action) in trace.enumerated() { print("  \(index): \(action)", to: &stderr) }
        if let shortViolation = final.violation { print("notes-sim: the shortened trace fails with: \(shortViolation)", to: &stderr) }
        if let traceOut {
            let data = try JSONEncoder().encode(Trace(seed: seed, parameters: parameters, violation: violation.description, steps: trace))
            try data.write(to: URL(fileURLWithPath: traceOut))
        }
        if let report {
            try writeReport(report, seed: seed, summary: final.summary, events: final.events, steps: trace.count,
                            violation: final.violation ?? violation)
        }
    }

    func writeReport(_ path: String, seed: UInt64, summary: SimSummary, events: [SimEvent], steps: Int, violation: Violation? = nil) throws {
        var fields = [("seed", "\(seed)")] + summary.fields
        if let violation { fields.insert(("VIOLATION", violation.description), at: 0) }
        let html = HTMLReport.render(title: "notes-sim seed \(seed)", summary: fields, devices: devices, steps: steps, events: events)
        try html.write(toFile: path, atomically: true, encoding: .utf8)
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
