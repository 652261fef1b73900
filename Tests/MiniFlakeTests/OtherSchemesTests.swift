import ArgumentParser
import Foundation
import MiniFlake
import MiniFlakeCommand
import Testing

/// 2026-01-01T00:00:00Z, a whole second.
private let newYear: Int64 = 1_767_225_600_000

@Suite("CDCounter")
struct CDCounterTests {
    @Test("Starts at the first use at whole Unix seconds × 1,000,000 and adds 1 per ID")
    func startAndStep() throws {
        let clock = ManualFlakeClock(unixMilliseconds: newYear + 10_000 + 999)
        let counter = CDCounter(clock: clock)
        #expect(counter.lastIssued == nil)
        clock.advance(milliseconds: 1)  // the start is read at the first use, not at init: 1_767_225_611 s
        let first = try counter.next()
        #expect(first.rawValue == 1_767_225_611 * 1_000_000 + 1)
        // The clock is not read again: moving it either way changes nothing.
        clock.advance(milliseconds: 5_000)
        #expect(try counter.next().rawValue == first.rawValue + 1)
        clock.advance(milliseconds: -3_600_000)
        #expect(try counter.next().rawValue == first.rawValue + 2)
        #expect(counter.lastIssued?.rawValue == first.rawValue + 2)
    }

    @Test("Two counters whose first use falls in the same second issue the same sequence")
    func sameSecondSameSequence() throws {
        let a = CDCounter(clock: ManualFlakeClock(unixMilliseconds: newYear + 3))
        let b = CDCounter(clock: ManualFlakeClock(unixMilliseconds: newYear + 998))
        let fromA = try (0..<1000).map { _ in try a.next() }
        let fromB = try (0..<1000).map { _ in try b.next() }
        #expect(fromA == fromB)
        // One second later: a disjoint range while fewer than a million IDs are made.
        let c = CDCounter(clock: ManualFlakeClock(unixMilliseconds: newYear + 1000))
        let fromC = try (0..<1000).map { _ in try c.next() }
        #expect(Set(fromA).isDisjoint(with: fromC))
        #expect(fromC[0].rawValue - fromA[0].rawValue == 1_000_000)
    }

    @Test("A run of more than a million IDs walks into the range of a run started a second later")
    func overAMillion() throws {
        let long = CDCounter(clock: ManualFlakeClock(unixMilliseconds: newYear))
        var last = FlakeID?.none
        for _ in 0..<1_000_001 { last = try long.next() }
        let nextSecond = CDCounter(clock: ManualFlakeClock(unixMilliseconds: newYear + 1000))
        #expect(try nextSecond.next() == last)
    }

    @Test("A clock set back before a run starts repeats an earlier run's IDs")
    func clockSetBackAcrossARun() throws {
        let clock = ManualFlakeClock(unixMilliseconds: newYear + 500)
        let first = CDCounter(clock: clock)
        let earlier = try (0..<10).map { _ in try first.next() }
        clock.advance(milliseconds: 60_000)
        clock.advance(milliseconds: -60_000)  // set back by a minute, then the app restarts
        let second = CDCounter(clock: clock)
        #expect(try (0..<10).map { _ in try second.next() } == earlier)
    }

    @Test("A clock before 1970 at the first use throws; the IDs are positive, valid on the wire")
    func validity() throws {
        #expect(throws: FlakeError.negative(-1_000_000 + 1)) { try CDCounter(clock: ManualFlakeClock(unixMilliseconds: -1)).next() }
        #expect(throws: FlakeError.timeRangeExhausted) {
            try CDCounter(clock: ManualFlakeClock(unixMilliseconds: Int64.max)).next()
        }
        let id = try CDCounter(clock: ManualFlakeClock(unixMilliseconds: newYear)).next()
        // A MiniFlake value like any other: decimal text and JSON round-trip, a timestamp field in range.
        #expect(FlakeID(id.description) == id)
        struct Row: Codable, Equatable { var clientID: FlakeID }
        let json = try JSONEncoder().encode(Row(clientID: id))
        #expect(String(decoding: json, as: UTF8.self) == #"{"clientID":"1767225600000001"}"#)
        #expect(try JSONDecoder().decode(Row.self, from: json) == Row(clientID: id))
        #expect(id.timestamp.hasPrefix("2018-03-05"))
    }
}

@Suite("Creation-timestamp IDs")
struct CreationTimestampIDTests {
    @Test("The ID is the clock's Unix millisecond: equal within a millisecond, repeated when the clock is set back")
    func timestampIDs() throws {
        let clock = ManualFlakeClock(unixMilliseconds: newYear + 123)
        let ids = CreationTimestampIDs(clock: clock)
        let first = try ids.next()
        #expect(first.rawValue == newYear + 123)
        #expect(try ids.next() == first)
        clock.advance(milliseconds: 1)
        #expect(try ids.next().rawValue == first.rawValue + 1)
        clock.advance(milliseconds: 60_000)
        clock.advance(milliseconds: -60_001)
        #expect(try ids.next() == first)
        #expect(try CreationTimestampIDs<ManualFlakeClock>.id(createdAt: newYear) == FlakeID(validating: newYear))
        #expect(throws: FlakeError.zero) { try CreationTimestampIDs<ManualFlakeClock>.id(createdAt: 0) }
    }

    @Test("Valid on the wire as strict decimal; 13 digits, so FlakeID(parsing:) reads that text as base32")
    func thirteenDigits() throws {
        let id = try CreationTimestampIDs<ManualFlakeClock>.id(createdAt: newYear)
        #expect(id.description.count == 13)
        #expect(FlakeID(id.description) == id)
        #expect(try FlakeID(parsing: id.description) != id)
        #expect(id.timestamp.hasPrefix("2018-03-01T00:0"))
    }
}

@Suite("miniflake collisions")
struct CollisionStudyTests {
    static let small = CollisionStudy.Parameters(devices: 4, notes: 50, importNotes: 2_000, importRate: 50, trials: 5, seed: 9)

    @Test("Devices started in the same second: every CDCounter note repeats another device's")
    func sameSecondStart() throws {
        let study = CollisionStudy(Self.small)
        let counter = try study.run(.sameSecondStart, scheme: .cdcounter)
        #expect(counter.ids == 4 * 50 * 5)
        #expect(counter.otherDevice == 3 * 50 * 5 && counter.sameDevice == 0)
        #expect(counter.trialsWithRepeats == 5)
        let flake = try study.run(.sameSecondStart, scheme: .miniflake)
        #expect(flake.ids == counter.ids && flake.sameDevice == 0)
    }

    @Test("MiniFlake never repeats on one device; the others do where their descriptions say")
    func scenarios() throws {
        let results = try CollisionStudy(Self.small).run()
        #expect(results.count == CollisionStudy.Scenario.allCases.count * IDScheme.allCases.count)
        func row(_ scenario: CollisionStudy.Scenario, _ scheme: IDScheme) throws -> CollisionStudy.Result {
            try #require(results.first { $0.scenario == scenario && $0.scheme == scheme })
        }
        for scenario in CollisionStudy.Scenario.allCases {
            #expect(try row(scenario, .miniflake).sameDevice == 0, "\(scenario)")
        }
        // A burst of 2,000 notes at 50 per millisecond: 40 distinct milliseconds.
        let burst = try row(.burstImport, .timestamp)
        #expect(burst.sameDevice == 5 * (2_000 - 40))
        #expect(try row(.burstImport, .cdcounter).repeats == 0)
        // CDCounter repeats across a restart only when both runs start in one second; never within a run.
        #expect(try row(.clockSetBack, .cdcounter).repeats == 0)
        #expect(try row(.restartWithinOneSecond, .timestamp).repeats == 0)
        // The same seed, the same table.
        #expect(try CollisionStudy(Self.small).run() == results)
    }

    @Test("A restart within one second repeats the CDCounter run when it lands in the same second")
    func restart() throws {
        let study = CollisionStudy(.init(trials: 200, seed: 3))
        let counter = try study.run(.restartWithinOneSecond, scheme: .cdcounter)
        #expect(counter.trialsWithRepeats > 0 && counter.trialsWithRepeats < 200)
        #expect(counter.sameDevice == 10 * counter.trialsWithRepeats && counter.otherDevice == 0)
        let setBack = try study.run(.clockSetBackWithRestart, scheme: .cdcounter)
        #expect(setBack.trialsWithRepeats > 0)
    }

    @Test("The command validates its options and prints a Markdown table or JSON lines")
    func command() throws {
        #expect(throws: (any Error).self) { try MiniFlakeCommand.parseAsRoot(["collisions", "--devices", "1"]) }
        #expect(throws: (any Error).self) { try MiniFlakeCommand.parseAsRoot(["collisions", "--trials", "0"]) }
        let parsed = try MiniFlakeCommand.parseAsRoot(["collisions", "--trials", "2", "--seed", "5"])
        #expect(parsed is MiniFlakeCommand.Collisions)
        let results = try CollisionStudy(Self.small).run(scenarios: [.burstImport])
        let table = MiniFlakeCommand.Collisions.render(results, parameters: Self.small, json: false)
        let lines = table.split(separator: "\n")
        #expect(lines.count == 1 + 2 + 3)
        #expect(lines.last == "| an import in a burst | timestamp | 10,000 | 0 | 9,800 | 5 of 5 |")
        let json = MiniFlakeCommand.Collisions.render(results, parameters: Self.small, json: true)
        let objects = try json.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { $0["scheme"] as? String } == ["miniflake", "cdcounter", "timestamp"])
        #expect(objects.last?["sameDevice"] as? Int == 9_800)
    }
}
