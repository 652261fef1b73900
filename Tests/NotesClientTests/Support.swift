import Foundation
import GRDB
import Logging
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
@testable import NotesClient
import Synchronization
import Testing
import TestSupport

/// A quiet logger for the in-process server.
let quietLogger = Logger.quiet("notes-client-tests", level: .critical)

/// The client tests' server: the real server library in process (see ``InProcessServer``) over an SQLite store in a
/// temporary directory, minting with instance 1000.
enum TestServer {
    static func make(limits: SyncLimits = SyncLimits()) throws -> InProcessServer {
        try InProcessServer(store: try SQLiteNoteStore.temporary(), instance: 1000, limits: limits, tokenSeed: 7, logger: quietLogger)
    }

    /// The URL clients are told (the in-process transport ignores it).
    static let url = "http://notes.test"
}

/// A device: a client with its own clock and seeded randomness, talking to a server through a transport.
func makeDevice(
    _ transport: any SyncTransport, seed: UInt64, home: URL? = nil, clock: ManualFlakeClock? = nil,
    retry: RetryPolicy = RetryPolicy(maxAttempts: 3)
) throws -> NotesClient {
    let environment = NotesEnvironment(
        clock: clock ?? ManualFlakeClock(unixMilliseconds: testEpoch + Int64(seed % 1000) * 7),
        random: SplitMix64(seed: seed), transport: NotesEnvironment.fixed(transport), sleep: { _ in }, retry: retry,
        deviceName: "device-\(seed)")
    if let home { return try NotesClient.open(home: home, environment: environment) }
    return try NotesClient.inMemory(environment: environment)
}

extension NotesClient {
    /// Live notes' texts, sorted.
    func texts() throws -> [String] { try notes().map(\.text).sorted() }

    /// Syncs and fails the test when the sync fails.
    @discardableResult
    func syncOK(sourceLocation: SourceLocation = #_sourceLocation) async throws -> SyncReport {
        do {
            return try await sync()
        } catch {
            Issue.record("sync failed: \(error)", sourceLocation: sourceLocation)
            throw error
        }
    }
}

/// Signs `client` up (or in, when the account exists) and expects the first sync to succeed.
/// Notes written while signed out join the account (`carry`), as a user who answers yes would have them.
@discardableResult
func signUp(
    _ client: NotesClient, _ username: String, password: String = "correct horse battery", unowned: UnownedNotes = .carry
) async throws -> SyncReport {
    let report = try await client.signUp(server: TestServer.url, username: username, password: password, unowned: unowned)
    return try report.sync.get()
}

@discardableResult
func signIn(
    _ client: NotesClient, _ username: String, password: String = "correct horse battery", unowned: UnownedNotes = .carry,
    wipe: Bool = false
) async throws -> SignInReport {
    let report = try await client.signIn(
        server: TestServer.url, username: username, password: password, unowned: unowned, wipe: wipe)
    _ = try report.sync.get()
    return report
}

/// Alice's two devices on a fresh server: `a` signed up, then `b` signed in.
func aliceOnTwoDevices() async throws -> (server: InProcessServer, a: NotesClient, b: NotesClient) {
    let server = try TestServer.make()
    let a = try makeDevice(server.transport, seed: 1)
    let b = try makeDevice(server.transport, seed: 2)
    try await signUp(a, "alice")
    try await signIn(b, "alice")
    return (server, a, b)
}

/// Alice's device on a fresh server, behind a transport that injects the faults a test plans, signed up.
func aliceBehindFaults(retry: RetryPolicy = RetryPolicy(maxAttempts: 3)) async throws
    -> (server: InProcessServer, transport: FaultInjectingTransport, a: NotesClient)
{
    let server = try TestServer.make()
    let transport = FaultInjectingTransport(server.transport)
    let a = try makeDevice(transport, seed: 1, retry: retry)
    try await signUp(a, "alice")
    return (server, transport, a)
}

/// What the server holds for an account, seen by a brand-new device that signs in and syncs.
func serverTexts(_ server: InProcessServer, _ username: String, seed: UInt64 = 999_999) async throws -> [String] {
    let viewer = try makeDevice(server.transport, seed: seed)
    try await signIn(viewer, username)
    let notes = try viewer.notes()
    let serverIDs = Set(notes.compactMap(\.serverID))
    #expect(serverIDs.count == notes.count, "every note has its own server ID")
    return notes.map(\.text).sorted()
}

/// The `note_tags` rows of every device's notes are exactly the tags of its live notes, and `tag_counts` counts them
/// (migration `v-tags-flags-history`).
func expectTagIndexMatchesNotes(_ devices: NotesClient..., sourceLocation: SourceLocation = #_sourceLocation) throws {
    for device in devices {
        let (expected, actual) = try device.store.read { tx in
            let notes = try Row.fetchAll(tx.db, sql: "SELECT id, tags FROM notes WHERE NOT deleted")
            var expected: Set<String> = []
            for row in notes {
                let id: Int64 = row[0]
                for name in StoredTags.names(row[1]) { expected.insert("\(id) \(Tags.key(name)) \(name)") }
            }
            let rows = try Row.fetchAll(tx.db, sql: "SELECT note_id, key, name FROM note_tags")
            let counted = try Row.fetchAll(tx.db, sql: "SELECT key, COUNT(*) FROM note_tags GROUP BY key")
            let kept = try Row.fetchAll(tx.db, sql: "SELECT key, notes FROM tag_counts WHERE notes <> 0")
            #expect(
                Set(kept.map { "\($0[0] as String) \($0[1] as Int)" }) == Set(counted.map { "\($0[0] as String) \($0[1] as Int)" }),
                "tag_counts counts note_tags", sourceLocation: sourceLocation)
            return (expected, Set(rows.map { "\($0[0] as Int64) \($0[1] as String) \($0[2] as String)" }))
        }
        #expect(actual == expected, sourceLocation: sourceLocation)
    }
}
