import Logging
import MiniFlake
import NIOCore
import NoteSyncProtocol
import PostgresNIO

/// The PostgreSQL store's part of a push (see ``PushDriver``), on the connection of one READ COMMITTED transaction.
struct PostgresPushTransaction: AsyncPushTransaction {
    let connection: PostgresConnection
    let logger: Logger

    /// `SELECT ... FOR UPDATE` on the account row: the lock that serializes the account's pushes across every daemon.
    func lockAccount(_ accountID: FlakeID) async throws -> LockedAccount? {
        var locked: LockedAccount?
        for try await (sequence, notes, bytes, replayBytes, historyBytes, chunkBytes, state, generation) in try await connection.query(
            """
            SELECT change_seq, note_count, text_bytes, replay_text_bytes, history_bytes, chunk_bytes, encryption, key_generation
            FROM accounts WHERE id = \(accountID.rawValue) FOR UPDATE
            """,
            logger: logger
        ).decode((Int64, Int64, Int64, Int64, Int64, Int64, String, Int64).self) {
            locked = LockedAccount(
                sequence: sequence,
                usage: AccountUsage(
                    noteCount: notes, textBytes: bytes, replayTextBytes: replayBytes, historyBytes: historyBytes, chunkBytes: chunkBytes),
                encryption: try LockedAccount.encryption(state: state, generation: generation),
                converting: state == EncryptionState.converting.rawValue)
        }
        return locked
    }

    func knownChunks(_ hashes: [ContentHash], accountID: FlakeID, now: Int64) async throws -> Set<ContentHash> {
        var known = Set<ContentHash>()
        let rows = try await connection.query(
            """
            UPDATE chunks SET referenced_at = \(now) WHERE account_id = \(accountID.rawValue) AND hash = ANY(\(hashes.map(\.hex)))
            RETURNING hash
            """,
            logger: logger)
        for try await hash in rows.decode(String.self) {
            if let hash = ContentHash(hash) { known.insert(hash) }
        }
        return known
    }

    func load(_ keys: PushPlanner.LoadKeys, accountID: FlakeID) async throws -> LoadedBatch {
        let account = accountID.rawValue
        let editIDs = keys.editIDs.map(\.rawValue)
        let serverIDs = keys.serverIDs.map(\.rawValue)
        let clientIDs = keys.clientIDs.map(\.rawValue)
        var loaded = LoadedBatch()
        if !editIDs.isEmpty {
            let rows = try await connection.query(
                """
                SELECT \(unescaped: PostgresRows.appliedEditColumns)
                FROM applied_edits WHERE account_id = \(account) AND edit_id = ANY(\(editIDs))
                """,
                logger: logger
            )
            for try await row in rows.decode(PostgresRows.AppliedEditRow.self) {
                loaded.appliedEdits.append(try PostgresRows.appliedEdit(row))
            }
        }
        if !serverIDs.isEmpty || !clientIDs.isEmpty {
            // The notes named by server ID or by client ID (a replay answers from its applied edit alone).
            let rows = try await connection.query(
                """
                SELECT \(unescaped: PostgresRows.noteColumns) FROM notes
                WHERE account_id = \(account) AND (server_id = ANY(\(serverIDs)) OR client_id = ANY(\(clientIDs)))
                """,
                logger: logger
            )
            for try await row in rows.decode(PostgresRows.NoteRow.self) { loaded.notes.append(try PostgresRows.note(row)) }
        }
        return loaded
    }

    func write(_ plan: PushPlanner.Plan, accountID: FlakeID) async throws {
        guard let statement = PostgresRows.write(plan, accountID: accountID) else { return }
        try await connection.execute(statement, logger: logger)
    }
}
