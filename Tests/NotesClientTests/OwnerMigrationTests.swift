import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

/// The `v-owner-accounts` migration on stores written by the client released before issue 16 (built by
/// Tests/Fixtures/owner-migration/make-fixtures.sh): owners come from what the store knows.
@Suite struct OwnerMigrationTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/owner-migration", isDirectory: true)
    /// The account IDs the fixtures' daemon minted.
    static let demo = try! FlakeID(validating: 1_155_872_570_793_263_104)
    static let alice = try! FlakeID(validating: 1_155_872_579_886_514_176)

    /// A copy of a fixture opened as a data directory (the fixture itself is never written).
    func open(_ name: String, in home: URL, transport: any SyncTransport) throws -> NotesClient {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: Self.fixtures.appendingPathComponent(name), to: home.appendingPathComponent("notes.sqlite"))
        return try makeDevice(transport, seed: 5, home: home)
    }

    /// Signed in to alice, with demo's notes carried into alice by the old client and alice's phone's note pulled:
    /// every note was last synced with alice (its base text is alice's), so every note is alice's.
    @Test func aSignedInStoreGivesItsNotesToTheAccountOfTheirBaseText() async throws {
        try await withTemporaryDirectory { home in
            let server = try TestServer.make()
            let client = try open("signed-in.sqlite", in: home, transport: server.transport)
            let identities = try client.identities()
            #expect(identities.notes.count == 4)
            #expect(identities.notes.allSatisfy { $0.owner == Self.alice && !$0.isSetAside })
            let shown = try client.shownAccount()
            #expect(shown?.accountID == Self.alice && shown?.username == "alice")
            #expect(try client.unownedNoteCount() == 0)
            #expect(try client.texts() == ["alice one", "alice private: bank PIN hint", "demo one, edited in alice", "demo two"])

            // Another account signing in on the migrated store gets none of them: alice's private note stays hers.
            let report = try await client.signUp(
                server: TestServer.url, username: "bob", password: "correct horse battery", unowned: .carry)
            #expect(report.owners.setAside == 4 && report.owners.carried == 0)
            #expect(try client.texts() == [])
            #expect(try await serverTexts(server, "bob") == [])
        }
    }

    /// Signed out after demo: the notes synced with demo (and the one edited since) are demo's; the note written
    /// while signed out has no owner and is shown with them.
    @Test func aSignedOutStoreKeepsTheLastAccountsNotesAndLeavesTheRestUnowned() async throws {
        try await withTemporaryDirectory { home in
            let server = try TestServer.make()
            let client = try open("signed-out.sqlite", in: home, transport: server.transport)
            let notes = try client.identities().notes
            #expect(notes.count == 4)
            #expect(notes.filter { $0.owner == Self.demo }.count == 3)
            #expect(notes.filter { $0.owner == nil }.count == 1)
            #expect(notes.allSatisfy { !$0.isSetAside })
            #expect(try client.account() == nil && client.shownAccount()?.accountID == Self.demo)
            #expect(try client.unownedNoteCount() == 1)
            #expect(try client.texts().count == 4)

            // bob signs in, keeping the unowned note off his account: nothing of demo's, nothing unowned, is sent.
            let report = try await client.signUp(
                server: TestServer.url, username: "bob", password: "correct horse battery", unowned: .keepAside)
            #expect(report.owners.setAside == 3 && report.owners.keptAside == 1)
            #expect(try await serverTexts(server, "bob") == [])
            // Signed out again: bob's (none) and the unowned note are on show; demo's stay aside.
            try await client.signOut()
            #expect(try client.texts() == ["written while signed out"])
        }
    }
}
