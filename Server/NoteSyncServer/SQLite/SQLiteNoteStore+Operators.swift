import Foundation
import GRDB
import MiniFlake

extension SQLiteNoteStore: OperatorStore {
    public func accountSummaries() async throws -> [AccountSummary] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT a.id, a.username, a.created_at, a.disabled_at,
                           (SELECT COUNT(*) FROM notes n WHERE n.account_id = a.id AND n.deleted = 0),
                           (SELECT COUNT(*) FROM sessions s WHERE s.account_id = a.id)
                    FROM accounts a ORDER BY a.username
                    """
            ).map { row in
                AccountSummary(
                    id: try flake(row[0]), username: row[1], createdAt: row[2], disabledAt: row[3], notes: row[4], sessions: row[5])
            }
        }
    }

    public func resetPassword(accountID: FlakeID, passwordHash: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE accounts SET password_hash = ? WHERE id = ?", arguments: [passwordHash, accountID.rawValue])
            guard db.changesCount == 1 else { return false }
            try db.execute(sql: "DELETE FROM sessions WHERE account_id = ?", arguments: [accountID.rawValue])
            return true
        }
    }

    public func setDisabled(accountID: FlakeID, disabledAt: Int64?) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE accounts SET disabled_at = CASE WHEN ? IS NULL THEN NULL ELSE COALESCE(disabled_at, ?) END WHERE id = ?",
                arguments: [disabledAt, disabledAt, accountID.rawValue])
            guard db.changesCount == 1 else { return false }
            if disabledAt != nil {
                try db.execute(sql: "DELETE FROM sessions WHERE account_id = ?", arguments: [accountID.rawValue])
            }
            return true
        }
    }

    public func checkInvariants() async throws -> [String] {
        try await read { db in
            var problems: [String] = []
            for line in try String.fetchAll(db, sql: "PRAGMA integrity_check") where line != "ok" {
                problems.append("integrity check: \(line)")
            }
            for row in try Row.fetchAll(db, sql: "PRAGMA foreign_key_check") {
                let table: String = row[0]
                let rowID: Int64? = row[1]
                let parent: String = row[2]
                problems.append("foreign key: a row of \(table) (rowid \(rowID.map { "\($0)" } ?? "-")) names a missing \(parent) row")
            }
            for (label, sql) in InvariantQueries.all + [
                InvariantQueries.runningTotals(bytes: "LENGTH(CAST(n.text AS BLOB))"),
                InvariantQueries.replayTotals(bytes: "LENGTH(CAST(e.text AS BLOB))"),
                InvariantQueries.historyTotals(bytes: "LENGTH(v.text)"),
            ] {
                for line in try String.fetchAll(db, sql: sql) { problems.append("\(label): \(line)") }
            }
            return problems
        }
    }

    public func statistics() async throws -> StoreStatistics {
        let counts = try await read { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT (SELECT COUNT(*) FROM accounts),
                           (SELECT COUNT(*) FROM accounts WHERE disabled_at IS NOT NULL),
                           (SELECT COUNT(*) FROM sessions),
                           (SELECT COUNT(*) FROM notes WHERE deleted = 0),
                           (SELECT COUNT(*) FROM notes WHERE deleted <> 0),
                           (SELECT COALESCE(SUM(text_bytes), 0) FROM accounts),
                           (SELECT COUNT(*) FROM applied_edits),
                           (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()),
                           (SELECT COALESCE(SUM(replay_text_bytes), 0) FROM accounts),
                           (SELECT COUNT(*) FROM note_versions),
                           (SELECT COALESCE(SUM(history_bytes), 0) FROM accounts)
                    """)!
            return StoreStatistics(
                accounts: row[0], disabledAccounts: row[1], sessions: row[2], notes: row[3], tombstones: row[4],
                textBytes: row[5], replayTextBytes: row[8], appliedEdits: row[6], noteVersions: row[9], historyBytes: row[10],
                databaseBytes: row[7],
                encryption: try Dictionary(
                    Row.fetchAll(db, sql: "SELECT encryption, COUNT(*) FROM accounts GROUP BY encryption").map { ($0[0], $0[1]) },
                    uniquingKeysWith: +),
                plaintextNotes: try Int.fetchOne(db, sql: InvariantQueries.plaintextNotesLeft) ?? 0)
        }
        var statistics = counts
        // The WAL holds committed pages not yet checkpointed into the file: count it too.
        if let path = databasePath, let size = try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int64 {
            statistics.databaseBytes += size
        }
        return statistics
    }

    /// Copies the live database into a new file at `destination` with SQLite's online backup API, in steps, without
    /// stopping pushes: the copy is made in one step inside one read transaction, so it is the database as of one
    /// commit (in WAL mode, pushes go on committing meanwhile; they are simply not in the copy). The
    /// copy is one self-contained SQLite file that a daemon opens as its `notesyncd.sqlite`.
    ///
    /// - Throws: when `destination` exists, or a database error.
    public func backup(to destination: String) async throws {
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw OperatorError("\(destination) already exists; choose a new file")
        }
        let target = try DatabaseQueue(path: destination)
        do {
            // One step inside one read transaction: a snapshot of one commit; WAL writers go on meanwhile.
            try await databaseReader.backup(to: target)
            try target.close()
        } catch {
            try? target.close()
            try? FileManager.default.removeItem(atPath: destination)
            throw error
        }
    }
}
