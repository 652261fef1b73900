import MiniFlake

/// How often each ID scheme repeats a value, measured directly: simulated devices mint with the real generators
/// (``FlakeMaker``, ``CDCounter``, ``CreationTimestampIDs``) on manual clocks moved as each scenario says. What
/// `miniflake collisions` prints and Docs/MINIFLAKE.md tabulates.
///
/// Every trial draws its times from a ``SplitMix64`` seeded with the study's seed, the scenario and the trial, so a
/// study is the same on every machine. All the IDs of a trial belong to one person (one account). A MiniFlake
/// device works as the FlakeNotes client does: an instance number drawn once per installation (0...1023, so two
/// devices may share one) and a high-water mark persisted across restarts. A CDCounter starts at its first use in
/// each run of the app, which the scenarios put at the run's first note.
public struct CollisionStudy: Sendable {
    /// The scenarios.
    public enum Scenario: String, CaseIterable, Sendable {
        /// `devices` devices start their apps in the same second (a random millisecond each) and each creates its
        /// first note at once, then one every 1–10 s, `notes` in all.
        case sameSecondStart = "same-second-start"
        /// One device: a run creates 10 notes, 1–50 ms apart, from its start; the app restarts at a random moment
        /// after the last one and within one second of the first run's start, and the new run does the same.
        case restartWithinOneSecond = "restart-within-one-second"
        /// One device creates a note every 1–1,000 ms for a minute; then its clock is set back by a minute and it
        /// carries on for another minute, in the same run of the app.
        case clockSetBack = "clock-set-back"
        /// As ``clockSetBack``, but the app restarts with the clock change (1–999 ms later), as a reboot would.
        case clockSetBackWithRestart = "clock-set-back-restart"
        /// One device imports `importNotes` notes in one burst, `importRate` notes per millisecond.
        case burstImport = "burst-import"

        /// One line for the table.
        public var label: String {
            switch self {
            case .sameSecondStart: "devices started in the same second"
            case .restartWithinOneSecond: "a restart within one second"
            case .clockSetBack: "clock set back by a minute"
            case .clockSetBackWithRestart: "clock set back by a minute, app restarted"
            case .burstImport: "an import in a burst"
            }
        }
    }

    /// The shape of a study.
    public struct Parameters: Sendable, Equatable {
        /// Devices in ``Scenario/sameSecondStart``.
        public var devices: Int
        /// Notes per device in ``Scenario/sameSecondStart``.
        public var notes: Int
        /// Notes in ``Scenario/burstImport``.
        public var importNotes: Int
        /// Notes per millisecond in ``Scenario/burstImport``.
        public var importRate: Int
        /// Trials per scenario and scheme.
        public var trials: Int
        public var seed: UInt64

        public init(devices: Int = 10, notes: Int = 1_000, importNotes: Int = 100_000, importRate: Int = 50, trials: Int = 100, seed: UInt64 = 1) {
            self.devices = devices
            self.notes = notes
            self.importNotes = importNotes
            self.importRate = importRate
            self.trials = trials
            self.seed = seed
        }
    }

    /// What one scheme did in one scenario, summed over the trials.
    public struct Result: Sendable, Equatable {
        public var scenario: Scenario
        public var scheme: IDScheme
        /// IDs minted.
        public var ids = 0
        /// IDs equal to an ID the same device minted earlier in the trial: (client ID, origin) repeats.
        public var sameDevice = 0
        /// IDs equal to an ID another device minted earlier in the trial (same client ID, other origin): the notes
        /// a design keyed by client ID alone merges.
        public var otherDevice = 0
        /// Trials with at least one repeated ID.
        public var trialsWithRepeats = 0
        public var trials = 0

        /// Every repeated ID.
        public var repeats: Int { sameDevice + otherDevice }
    }

    public var parameters: Parameters

    public init(_ parameters: Parameters) {
        self.parameters = parameters
    }

    /// Every scenario for every scheme, in the order of ``Scenario/allCases`` then ``IDScheme/allCases``.
    ///
    /// - Throws: a generator's ``FlakeError`` (none for the default parameters).
    public func run(
        scenarios: [Scenario] = Scenario.allCases, schemes: [IDScheme] = IDScheme.allCases
    ) throws(FlakeError) -> [Result] {
        var results: [Result] = []
        for scenario in scenarios {
            for scheme in schemes {
                results.append(try run(scenario, scheme: scheme))
            }
        }
        return results
    }

    /// One scenario for one scheme, over ``Parameters/trials`` trials.
    public func run(_ scenario: Scenario, scheme: IDScheme) throws(FlakeError) -> Result {
        var result = Result(scenario: scenario, scheme: scheme)
        let scenarioIndex = UInt64(Scenario.allCases.firstIndex(of: scenario)!)
        for trial in 0..<parameters.trials {
            // The same times for every scheme: the seed depends on the scenario and the trial only.
            var random = SplitMix64(seed: parameters.seed &* 0x9E37_79B9_7F4A_7C15 ^ scenarioIndex << 32 ^ UInt64(trial))
            var tally = Tally()
            try trialRun(scenario, scheme: scheme, random: &random, tally: &tally)
            result.ids += tally.ids
            result.sameDevice += tally.sameDevice
            result.otherDevice += tally.otherDevice
            result.trialsWithRepeats += tally.sameDevice + tally.otherDevice > 0 ? 1 : 0
            result.trials += 1
        }
        return result
    }

    /// A Unix millisecond at a random whole second of 2026 (the start of every trial).
    static func startSecond(_ random: inout SplitMix64) -> Int64 {
        let year2026: Int64 = 1_767_225_600_000
        return year2026 + Int64(random.next() % (365 * 86_400)) * 1000
    }

    static func uniform(_ range: ClosedRange<Int64>, _ random: inout SplitMix64) -> Int64 {
        range.lowerBound + Int64(random.next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    func trialRun(_ scenario: Scenario, scheme: IDScheme, random: inout SplitMix64, tally: inout Tally) throws(FlakeError) {
        let second = Self.startSecond(&random)
        switch scenario {
        case .sameSecondStart:
            var devices: [Device] = []
            for index in 0..<parameters.devices {
                let start = second + Self.uniform(0...999, &random)
                devices.append(try Device(origin: index, scheme: scheme, instance: Int(random.next() % 1024), at: start))
            }
            // Each device's note times, drawn before any ID is minted so that every scheme sees the same ones.
            for index in devices.indices {
                for note in 0..<parameters.notes {
                    if note > 0 { devices[index].clock.advance(milliseconds: Self.uniform(1...10_000, &random)) }
                    tally.record(try devices[index].next(), origin: index)
                }
            }

        case .restartWithinOneSecond:
            let start = second + Self.uniform(0...999, &random)
            var device = try Device(origin: 0, scheme: scheme, instance: Int(random.next() % 1024), at: start)
            for note in 0..<10 {
                if note > 0 { device.clock.advance(milliseconds: Self.uniform(1...50, &random)) }
                tally.record(try device.next(), origin: 0)
            }
            let last = device.clock.unixMilliseconds()
            try device.restart(at: Self.uniform((last + 1)...(start + 999), &random))
            for note in 0..<10 {
                if note > 0 { device.clock.advance(milliseconds: Self.uniform(1...50, &random)) }
                tally.record(try device.next(), origin: 0)
            }

        case .clockSetBack, .clockSetBackWithRestart:
            let start = second + Self.uniform(0...999, &random)
            var device = try Device(origin: 0, scheme: scheme, instance: Int(random.next() % 1024), at: start)
            func minute(_ device: inout Device, from begin: Int64) throws(FlakeError) {
                while device.clock.unixMilliseconds() < begin + 60_000 {
                    tally.record(try device.next(), origin: 0)
                    device.clock.advance(milliseconds: Self.uniform(1...1_000, &random))
                }
            }
            try minute(&device, from: start)
            let setBack = device.clock.unixMilliseconds() - 60_000
            if scenario == .clockSetBackWithRestart {
                try device.restart(at: setBack + Self.uniform(1...999, &random))
            } else {
                device.clock.set(unixMilliseconds: setBack)
            }
            try minute(&device, from: device.clock.unixMilliseconds())

        case .burstImport:
            let start = second + Self.uniform(0...999, &random)
            var device = try Device(origin: 0, scheme: scheme, instance: Int(random.next() % 1024), at: start)
            let rate = max(1, parameters.importRate)
            for note in 0..<parameters.importNotes {
                if note > 0, note % rate == 0 { device.clock.advance(milliseconds: 1) }
                tally.record(try device.next(), origin: 0)
            }
        }
    }

    /// The IDs of one trial and their repeats.
    struct Tally {
        var firstOrigin: [Int64: Int] = [:]
        var ids = 0
        var sameDevice = 0
        var otherDevice = 0

        mutating func record(_ id: Int64, origin: Int) {
            ids += 1
            if let first = firstOrigin[id] {
                // A repeat of the same device's ID unless another device minted it first.
                if first == origin { sameDevice += 1 } else { otherDevice += 1 }
            } else {
                firstOrigin[id] = origin
            }
        }
    }

    /// One simulated device: an installation and the current run of its app.
    struct Device {
        let origin: Int
        let scheme: IDScheme
        let instance: Int
        let clock: ManualFlakeClock
        var maker: FlakeMaker<ManualFlakeClock>
        var counter: CDCounter<ManualFlakeClock>

        init(origin: Int, scheme: IDScheme, instance: Int, at unixMilliseconds: Int64) throws(FlakeError) {
            self.origin = origin
            self.scheme = scheme
            self.instance = instance
            clock = ManualFlakeClock(unixMilliseconds: unixMilliseconds)
            maker = try FlakeMaker(instance: instance, clock: clock)
            counter = CDCounter(clock: clock)
        }

        /// A new run of the app at `unixMilliseconds`: MiniFlake resumes after its persisted mark, as the FlakeNotes
        /// client does; a CDCounter starts again at its next use.
        mutating func restart(at unixMilliseconds: Int64) throws(FlakeError) {
            clock.set(unixMilliseconds: unixMilliseconds)
            maker = try FlakeMaker(instance: instance, clock: clock, after: maker.lastIssued)
            counter = CDCounter(clock: clock)
        }

        mutating func next() throws(FlakeError) -> Int64 {
            switch scheme {
            case .miniflake: try maker.next().rawValue
            case .cdcounter: try counter.next().rawValue
            case .timestamp: try CreationTimestampIDs(clock: clock).next().rawValue
            }
        }
    }
}
