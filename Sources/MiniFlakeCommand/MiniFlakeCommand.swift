import ArgumentParser
import Foundation
import MiniFlake

/// `miniflake`: make and read MiniFlake IDs.
///
/// The executable's `main` only calls `MiniFlakeCommand.main()`; everything else lives here so tests can parse
/// arguments with `parseAsRoot` and check output through ``Decode/decode(_:json:)``.
public struct MiniFlakeCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "miniflake",
        abstract: "Make and read MiniFlake IDs: 64-bit, time-ordered, positive.",
        discussion: """
            An ID is milliseconds since 2018-03-01T00:00:00Z (41 bits), a sequence number (12 bits) and an \
            instance number (10 bits). It is written in decimal, or as 13 Crockford base32 characters.
            """,
        subcommands: [New.self, Decode.self, Collisions.self]
    )

    public init() {}
}

// MARK: - new

extension MiniFlakeCommand {
    /// `miniflake new [--instance N] [--count K] [--base32]`: prints new IDs, one per line.
    public struct New: ParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Print new IDs, one per line.",
            discussion: """
                Without --instance, a random instance number is used: IDs from separate runs can collide only \
                when two runs in the same millisecond pick the same number. Pass --instance to rule that out.
                """
        )

        /// The largest `--count`.
        public static let maximumCount = 1_000_000

        /// The instance number, `0...1023`; a random free one when `nil`.
        @Option(help: "Instance number, 0...1023 (default: a random one).")
        public var instance: Int?

        /// How many IDs to print, `1...1_000_000`.
        @Option(help: "How many IDs to print, 1...1000000.")
        public var count: Int = 1

        /// Print base32 instead of decimal.
        @Flag(help: "Print the 13-character base32 form instead of decimal.")
        public var base32 = false

        public init() {}

        public func validate() throws {
            if let instance, !(0...FlakeID.maxInstance).contains(instance) {
                throw ValidationError("--instance must be in 0...\(FlakeID.maxInstance), not \(instance).")
            }
            guard (1...Self.maximumCount).contains(count) else {
                throw ValidationError("--count must be in 1...\(Self.maximumCount), not \(count).")
            }
        }

        public func run() throws {
            do throws(FlakeError) {
                let pool = FlakeInstancePool.shared
                let leased = instance == nil ? try pool.lease() : nil
                defer { if let leased { pool.release(leased) } }
                var maker = try FlakeMaker(instance: instance ?? leased ?? 0)
                let text = try Self.render(count: count, base32: base32, using: &maker)
                FileHandle.standardOutput.write(Data(text.utf8))
            } catch {
                FileHandle.standardError.write(Data("miniflake: \(error.description)\n".utf8))
                throw ExitCode.failure
            }
        }

        /// `count` new IDs from `maker`, each followed by a newline, in decimal or base32.
        ///
        /// - Throws: ``FlakeError/timeRangeExhausted`` from the maker.
        public static func render<Clock: FlakeClock>(
            count: Int, base32: Bool, using maker: inout FlakeMaker<Clock>
        ) throws(FlakeError) -> String {
            var text = ""
            text.reserveCapacity(count * 20)
            for _ in 0..<count {
                let id = try maker.next()
                text += base32 ? id.base32 : id.description
                text += "\n"
            }
            return text
        }
    }
}

// MARK: - collisions

extension MiniFlakeCommand {
    /// `miniflake collisions [--devices N] [--notes M] [--import-notes K] [--import-rate R] [--trials T] [--seed S]
    /// [--json]`: measures how often MiniFlake, CDCounter and creation-timestamp IDs repeat (``CollisionStudy``).
    public struct Collisions: ParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Measure how often each ID scheme repeats an ID: MiniFlake, CDCounter, creation timestamp.",
            discussion: """
                Simulated devices of one person mint IDs with the real generators on manual clocks, in five \
                scenarios: devices started in the same second, a restart within one second, the clock set back by \
                a minute (with and without a restart), an import in a burst. Each row sums --trials trials; the \
                same seed gives the same table. A repeat from another device is a note that a design keyed by \
                client ID alone would merge; a repeat from the same device repeats (client ID, origin) too. See \
                Docs/MINIFLAKE.md.
                """
        )

        @Option(help: "Devices started in the same second.")
        public var devices = 10

        @Option(help: "Notes per device started in the same second.")
        public var notes = 1_000

        @Option(help: "Notes in the burst import.")
        public var importNotes = 100_000

        @Option(help: "Notes per millisecond in the burst import.")
        public var importRate = 50

        @Option(help: "Trials per scenario and scheme.")
        public var trials = 100

        @Option(help: "The seed every trial's times are drawn from.")
        public var seed: UInt64 = 1

        @Flag(help: "Print one JSON object per row.")
        public var json = false

        public init() {}

        public func validate() throws {
            guard (2...1_000).contains(devices) else { throw ValidationError("--devices must be in 2...1000, not \(devices).") }
            guard (1...1_000_000).contains(notes) else { throw ValidationError("--notes must be in 1...1000000, not \(notes).") }
            guard (1...10_000_000).contains(importNotes) else {
                throw ValidationError("--import-notes must be in 1...10000000, not \(importNotes).")
            }
            guard (1...4_096).contains(importRate) else { throw ValidationError("--import-rate must be in 1...4096, not \(importRate).") }
            guard (1...100_000).contains(trials) else { throw ValidationError("--trials must be in 1...100000, not \(trials).") }
        }

        var parameters: CollisionStudy.Parameters {
            .init(devices: devices, notes: notes, importNotes: importNotes, importRate: importRate, trials: trials, seed: seed)
        }

        public func run() throws {
            do throws(FlakeError) {
                let results = try CollisionStudy(parameters).run()
                let text = Self.render(results, parameters: parameters, json: json)
                FileHandle.standardOutput.write(Data(text.utf8))
            } catch {
                FileHandle.standardError.write(Data("miniflake: \(error.description)\n".utf8))
                throw ExitCode.failure
            }
        }

        /// The table (a Markdown table under one line naming the parameters), or one JSON object per row.
        public static func render(_ results: [CollisionStudy.Result], parameters: CollisionStudy.Parameters, json: Bool) -> String {
            var text = ""
            if json {
                for row in results {
                    text += #"{"scenario":"\#(row.scenario.rawValue)","scheme":"\#(row.scheme.rawValue)","trials":\#(row.trials),"#
                        + #""ids":\#(row.ids),"repeats":\#(row.repeats),"sameDevice":\#(row.sameDevice),"#
                        + #""otherDevice":\#(row.otherDevice),"trialsWithRepeats":\#(row.trialsWithRepeats)}"# + "\n"
                }
                return text
            }
            text += "miniflake collisions: \(parameters.trials) trials each, seed \(parameters.seed); \(parameters.devices) devices × "
                + "\(parameters.notes) notes; import of \(parameters.importNotes) notes at \(parameters.importRate) per ms\n\n"
            text += "| scenario | scheme | IDs | repeated: other device | repeated: same device | trials with a repeat |\n"
            text += "| --- | --- | ---: | ---: | ---: | ---: |\n"
            for row in results {
                text += "| \(row.scenario.label) | \(row.scheme.rawValue) | \(grouped(row.ids)) | \(grouped(row.otherDevice)) | "
                    + "\(grouped(row.sameDevice)) | \(row.trialsWithRepeats) of \(row.trials) |\n"
            }
            return text
        }

        /// `1234567` → `1,234,567`.
        static func grouped(_ value: Int) -> String {
            let digits = String(value)
            var result = ""
            for (index, character) in digits.enumerated() {
                if index > 0, (digits.count - index) % 3 == 0 { result += "," }
                result.append(character)
            }
            return result
        }
    }
}

// MARK: - decode

extension MiniFlakeCommand {
    /// `miniflake decode [--json] [ID...]`: shows the parts of each ID.
    public struct Decode: ParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Show the time, sequence and instance of IDs.",
            discussion: """
                Each ID may be decimal or 13 base32 characters (case-insensitive). With no IDs, reads \
                whitespace-separated IDs from standard input. A bad ID is reported on standard error, the others \
                are still decoded, and the exit code is 1.
                """
        )

        /// One JSON object per line instead of the human form.
        @Flag(help: "Print one JSON object per line: id, base32, timestamp, milliseconds, sequence, instance.")
        public var json = false

        /// The IDs as typed; read from standard input when empty.
        @Argument(parsing: .allUnrecognized, help: "IDs, decimal or base32 (default: read from standard input).")
        public var ids: [String] = []

        public init() {}

        public func run() throws {
            let texts: [String]
            if ids.isEmpty {
                let input = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                texts = input.split(whereSeparator: \.isWhitespace).map(String.init)
            } else {
                texts = ids
            }
            let output = Self.decode(texts, json: json)
            if !output.standardOutput.isEmpty {
                FileHandle.standardOutput.write(Data(output.standardOutput.map { $0 + "\n" }.joined().utf8))
            }
            if !output.standardError.isEmpty {
                FileHandle.standardError.write(Data(output.standardError.map { $0 + "\n" }.joined().utf8))
            }
            if output.failed { throw ExitCode.failure }
        }

        /// What `decode` prints for `texts`: a line per good ID on standard output, a line per bad one on
        /// standard error, in input order. Pure; no I/O.
        public static func decode(_ texts: [String], json: Bool) -> DecodeOutput {
            var output = DecodeOutput()
            for text in texts {
                do throws(FlakeError) {
                    let id = try FlakeID(parsing: text)
                    output.standardOutput.append(json ? jsonLine(id) : humanLine(id))
                } catch {
                    output.standardError.append(errorLine(text, error))
                }
            }
            return output
        }

        /// One aligned line, e.g.
        /// `486508949198077985   0DG3D9Z4G0011  2021-11-02T12:12:52.388Z  sequence    0  instance   33`.
        public static func humanLine(_ id: FlakeID) -> String {
            let decimal = id.description
            let padding = String(repeating: " ", count: max(0, 19 - decimal.count))
            return "\(decimal)\(padding)  \(id.base32)  \(id.timestamp)  sequence \(leftPad(id.sequence, 4))  "
                + "instance \(leftPad(id.instance, 4))"
        }

        /// One JSON object with exactly the keys `id` (decimal string), `base32`, `timestamp`, `milliseconds`
        /// (since the MiniFlake epoch), `sequence` and `instance`, in that order.
        public static func jsonLine(_ id: FlakeID) -> String {
            #"{"id":"\#(id)","base32":"\#(id.base32)","timestamp":"\#(id.timestamp)","#
                + #""milliseconds":\#(id.milliseconds),"sequence":\#(id.sequence),"instance":\#(id.instance)}"#
        }

        /// `miniflake: 'xyz' is not a MiniFlake ID: <reason>`, with the text cut to 40 characters and control
        /// characters escaped so the message stays on one line.
        public static func errorLine(_ text: String, _ error: FlakeError) -> String {
            "miniflake: '\(printable(text))' is not a MiniFlake ID: \(reason(error))"
        }

        static func reason(_ error: FlakeError) -> String {
            switch error {
            case .empty: "it is empty."
            case .malformed: "it is neither a decimal integer nor 13 Crockford base32 characters."
            case .zero, .negative: "IDs are positive."
            case .overflow: "it is beyond the 64-bit signed range."
            default: error.description
            }
        }

        static func printable(_ text: String) -> String {
            let cut = text.count > 40 ? String(text.prefix(39)) + "…" : text
            var result = ""
            for scalar in cut.unicodeScalars {
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
            return result
        }

        static func leftPad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: " ", count: max(0, width - digits.count)) + digits
        }
    }
}

/// The lines `miniflake decode` prints, without the trailing newlines.
public struct DecodeOutput: Equatable, Sendable {
    /// One line per decoded ID, in input order.
    public var standardOutput: [String] = []
    /// One line per rejected input, in input order.
    public var standardError: [String] = []

    /// Whether any input was rejected (the command then exits with 1).
    public var failed: Bool { !standardError.isEmpty }

    public init(standardOutput: [String] = [], standardError: [String] = []) {
        self.standardOutput = standardOutput
        self.standardError = standardError
    }
}
