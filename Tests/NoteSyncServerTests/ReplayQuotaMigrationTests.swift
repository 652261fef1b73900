import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import PostgresNIO
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
                    arguments: [account, edit, text.map { Data(hex: $0) }])
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
            let bytes = text.map { ByteBuffer(bytes: Data(hex: $0)) }
            try await client.execute(
                """
                INSERT INTO applied_edits (account_id, edit_id, client_id, origin, pusher, status, created_at, text)
                VALUES (\(account), \(edit), 1, 1, 0, 'merged', 1, \(bytes))
                """,
                logger: logger)
        }
        try await store.database.migrate()
        #expect(try await store.database.appliedSchemaVersion() == 9)
        for (account, bytes) in Self.expected {
            #expect(try await store.usage(accountID: id(account))?.replayTextBytes == bytes, "account \(account)")
        }
        #expect(try await store.checkInvariants() == [])
        try await store.close()
    }
}

extension Data {
    /// Bytes from lowercase hex (a test's constant).
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }
}
