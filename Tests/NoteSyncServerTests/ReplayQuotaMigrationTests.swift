import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import PostgresNIO
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// The migrations that add `accounts.replay_text_bytes` (SQLite "v8: replay texts in the quota", PostgreSQL 9) count
/// each account's replay texts from the applied edits written before them: UTF-8 bytes, NULL and empty texts as 0.
@Suite("Replay texts quota migration")
struct ReplayQuotaMigrationTests {
    /// Applied edits as the previous schema held them: (account, edit ID, text as hex bytes or nil).
    static let edits: [(Int64, Int64, String?)] = [
        (1001, 1, "c3a90a"),  // "é\n": 3 bytes, 2 characters
        (1001, 2, ""),  // an empty text
        (1001, 3, nil),  // no text (created, updated, deleted...)
        (1001, 4, String(repeating: "61", count: 100)),
        (1002, 1, "616263"),
    ]
    /// What the migration must count, per account (1003 has no applied edit).
    static let expected: [Int64: Int64] = [1001: 103, 1002: 3, 1003: 0]

    @Test func sqliteCountsTheReplayTextsWrittenBeforeIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(SQLiteNoteStore.fileName).path
        let queue = try DatabaseQueue(path: path)
        try SQLiteNoteStore.migrator.migrate(queue, upTo: "v7: invites")
        try await queue.write { db in
            for account in Self.expected.keys {
                try db.execute(
                    sql: "INSERT INTO accounts (id, username, password_hash, created_at) VALUES (?, ?, 'h', 1)",
                    arguments: [account, "user\(account)"])
            }
            for (account, edit, text) in Self.edits {
                try db.execute(
                    sql: """
                        INSERT INTO applied_edits (account_id, edit_id, client_id, origin, pusher, status, created_at, text)
                        VALUES (?, ?, 1, 1, 0, 'merged', 1, ?)
                        """,
                    arguments: [account, edit, text.map { Data(hex($0)) }])
            }
        }
        try queue.close()

        let store = try SQLiteNoteStore(path: path)
        for (account, bytes) in Self.expected {
            #expect(try await store.usage(accountID: id(account))?.replayTextBytes == bytes, "account \(account)")
        }
        #expect(try await store.checkInvariants() == [])
        try await store.close()
    }

    @Test(.enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
    func postgresCountsTheReplayTextsWrittenBeforeIt() async throws {
        let store = try await TestPostgres.store()
        let client = store.database.client
        let logger = TestPostgres.logger
        // Back to the schema before version 9, with rows written by it.
        try await client.execute("ALTER TABLE accounts DROP COLUMN replay_text_bytes", logger: logger)
        try await client.execute("DELETE FROM notesyncd_migrations WHERE version = 9", logger: logger)
        for account in Self.expected.keys {
            try await client.execute(
                "INSERT INTO accounts (id, username, password_hash, created_at) VALUES (\(account), \("user\(account)"), 'h', 1)",
                logger: logger)
        }
        for (account, edit, text) in Self.edits {
            let bytes = text.map { ByteBuffer(bytes: Data(hex($0))) }
            try await client.execute(
                """
                INSERT INTO applied_edits (account_id, edit_id, client_id, origin, pusher, status, created_at, text)
                VALUES (\(account), \(edit), 1, 1, 0, 'merged', 1, \(bytes))
                """,
                logger: logger)
        }
        try await store.database.migrate()
        #expect(try await store.database.appliedSchemaVersion() == PostgresDatabase.schemaVersion)
        for (account, bytes) in Self.expected {
            #expect(try await store.usage(accountID: id(account))?.replayTextBytes == bytes, "account \(account)")
        }
        #expect(try await store.checkInvariants() == [])
        try await store.close()
    }
}

/// The replay total costs a push no statement per change: the account row is read once (the lock) and written once,
/// whatever the batch holds.
@Suite("Replay texts quota cost")
struct ReplayQuotaCostTests {
    @Test(arguments: [1, 50])
    func aPushReadsAndWritesTheAccountRowOnce(merges: Int) async throws {
        let store = try SQLiteNoteStore.temporary()
        let alice = try await NoteStoreConformance.makeAccount(store, "alice")
        let context = NoteStoreConformance.context()
        let created = try await store.push(
            accountID: alice, changes: [change(1, edit: 1, text: NoteStoreConformance.hundredBytes)], context: context)
        _ = try await store.push(
            accountID: alice,
            changes: [change(1, server: created[0].serverID, edit: 2, text: NoteStoreConformance.hundredBytes.uppercased(), baseVersion: 1)],
            context: context)
        let statements = Mutex<[String]>([])
        try await store.write { db in db.trace { event in statements.withLock { $0.append(event.expandedDescription) } } }
        // Merges that keep a text (no note written), a kept delete, and a new note: every kind of growth.
        var changes = (0..<merges).map { NoteStoreConformance.hostileMerge(created[0].serverID, edit: 100 + Int64($0)) }
        changes.append(change(1, server: created[0].serverID, edit: 99, text: "", deleted: true, baseVersion: 1))
        changes.append(change(2, edit: 98, text: "new\n"))
        let results = try await store.push(accountID: alice, changes: changes, context: context)
        try await store.write { db in db.trace(options: [], nil) }
        #expect(results.map(\.status) == Array(repeating: .merged, count: merges) + [.kept, .created])
        let touchingAccounts = statements.withLock { $0 }.filter { $0.contains("accounts") }
        #expect(touchingAccounts.count == 2, "\(touchingAccounts)")
        #expect(
            touchingAccounts.first?.hasPrefix(
                "SELECT change_seq, note_count, text_bytes, replay_text_bytes, history_bytes, chunk_bytes, encryption") == true)
        #expect(touchingAccounts.last?.hasPrefix("UPDATE accounts SET") == true)
        #expect(try await store.usage(accountID: alice)?.replayTextBytes == Int64(100 * (merges + 1)))
        try await store.close()
    }
}
