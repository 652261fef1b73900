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
        for try await (sequence, notes, bytes, replayBytes) in try await connection.query(
            "SELECT change_seq, note_count, text_bytes, replay_text_bytes FROM accounts WHERE id = \(accountID.rawValue) FOR UPDATE",
            logger: logger
        ).decode((Int64, Int64, Int64, Int64).self) {
            locked = LockedAccount(
                sequence: sequence, usage: AccountUsage(noteCount: notes, textBytes: bytes, replayTextBytes: replayBytes))
        }
        return locked
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
        if plan.writes.isEmpty && plan.newEdits.isEmpty { return }
        let account = accountID.rawValue
        // Every insert, update and edit in one statement. Data-modifying CTEs always run to completion
        // whether or not the main statement reads them, and they touch disjoint rows.
        var new = NoteColumns()
        var changed = NoteColumns()
        for write in plan.writes {
            if write.isNew { new.append(write.note) } else { changed.append(write.note) }
        }
        var edits = EditColumns()
        for edit in plan.newEdits { edits.append(edit) }
        // Listeners learn of written notes only (a push that kept a replay text alone changed nothing to pull).
        let notify = plan.writes.isEmpty ? "" : "RETURNING pg_notify('\(PostgresChangeListener.channel)', id::text)"
        try await connection.execute(
            """
            WITH inserted AS (
                INSERT INTO notes (server_id, account_id, client_id, origin, version, text, deleted, conflict_of,
                                   change_seq, created_at, updated_at, edited_at)
                SELECT s, \(account), c, o, v, t, d, NULLIF(cf, 0), q, ca, ua, NULLIF(ea, \(NoteColumns.noTime))
                FROM unnest(\(new.serverID)::int8[], \(new.clientID)::int8[], \(new.origin)::int8[],
                            \(new.version)::int8[], \(new.text)::bytea[], \(new.deleted)::bool[],
                            \(new.conflictOf)::int8[], \(new.changeSeq)::int8[], \(new.createdAt)::int8[],
                            \(new.updatedAt)::int8[], \(new.editedAt)::int8[])
                     AS u(s, c, o, v, t, d, cf, q, ca, ua, ea)
            ), updated AS (
                UPDATE notes SET version = u.v, text = u.t, deleted = u.d, change_seq = u.q, updated_at = u.ua,
                                 edited_at = NULLIF(u.ea, \(NoteColumns.noTime))
                FROM unnest(\(changed.serverID)::int8[], \(changed.version)::int8[], \(changed.text)::bytea[],
                            \(changed.deleted)::bool[], \(changed.changeSeq)::int8[], \(changed.updatedAt)::int8[],
                            \(changed.editedAt)::int8[])
                     AS u(s, v, t, d, q, ua, ea)
                WHERE notes.server_id = u.s AND notes.account_id = \(account)
            ), edits AS (
                INSERT INTO applied_edits (account_id, edit_id, status, server_id, version, conflict_server_id,
                                           conflict_client_id, created_at, client_id, origin, pusher, text)
                SELECT \(account), e, st, NULLIF(s, 0), NULLIF(v, 0), NULLIF(cs, 0), NULLIF(cc, 0), ca, c, o, p,
                       CASE WHEN ht THEN tx END
                FROM unnest(\(edits.editID)::int8[], \(edits.status)::text[], \(edits.serverID)::int8[],
                            \(edits.version)::int8[], \(edits.conflictServerID)::int8[],
                            \(edits.conflictClientID)::int8[], \(edits.createdAt)::int8[], \(edits.clientID)::int8[],
                            \(edits.origin)::int8[], \(edits.pusher)::int8[], \(edits.hasText)::bool[],
                            \(edits.text)::bytea[])
                     AS u(e, st, s, v, cs, cc, ca, c, o, p, ht, tx)
            )
            UPDATE accounts SET change_seq = \(plan.newSequence), note_count = \(plan.newUsage.noteCount),
                                text_bytes = \(plan.newUsage.textBytes), replay_text_bytes = \(plan.newUsage.replayTextBytes)
            WHERE id = \(account) AND (change_seq <> \(plan.newSequence) OR replay_text_bytes <> \(plan.newUsage.replayTextBytes))
            \(unescaped: notify)
            """,
            logger: logger
        )
    }

    /// Notes as column arrays, for `unnest`. Absent values are 0 (IDs are positive), or ``noTime`` for an edit time,
    /// turned back into NULL in SQL.
    struct NoteColumns {
        var serverID: [Int64] = [], clientID: [Int64] = [], origin: [Int64] = [], version: [Int64] = []
        var text: [ByteBuffer] = [], deleted: [Bool] = [], conflictOf: [Int64] = [], changeSeq: [Int64] = []
        var createdAt: [Int64] = [], updatedAt: [Int64] = [], editedAt: [Int64] = []

        /// Stands for an absent edit time (no ``WireTime`` comes near it).
        static let noTime = Int64.min

        mutating func append(_ note: StoredNote) {
            serverID.append(note.serverID.rawValue)
            clientID.append(note.clientID.rawValue)
            origin.append(note.origin.rawValue)
            version.append(note.version)
            text.append(ByteBuffer(string: note.text))
            deleted.append(note.deleted)
            conflictOf.append(note.conflictOf?.rawValue ?? 0)
            changeSeq.append(note.changeSeq)
            createdAt.append(note.createdAt)
            updatedAt.append(note.updatedAt)
            editedAt.append(note.editedAt ?? Self.noTime)
        }
    }

    /// Applied edits as column arrays, for `unnest`. Absent values are 0 (IDs and versions are positive); an absent
    /// text is an empty one with `hasText` false.
    struct EditColumns {
        var editID: [Int64] = [], status: [String] = [], serverID: [Int64] = [], version: [Int64] = []
        var conflictServerID: [Int64] = [], conflictClientID: [Int64] = [], createdAt: [Int64] = []
        var clientID: [Int64] = [], origin: [Int64] = [], pusher: [Int64] = []
        var hasText: [Bool] = [], text: [ByteBuffer] = []

        mutating func append(_ edit: AppliedEdit) {
            editID.append(edit.editID.rawValue)
            status.append(edit.status.rawValue)
            serverID.append(edit.serverID?.rawValue ?? 0)
            version.append(edit.version ?? 0)
            conflictServerID.append(edit.conflict?.serverID.rawValue ?? 0)
            conflictClientID.append(edit.conflict?.clientID.rawValue ?? 0)
            createdAt.append(edit.createdAt)
            clientID.append(edit.noteKey.clientID.rawValue)
            origin.append(edit.noteKey.origin.rawValue)
            pusher.append(edit.pusher?.rawValue ?? 0)
            hasText.append(edit.text != nil)
            text.append(ByteBuffer(string: edit.text ?? ""))
        }
    }
}
