import Foundation
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import NotesClient
import Testing
import TestSupport

/// The client minting client IDs with the comparison schemes (``NotesEnvironment/clientIDScheme``).
@Suite("Client-ID schemes")
struct ClientIDSchemeTests {
    /// 2026-01-01T00:00:00Z.
    static let newYear: Int64 = 1_767_225_600_000

    func device(
        _ transport: any SyncTransport, seed: UInt64, scheme: IDScheme, clock: ManualFlakeClock, home: URL? = nil
    ) throws -> NotesClient {
        let environment = NotesEnvironment(
            clock: clock, random: SplitMix64(seed: seed), transport: NotesEnvironment.fixed(transport), sleep: { _ in },
            retry: RetryPolicy(maxAttempts: 3), deviceName: "device-\(seed)", clientIDScheme: scheme)
        if let home { return try NotesClient.open(home: home, environment: environment) }
        return try NotesClient.inMemory(environment: environment)
    }

    @Test("CDCounter: seconds × 1,000,000 + 1, then + 1; edit IDs stay MiniFlake")
    func cdCounterValues() async throws {
        let server = try TestServer.make()
        let clock = ManualFlakeClock(unixMilliseconds: Self.newYear + 250)
        let client = try device(server.transport, seed: 1, scheme: .cdcounter, clock: clock)
        let first = try client.add("one")
        clock.advance(milliseconds: 3_000)
        let second = try client.add("two")
        #expect(first.clientID.rawValue == 1_767_225_600 * 1_000_000 + 1)
        #expect(second.clientID.rawValue == first.clientID.rawValue + 1)
        #expect(try client.status().clientIDHighWaterMark == second.clientID)
        #expect(try client.status().highWaterMark == nil, "no MiniFlake ID was minted for the notes")
        try await signUp(client, "alice")
        let mark = try #require(try client.status().highWaterMark)
        #expect(mark.instance == client.flakeInstance, "edit IDs are MiniFlake")
        #expect(try await serverTexts(server, "alice") == ["one", "two"])
    }

    @Test("CDCounter restarted within one second: the installation raises the repeated values instead of reusing them")
    func cdCounterRestartWithinOneSecond() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("notes-scheme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let clock = ManualFlakeClock(unixMilliseconds: Self.newYear + 100)
        let transport = NoNetwork()
        var firstRun: [FlakeID] = []
        do {
            let client = try device(transport, seed: 2, scheme: .cdcounter, clock: clock, home: home)
            for n in 0..<3 { firstRun.append(try client.add("run 1 note \(n)").clientID) }
        }
        clock.advance(milliseconds: 400)  // same second: a faithful counter would start again at the same value
        #expect(try CDCounter<ManualFlakeClock>.start(unixMilliseconds: clock.unixMilliseconds()) + 1 == firstRun[0].rawValue)
        let client = try device(transport, seed: 2, scheme: .cdcounter, clock: clock, home: home)
        let secondRun = try (0..<3).map { n in try client.add("run 2 note \(n)").clientID }
        #expect(secondRun.map(\.rawValue) == [3, 4, 5].map { firstRun[0].rawValue + $0 })
        #expect(Set(try client.notes().map(\.clientID)).count == 6)

        // The same with the in-memory relaunch the simulation uses, in a later second: the counter starts afresh.
        clock.advance(milliseconds: 2_000)
        client.restartIDGenerators()
        #expect(try client.add("run 3").clientID.rawValue == 1_767_225_602 * 1_000_000 + 1)
    }

    @Test("Creation timestamp: the creation millisecond; a second note in it or a clock set back takes the next free one")
    func timestampValues() throws {
        let clock = ManualFlakeClock(unixMilliseconds: Self.newYear + 42)
        let client = try device(NoNetwork(), seed: 3, scheme: .timestamp, clock: clock)
        let first = try client.add("first")
        #expect(first.clientID.rawValue == first.createdAt && first.createdAt == Self.newYear + 42)
        let sameMillisecond = try client.add("second")
        #expect(sameMillisecond.clientID.rawValue == first.clientID.rawValue + 1)
        clock.advance(milliseconds: -60_000)
        let setBack = try client.add("after the clock went back")
        #expect(setBack.clientID.rawValue == first.clientID.rawValue + 2)
        clock.advance(milliseconds: 120_000)
        let later = try client.add("later")
        #expect(later.clientID.rawValue == later.createdAt)
    }

    @Test("Two devices of one account minting the same client IDs keep every note apart: (client ID, origin)", arguments: [IDScheme.cdcounter, .timestamp])
    func collisionsCostNothing(_ scheme: IDScheme) async throws {
        let server = try TestServer.make()
        // Both apps start in the same millisecond: the same CDCounter sequence, the same creation times.
        let clockA = ManualFlakeClock(unixMilliseconds: Self.newYear + 7)
        let clockB = ManualFlakeClock(unixMilliseconds: Self.newYear + 7)
        let a = try device(server.transport, seed: 10, scheme: scheme, clock: clockA)
        let b = try device(server.transport, seed: 11, scheme: scheme, clock: clockB)
        try await signUp(a, "alice")
        try await signIn(b, "alice")
        var fromA: [LocalNote] = []
        var fromB: [LocalNote] = []
        for n in 0..<5 {
            fromA.append(try a.add("a\(n)"))
            fromB.append(try b.add("b\(n)"))
            clockA.advance(milliseconds: 10)
            clockB.advance(milliseconds: 10)
        }
        #expect(fromA.map(\.clientID) == fromB.map(\.clientID), "the scheme really collides")
        #expect(a.origin != b.origin)
        try await a.syncOK()
        try await b.syncOK()
        try await a.syncOK()
        let all = (0..<5).flatMap { ["a\($0)", "b\($0)"] }.sorted()
        #expect(try a.texts() == all && b.texts() == all)
        #expect(try a.conflicts().isEmpty && b.conflicts().isEmpty)
        #expect(try await serverTexts(server, "alice") == all)
        // Signing out and back in reconciles each note with its own server note, not the other device's.
        try await a.signOut()
        try await signIn(a, "alice")
        #expect(try a.texts() == all)
        #expect(try await serverTexts(server, "alice") == all)
    }
}
