import Logging
import MiniFlake
import NoteSyncProtocol
import PostgresNIO

/// Converting a plaintext account to end-to-end encryption: the PostgreSQL store's half of
/// `SQLiteNoteStore+Conversion.swift` (the same steps and rules, on the caller's transaction).
extension PostgresNoteStore {
    /// See `SQLiteNoteStore.startConversion(accountID:_:)`.
    static func startConversion(accountID: FlakeID, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let account = accountID.rawValue
        try await connection.execute("UPDATE notes SET plaintext = true WHERE account_id = \(account) AND NOT deleted", logger: logger)
        try await connection.execute(
            "UPDATE notes SET tags = '', attachments = '', pinned = false, archived = false WHERE account_id = \(account) AND deleted", logger: logger)
        try await connection.execute("UPDATE note_versions SET plaintext = true WHERE account_id = \(account)", logger: logger)
        _ = try await finishConversionIfDone(accountID: accountID, on: connection, logger: logger)
        return try await plaintextNoteCount(accountID: accountID, on: connection, logger: logger)
    }

    /// How many of the account's notes are still in the clear (0 unless it is converting).
    static func plaintextNoteCount(accountID: FlakeID, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        var count: Int64 = 0
        for try await value in try await connection.query(
            "SELECT COUNT(*) FROM notes WHERE account_id = \(accountID.rawValue) AND plaintext", logger: logger
        ).decode(Int64.self) {
            count = value
        }
        return count
    }

    /// See `SQLiteNoteStore.converted(_:accountID:_:)`.
    static func converted(_ serverIDs: [FlakeID], accountID: FlakeID, on connection: PostgresConnection, logger: Logger) async throws
        -> Bool
    {
        let ids = serverIDs.map(\.rawValue)
        try await connection.execute(
            "UPDATE notes SET plaintext = false WHERE account_id = \(accountID.rawValue) AND plaintext AND server_id = ANY(\(ids))",
            logger: logger)
        return try await finishConversionIfDone(accountID: accountID, on: connection, logger: logger)
    }

    /// See `SQLiteNoteStore.finishConversionIfDone(accountID:_:)`.
    static func finishConversionIfDone(accountID: FlakeID, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let account = accountID.rawValue
        guard try await plaintextNoteCount(accountID: accountID, on: connection, logger: logger) == 0 else { return false }
        try await connection.execute(
            """
            WITH purged AS (
                DELETE FROM note_versions WHERE account_id = \(account) AND plaintext RETURNING octet_length(text) AS bytes
            )
            UPDATE accounts SET encryption = \(EncryptionState.encrypted.rawValue), replay_text_bytes = 0,
                                history_bytes = history_bytes - (SELECT COALESCE(SUM(bytes), 0) FROM purged)
            WHERE id = \(account) AND encryption = \(EncryptionState.converting.rawValue)
            """,
            logger: logger)
        try await connection.execute(
            """
            UPDATE applied_edits SET text = NULL, tags = NULL, pinned = NULL, archived = NULL
            WHERE account_id = \(account) AND (text IS NOT NULL OR tags IS NOT NULL OR pinned IS NOT NULL OR archived IS NOT NULL)
            """,
            logger: logger)
        return true
    }
}

extension PostgresPushTransaction {
    func converted(_ serverIDs: [FlakeID], accountID: FlakeID) async throws -> Bool {
        try await PostgresNoteStore.converted(serverIDs, accountID: accountID, on: connection, logger: logger)
    }
}
