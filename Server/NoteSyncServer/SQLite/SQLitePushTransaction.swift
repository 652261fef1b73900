import GRDB
import MiniFlake
import NoteSyncProtocol

/// The SQLite store's part of a push (see ``PushDriver``), on the connection of one immediate transaction, which
/// already holds the database's write lock: pushes are serialized by it.
///
/// Loads use batched `IN (...)` queries (chunks of at most 500 values, padded to a few fixed sizes so that their
/// statements stay cached); writes use cached prepared statements.
struct SQLitePushTransaction: PushTransaction {
    let db: Database

    func lockAccount(_ accountID: FlakeID) throws -> LockedAccount? {
        let statement = try db.cachedStatement(
            sql: """
                SELECT change_seq, note_count, text_bytes, replay_text_bytes, history_bytes, chunk_bytes, encryption,
                    key_generation
                FROM accounts WHERE id = ?
                """)
        guard let row = try Row.fetchOne(statement, arguments: [accountID.rawValue]) else { return nil }
        return LockedAccount(
            sequence: row[0],
            usage: AccountUsage(
                noteCount: row[1], textBytes: row[2], replayTextBytes: row[3], historyBytes: row[4], chunkBytes: row[5]),
            encryption: try LockedAccount.encryption(state: row[6], generation: row[7]),
            converting: (row[6] as String) == EncryptionState.converting.rawValue)
    }

    func load(_ keys: PushPlanner.LoadKeys, accountID: FlakeID) throws -> LoadedBatch {
        let account = accountID.rawValue
        var loaded = LoadedBatch()
        // The applied edits (a replay answers from the edit alone).
        try Self.forEachChunk(keys.editIDs.map(\.rawValue)) { chunk in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT \(SQLiteRows.appliedEditColumns) FROM applied_edits
                    WHERE account_id = ? AND edit_id IN (\(Self.placeholders(chunk.count)))
                    """
            )
            let rows = try Row.fetchCursor(statement, arguments: StatementArguments([account] + chunk))
            while let row = try rows.next() { loaded.appliedEdits.append(try SQLiteRows.appliedEdit(row)) }
        }
        try Self.forEachChunk(keys.serverIDs.map(\.rawValue)) { chunk in
            let statement = try db.cachedStatement(
                // `+account_id` keeps the planner on rowid lookups (never a scan of the account's change index).
                sql: "SELECT \(SQLiteRows.noteColumns) FROM notes WHERE +account_id = ? AND server_id IN (\(Self.placeholders(chunk.count)))"
            )
            try SQLiteRows.fetchNotes(statement, StatementArguments([account] + chunk), into: &loaded.notes)
        }
        try Self.forEachChunk(keys.clientIDs.map(\.rawValue)) { chunk in
            let statement = try db.cachedStatement(
                sql: "SELECT \(SQLiteRows.noteColumns) FROM notes WHERE account_id = ? AND client_id IN (\(Self.placeholders(chunk.count)))"
            )
            try SQLiteRows.fetchNotes(statement, StatementArguments([account] + chunk), into: &loaded.notes)
        }
        return loaded
    }

    func knownChunks(_ hashes: [ContentHash], accountID: FlakeID, now: Int64) throws -> Set<ContentHash> {
        var known = Set<ContentHash>()
        var start = 0
        while start < hashes.count {
            let chunk = hashes[start..<min(start + Self.chunkSize, hashes.count)]
            let rows = try String.fetchAll(
                db,
                sql: "UPDATE chunks SET referenced_at = ? WHERE account_id = ? AND hash IN (\(Self.placeholders(chunk.count))) RETURNING hash",
                arguments: StatementArguments([now, accountID.rawValue] + chunk.map(\.hex)))
            known.formUnion(rows.compactMap { ContentHash($0) })
            start += Self.chunkSize
        }
        return known
    }

    func write(_ plan: PushPlanner.Plan, accountID: FlakeID) throws {
        let account = accountID.rawValue
        // One update of the account row per push, when a note or a replay text was written.
        if !plan.writes.isEmpty || plan.newUsage != plan.oldUsage {
            try db.cachedStatement(
                sql: "UPDATE accounts SET change_seq = ?, note_count = ?, text_bytes = ?, replay_text_bytes = ?, history_bytes = ? WHERE id = ?"
            ).execute(arguments: [
                plan.newSequence, plan.newUsage.noteCount, plan.newUsage.textBytes, plan.newUsage.replayTextBytes,
                plan.newUsage.historyBytes, account,
            ])
        }
        if !plan.writes.isEmpty {
            let insert = try db.cachedStatement(sql: SQLiteRows.insertNote)
            let update = try db.cachedStatement(sql: SQLiteRows.updateNote)
            // New change sequences are all above the account's current one, so the unique
            // (account_id, change_seq) index never sees a clash. Every note the planner writes is the pushing
            // account's (loaded from it, or made with its ID), so each binds its own account ID.
            for write in plan.writes {
                if write.isNew {
                    try insert.execute(arguments: SQLiteRows.insertArguments(write.note))
                } else {
                    try update.execute(arguments: SQLiteRows.updateArguments(write.note))
                }
            }
        }
        try insertVersions(plan.versions)
        if !plan.newEdits.isEmpty {
            let insertEdit = try db.cachedStatement(
                sql: """
                    INSERT INTO applied_edits (account_id, edit_id, status, server_id, version, conflict_server_id,
                                               conflict_client_id, created_at, client_id, origin, pusher, text, tags, pinned,
                                               archived)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN COALESCE(?, X'') END, ?, ?, ?)
                    """
            )
            for edit in plan.newEdits {
                // The text as a blob (a TEXT binding would stop at a NUL); the empty text binds as NULL, so the CASE
                // tells "no text" (NULL) from "" (an empty blob).
                try insertEdit.execute(arguments: [
                    account, edit.editID.rawValue, edit.status.rawValue, edit.serverID?.rawValue, edit.version,
                    edit.conflict?.serverID.rawValue, edit.conflict?.clientID.rawValue, edit.createdAt,
                    edit.noteKey.clientID.rawValue, edit.noteKey.origin.rawValue, edit.pusher?.rawValue ?? 0,
                    edit.text != nil, edit.text.map(SQLiteRows.textBlob), edit.tags.map(TagsColumn.text), edit.pinned, edit.archived,
                ])
            }
        }
    }

    /// Inserts the plan's versions with as few statements as their count's binary digits (a batch of 1,000: six),
    /// each cached: a multi-row `INSERT` of 512, 256, ... rows (SQLite binds at most 32,766 values per statement).
    private func insertVersions(_ versions: [StoredVersion]) throws {
        var start = 0
        while start < versions.count {
            let count = Self.versionChunks.first { $0 <= versions.count - start }!
            var arguments: [(any DatabaseValueConvertible)?] = []
            arguments.reserveCapacity(count * 14)
            for version in versions[start..<(start + count)] { arguments += SQLiteRows.versionArguments(version) }
            try db.cachedStatement(sql: SQLiteRows.insertVersions(count: count)).execute(arguments: StatementArguments(arguments))
            start += count
        }
    }

    /// Row counts of the version inserts, largest first.
    private static let versionChunks = [512, 256, 128, 64, 32, 16, 8, 4, 2, 1]

    /// The largest `IN (...)` list one statement takes.
    static let chunkSize = 500
    /// List lengths statements are prepared for; a shorter list is padded with its last value (harmless in `IN`).
    private static let bucketSizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, chunkSize]

    /// Calls `body` with chunks of at most ``chunkSize`` values, each padded to a bucket size.
    private static func forEachChunk(_ values: [Int64], _ body: ([Int64]) throws -> Void) throws {
        var start = 0
        while start < values.count {
            let end = min(start + chunkSize, values.count)
            var chunk = Array(values[start..<end])
            let bucket = bucketSizes.first { $0 >= chunk.count } ?? chunk.count
            if let last = chunk.last {
                chunk.append(contentsOf: repeatElement(last, count: bucket - chunk.count))
            }
            try body(chunk)
            start = end
        }
    }

    private static func placeholders(_ count: Int) -> String {
        String(repeating: "?, ", count: max(count - 1, 0)) + "?"
    }
}
