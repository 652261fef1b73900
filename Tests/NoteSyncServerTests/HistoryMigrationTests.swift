import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// The migrations that add tags, flags and the history (SQLite "v9: tags, flags and history", PostgreSQL 10), run on
/// stores written by the release before them: its real `notesyncd`, driven through the protocol by
/// Tests/Fixtures/history-migration/make-fixtures.sh (two accounts; edits, a delete, a merge whose answer is kept for
/// replays, a conflict copy, a text holding NUL).
@Suite("Tags and history migration")
struct HistoryMigrationTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/history-migration", isDirectory: true)

    @Test func sqliteStoresOfThePreviousReleaseMigrate() async throws {
        try await withTemporaryDirectory("history-migration") { directory in
            let path = directory.appendingPathComponent(SQLiteNoteStore.fileName).path
            try FileManager.default.copyItem(atPath: Self.fixtures.appendingPathComponent("notesyncd.sqlite").path, toPath: path)
            let store = try SQLiteNoteStore(path: path)
            do {
                try await Self.checkMigrated(store)
            } catch {
                try? await store.close()
                throw error
            }
            try await store.close()
        }
    }

    @Test(.enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
    func postgresDatabasesOfThePreviousReleaseMigrate() async throws {
        let url = try await TestPostgres.freshDatabaseURL()
        let psql = try #require(["/usr/bin/psql", "/usr/local/bin/psql"].first { FileManager.default.isExecutableFile(atPath: $0) }, "no psql")
        let (status, output) = try await Subprocess.run(
            psql, ["-q", "-v", "ON_ERROR_STOP=1", "-f", Self.fixtures.appendingPathComponent("postgres.sql").path, url])
        #expect(status == .exited(0), "\(output)")
        let store = try await PostgresNoteStore.connect(PostgresDatabase.configuration(url: url, maximumConnections: 4), logger: TestPostgres.logger)
        do {
            #expect(try await store.database.appliedSchemaVersion() == PostgresDatabase.schemaVersion)
            try await Self.checkMigrated(store)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    /// What a migrated store holds and does: the notes as they were, with no tags, no flags and no history; replays
    /// of edits applied before answer as then; the next change keeps its version; every invariant holds.
    static func checkMigrated(_ store: any NoteStore & OperatorStore) async throws {
        #expect(try await store.checkInvariants() == [])
        let alice = try #require(try await store.account(byUsername: "alice")).id
        let bob = try #require(try await store.account(byUsername: "bob")).id
        let notes = try await store.pull(accountID: alice, after: 0, limit: 100).notes
        #expect(notes.count == 6, "five notes and a conflict copy")
        #expect(notes.allSatisfy { $0.tags == [] && !$0.pinned && !$0.archived })
        let byClient = Dictionary(grouping: notes, by: \.clientID.rawValue)
        #expect(byClient[1]?.first?.text == "Groceries\nmilk\neggs\nbread\n" && byClient[1]?.first?.version == 3)
        #expect(byClient[3]?.first.map { Array($0.text.utf8) } == Array("nul \u{0} inside\n".utf8))
        #expect(byClient[4]?.first?.deleted == true)
        #expect(notes.contains { $0.conflictOf != nil && $0.text == "a\nY\nc\n" })
        let usage = try #require(try await store.usage(accountID: alice))
        #expect(usage.historyBytes == 0 && usage.noteCount == 6)
        for note in notes {
            let page = try await store.versions(accountID: alice, query: HistoryPlanner.Query(serverID: note.serverID, pageSize: 10, maxBytes: 1000))
            #expect(page == VersionPage(versions: [], hasMore: false), "no history before the upgrade")
        }

        // A replay of the merge applied before the upgrade answers as it did then (the answer's text, no tags).
        let context = PushContext(limits: SyncLimits(), now: testEpoch, pusher: id(7001), device: "laptop", mintID: { NoteStoreConformance.minter.mint() })
        let plan = try #require(byClient[2]?.first)
        let replay = try await store.push(
            accountID: alice,
            changes: [change(2, origin: 7001, server: plan.serverID, edit: 115, text: "Intro\nPlan\nship v1\n", baseVersion: 1, baseText: "Plan\nship v1\n")],
            context: context)
        #expect(replay[0].replayed && replay[0].status == .merged && replay[0].text == "Intro\nPlan\nship v1\nthen v2\n")
        #expect(replay[0].tags == nil && replay[0].pinned == nil)

        // The next change: tagged, kept in the history, counted.
        let groceries = try #require(byClient[1]?.first)
        let tagged = try await store.push(
            accountID: alice,
            changes: [tagged(1, origin: 7001, server: groceries.serverID, edit: 300, text: "Groceries\nmilk\n", baseVersion: 3, tags: ["home"], pinned: true)],
            context: context)
        #expect(tagged[0].status == .updated && tagged[0].version == 4)
        let history = try await store.versions(accountID: alice, query: HistoryPlanner.Query(serverID: groceries.serverID, pageSize: 10, maxBytes: 1000))
        #expect(history?.versions.map(\.version) == [4])
        #expect(history?.versions.first?.tags == ["home"] && history?.versions.first?.device == "laptop")
        #expect(try await store.usage(accountID: alice)?.historyBytes == Int64("Groceries\nmilk\n".utf8.count))
        #expect(try await store.pull(accountID: bob, after: 0, limit: 10).notes.map(\.text) == ["bob's note\n"])
        #expect(try await store.checkInvariants() == [])
    }
}
