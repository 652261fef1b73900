import MiniFlake
import PostgresNIO

extension PostgresNoteStore: OperatorStore {
    public func accountSummaries() async throws -> [AccountSummary] {
        try await run { client in
            let rows = try await client.query(
                """
                SELECT a.id, a.username, a.created_at, a.disabled_at,
                       (SELECT COUNT(*) FROM notes n WHERE n.account_id = a.id AND NOT n.deleted),
                       (SELECT COUNT(*) FROM sessions s WHERE s.account_id = a.id)
                FROM accounts a ORDER BY a.username
                """,
                logger: self.logger
            )
            var summaries: [AccountSummary] = []
            for try await (id, username, createdAt, disabledAt, notes, sessions) in rows.decode(
                (Int64, String, Int64, Int64?, Int64, Int64).self)
            {
                summaries.append(
                    AccountSummary(
                        id: try flake(id), username: username, createdAt: createdAt, disabledAt: disabledAt, notes: Int(notes),
                        sessions: Int(sessions)))
            }
            return summaries
        }
    }

    public func resetPassword(accountID: FlakeID, passwordHash: String) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            var found = false
            for try await _ in try await connection.query(
                "UPDATE accounts SET password_hash = \(passwordHash) WHERE id = \(accountID.rawValue) RETURNING 1", logger: logger)
            {
                found = true
            }
            guard found else { return false }
            _ = try await self.count("DELETE FROM sessions WHERE account_id = \(accountID.rawValue) \(unescaped: Self.wakeWaiters)", on: connection)
            return true
        }
    }

    public func setDisabled(accountID: FlakeID, disabledAt: Int64?) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            var found = false
            let query: PostgresQuery =
                if let disabledAt {
                    "UPDATE accounts SET disabled_at = COALESCE(disabled_at, \(disabledAt)) WHERE id = \(accountID.rawValue) RETURNING 1"
                } else {
                    "UPDATE accounts SET disabled_at = NULL WHERE id = \(accountID.rawValue) RETURNING 1"
                }
            for try await _ in try await connection.query(query, logger: logger) { found = true }
            guard found else { return false }
            if disabledAt != nil {
                _ = try await self.count("DELETE FROM sessions WHERE account_id = \(accountID.rawValue) \(unescaped: Self.wakeWaiters)", on: connection)
            }
            return true
        }
    }

    public func checkInvariants() async throws -> [String] {
        let logger = self.logger
        // One snapshot for every query: a REPEATABLE READ, read-only transaction.
        return try await transaction { connection in
            try await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var problems: [String] = []
            for (label, sql) in InvariantQueries.all + [
                InvariantQueries.runningTotals(bytes: "octet_length(n.text)"), InvariantQueries.replayTotals(bytes: "octet_length(e.text)"),
                InvariantQueries.historyTotals(bytes: "octet_length(v.text)"),
            ] {
                for try await line in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(String.self) {
                    problems.append("\(label): \(line)")
                }
            }
            return problems
        }
    }

    public func statistics() async throws -> StoreStatistics {
        try await run { client in
            let rows = try await client.query(
                """
                SELECT (SELECT COUNT(*) FROM accounts),
                       (SELECT COUNT(*) FROM accounts WHERE disabled_at IS NOT NULL),
                       (SELECT COUNT(*) FROM sessions),
                       (SELECT COUNT(*) FROM notes WHERE NOT deleted),
                       (SELECT COUNT(*) FROM notes WHERE deleted),
                       (SELECT COALESCE(SUM(text_bytes), 0)::BIGINT FROM accounts),
                       (SELECT COUNT(*) FROM applied_edits),
                       pg_database_size(current_database()),
                       (SELECT COALESCE(SUM(replay_text_bytes), 0)::BIGINT FROM accounts),
                       (SELECT COUNT(*) FROM note_versions),
                       (SELECT COALESCE(SUM(history_bytes), 0)::BIGINT FROM accounts)
                """,
                logger: self.logger
            )
            var statistics = StoreStatistics(
                accounts: 0, disabledAccounts: 0, sessions: 0, notes: 0, tombstones: 0, textBytes: 0, appliedEdits: 0, databaseBytes: 0)
            for try await (accounts, disabled, sessions, notes, tombstones, textBytes, edits, size, replayBytes, versions, historyBytes)
                in rows.decode((Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64).self)
            {
                statistics = StoreStatistics(
                    accounts: Int(accounts), disabledAccounts: Int(disabled), sessions: Int(sessions), notes: Int(notes),
                    tombstones: Int(tombstones), textBytes: textBytes, replayTextBytes: replayBytes, appliedEdits: Int(edits),
                    noteVersions: Int(versions), historyBytes: historyBytes, databaseBytes: size)
            }
            var encryption: [String: Int] = [:]
            for try await (state, count) in try await client.query(
                "SELECT encryption, COUNT(*) FROM accounts GROUP BY encryption", logger: self.logger
            ).decode((String, Int64).self) {
                encryption[state] = Int(count)
            }
            statistics.encryption = encryption
            for try await count in try await client.query(PostgresQuery(unsafeSQL: InvariantQueries.plaintextNotesLeft), logger: self.logger)
                .decode(Int64.self)
            {
                statistics.plaintextNotes = Int(count)
            }
            return statistics
        }
    }
}
