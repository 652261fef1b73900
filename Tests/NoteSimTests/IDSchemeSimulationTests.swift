import ArgumentParser
import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Testing

@testable import NoteSim

/// `notes-sim --id-scheme`: every device mints client IDs with the scheme, the server is unchanged, and the summary
/// counts the client-ID collisions inside one account.
@Suite struct IDSchemeSimulationTests {
    @Test(arguments: IDScheme.allCases)
    func forcedCollisionsCollideUnderEveryScheme(_ scheme: IDScheme) async throws {
        // Both devices made notes before (so a CDCounter runs on each since another second); the collision step
        // must still give them one client ID, and both notes must survive as two.
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .create(device: 0, token: "p"), .create(device: 1, token: "q"), .create(device: 1, token: "r"),
            .sync(device: 0, faults: []), .sync(device: 1, faults: []),
            .collide(first: 0, second: 1, firstToken: "left", secondToken: "right"),
            .sync(device: 0, faults: []), .sync(device: 1, faults: []), .sync(device: 0, faults: []),
        ]
        let parameters = SimParameters(seed: 7, accounts: 1, devices: 2, steps: steps.count, idScheme: scheme)
        let outcome = try await Simulation.run(steps, parameters: parameters)
        #expect(outcome.violation == nil, "\(outcome.violation.map(String.init(describing:)) ?? "")")
        #expect(outcome.summary.collisions == 1)
        #expect(outcome.summary.notes == 5)
        #expect(outcome.summary.clientIDCollisions >= 1)
        #expect(outcome.summary.fields.last?.0 == "client-ID collisions in one account")
    }

    @Test(arguments: IDScheme.allCases)
    func aShortSweepPassesAndCountsCollisions(_ scheme: IDScheme) async throws {
        var total = SimSummary()
        for seed: UInt64 in 1...12 {
            let parameters = SimParameters(seed: seed, steps: 300, idScheme: scheme)
            let outcome = try await Simulation.run(ScheduleGenerator.generate(parameters), parameters: parameters)
            #expect(outcome.violation == nil, "seed \(seed), \(scheme): \(outcome.violation.map(String.init(describing:)) ?? "")")
            total.add(outcome.summary)
        }
        #expect(total.collisions > 0 && total.clientIDCollisions > 0, "the schedule's collision steps collide with \(scheme)")
    }

    @Test func withoutASchemeTheSummaryReadsAsBefore() async throws {
        let steps: [SimAction] = [.signIn(device: 0, account: 0, faults: []), .create(device: 0, token: "a")]
        let plain = try await Simulation.run(steps, parameters: SimParameters(seed: 1, accounts: 1, devices: 1, steps: 2))
        #expect(!plain.summary.fields.contains { $0.0.contains("client-ID collisions") })
        #expect(plain.summary.fields.count == 40)
        #expect(plain.summary.fields.first { $0.0 == "forced ID collisions" }?.1 == "\(plain.summary.collisions)")
        // The parameters encode as before too (a trace written without a scheme is unchanged).
        let json = String(decoding: try JSONEncoder().encode(SimParameters(seed: 1)), as: UTF8.self)
        #expect(!json.contains("idScheme"))
        let explicit = SimParameters(seed: 1, accounts: 1, devices: 1, steps: 2, idScheme: .miniflake)
        let chosen = try await Simulation.run(steps, parameters: explicit)
        #expect(chosen.summary.fields.count == 41)
        #expect(try JSONDecoder().decode(SimParameters.self, from: JSONEncoder().encode(explicit)) == explicit)
    }

    @Test func theOptionTakesTheThreeSchemes() throws {
        #expect(try NoteSimCommand.parseIDScheme("cdcounter") == .cdcounter)
        #expect(throws: (any Error).self) { try NoteSimCommand.parseIDScheme("uuid") }
        let command = try NoteSimCommand.parseAsRoot(["--id-scheme", "timestamp", "--seeds", "1..2"])
        #expect((command as? NoteSimCommand)?.idScheme == .timestamp)
    }

    @Test func collisionsAreCountedPerClientIDAcrossOrigins() {
        func record(_ clientID: Int64, _ origin: Int64, _ serverID: Int64) -> NoteRecord {
            NoteRecord(
                serverID: try! FlakeID(validating: serverID), clientID: try! FlakeID(validating: clientID),
                origin: try! FlakeID(validating: origin), version: 1, text: "x\n", deleted: false, conflictOf: nil,
                updatedAt: "2026-01-01T00:00:00.000Z")
        }
        // Client ID 1 under three origins: two notes would have merged into the first. Client ID 2 once: none.
        let notes = [record(1, 10, 100), record(1, 11, 101), record(1, 12, 102), record(2, 10, 103)]
        #expect(Simulation.clientIDCollisions(in: notes) == 2)
    }
}
