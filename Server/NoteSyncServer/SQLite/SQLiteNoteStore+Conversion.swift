import GRDB
import MiniFlake
import NoteSyncProtocol

/// Converting a plaintext account to end-to-end encryption (``EncryptionStore/setUpEncryption(accountID:passwordHash:keys:keepingSession:)``
/// on an account that holds notes): the steps both the set-up and a push's transaction take, on the caller's
/// transaction. Docs/SECURITY.md ("Converting an account") says what is kept when.
extension SQLiteNoteStore {
    /// Starts a conversion in the caller's transaction: every live note (conflict copies included) and every history
    /// version of the account is marked plaintext, and each tombstone drops its tags and flags (a tombstone holds no
    /// text: it has nothing else in the clear to convert). Then finishes it at once when no live note is left
    /// (``finishConversionIfDone(accountID:_:)``). Returns how many notes are left to convert.
    static func startConversion(accountID: FlakeID, _ db: Database) throws -> Int64 {
        let account = accountID.rawValue
        try db.execute(
            sql: """
                UPDATE notes SET plaintext = 1 WHERE account_id = ? AND deleted = 0;
                UPDATE notes SET tags = '', attachments = '', pinned = 0, archived = 0 WHERE account_id = ? AND deleted = 1;
                UPDATE note_versions SET plaintext = 1 WHERE account_id = ?;
                """,
            arguments: [account, account, account])
        _ = try finishConversionIfDone(accountID: accountID, db)
        return try plaintextNoteCount(accountID: accountID, db)
    }

    /// How many of the account's notes are still in the clear (0 unless it is converting).
    static func plaintextNoteCount(accountID: FlakeID, _ db: Database) throws -> Int64 {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE account_id = ? AND plaintext = 1"), arguments: [accountID.rawValue]) ?? 0
    }

    /// Marks `serverIDs` (notes a converting account's push just wrote: an envelope, or a tombstone) converted, then
    /// finishes the conversion if they were the last. Returns whether it finished.
    static func converted(_ serverIDs: [FlakeID], accountID: FlakeID, _ db: Database) throws -> Bool {
        let account = accountID.rawValue
        var start = 0
        while start < serverIDs.count {
            let chunk = serverIDs[start..<min(start + SQLitePushTransaction.chunkSize, serverIDs.count)].map(\.rawValue)
            try db.execute(
                sql: "UPDATE notes SET plaintext = 0 WHERE account_id = ? AND plaintext = 1 AND server_id IN (\(databaseQuestionMarks(count: chunk.count)))",
                arguments: StatementArguments([account] + chunk))
            start += chunk.count
        }
        return try finishConversionIfDone(accountID: accountID, db)
    }

    /// When a converting account has no plaintext note left: deletes the history versions written before the
    /// conversion, takes the texts, tags and flags out of its applied edits (each keeps its outcome), takes them out of
    /// the running totals, and marks the account encrypted. Returns whether it did.
    static func finishConversionIfDone(accountID: FlakeID, _ db: Database) throws -> Bool {
        let account = accountID.rawValue
        guard try plaintextNoteCount(accountID: accountID, db) == 0 else { return false }
        let historyBytes = try Int64.fetchOne(
            db, sql: "SELECT COALESCE(SUM(LENGTH(text)), 0) FROM note_versions WHERE account_id = ? AND plaintext = 1", arguments: [account]) ?? 0
        try db.execute(
            sql: """
                DELETE FROM note_versions WHERE account_id = ? AND plaintext = 1;
                UPDATE applied_edits SET text = NULL, tags = NULL, pinned = NULL, archived = NULL
                WHERE account_id = ? AND (text IS NOT NULL OR tags IS NOT NULL OR pinned IS NOT NULL OR archived IS NOT NULL);
                UPDATE accounts SET encryption = ?, history_bytes = history_bytes - ?, replay_text_bytes = 0
                WHERE id = ? AND encryption = ?;
                """,
            arguments: [account, account, EncryptionState.encrypted.rawValue, historyBytes, account, EncryptionState.converting.rawValue])
        return true
    }

    /// After a conversion finished: rewrites the database file (`VACUUM`) and empties the write-ahead log (a
    /// checkpoint that truncates it), so the texts it held in the clear leave both files. `secure_delete` zeroes a
    /// deleted row, but not the stale copy a page split or merge leaves behind of a row it moved while it was still
    /// live: with the attachment columns' two more bytes per row, ConversionEndToEndTests found one plaintext version
    /// left that way in a `note_versions` leaf's free space. `VACUUM` copies the whole file under the write lock, once
    /// per conversion. Best effort: a reader holding an old snapshot makes it wait or fail, and the next conversion or
    /// the WAL's own checkpoints overwrite it later; returns whether it truncated, never throws.
    @discardableResult
    func truncateWriteAheadLog() async -> Bool {
        guard databasePath != nil else { return false }
        do {
            try await writer.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM")
                _ = try db.checkpoint(Database.CheckpointMode.truncate)
            }
            return true
        } catch {
            return false
        }
    }
}

extension SQLitePushTransaction {
    func converted(_ serverIDs: [FlakeID], accountID: FlakeID) throws -> Bool {
        try SQLiteNoteStore.converted(serverIDs, accountID: accountID, db)
    }
}
