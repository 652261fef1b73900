import GRDB
import MiniFlake
import NoteSyncProtocol

// Decoding rows into the client's values.

/// The columns of `notes` in the order ``LocalNote/init(row:)`` reads them.
let noteColumns = """
    id, client_id, origin, server_id, server_version, text, deleted, base_text, revision, dirty, is_conflict, \
    conflict_of_server_id, push_error, push_error_message, created_at, updated_at
    """

extension FlakeID {
    /// An ID read from the database, where only valid IDs are written.
    init(stored value: Int64) throws {
        do {
            self = try FlakeID(validating: value)
        } catch {
            throw NotesError(.storage, "The local database holds an invalid ID (\(value)).")
        }
    }

    init?(storedIfPresent value: Int64?) throws {
        guard let value else { return nil }
        try self.init(stored: value)
    }
}

extension LocalNote {
    /// Reads a row selected with ``noteColumns``.
    init(row: Row) throws {
        let errorCode: String? = row[12]
        id = row[0]
        clientID = try FlakeID(stored: row[1])
        origin = try FlakeID(stored: row[2])
        serverID = try FlakeID(storedIfPresent: row[3])
        serverVersion = row[4]
        text = row[5]
        isDeleted = row[6]
        baseText = row[7]
        revision = row[8]
        isDirty = row[9]
        isConflict = row[10]
        conflictOf = try FlakeID(storedIfPresent: row[11])
        pushError = errorCode.map { PushError(code: $0, message: row[13] ?? $0) }
        createdAt = row[14]
        updatedAt = row[15]
    }
}

/// The `settings` row.
struct Settings: Sendable {
    var origin: FlakeID
    var flakeInstance: Int
    var highWaterMark: FlakeID?
    var serverURL: String?
    var accountID: FlakeID?
    var username: String?
    var token: String?
    var cursor: String?
    var lastSyncAt: Int64?
    /// Before migration `v-owner-accounts`: the account whose base texts `notes` and `outbox` held. Unused since
    /// (every note's base text is its owner's); kept for the old rows.
    var baseAccountID: FlakeID?

    static func fetch(_ db: Database) throws -> Settings? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT origin, flake_instance, flake_high_water, server_url, account_id, username, token, cursor,
                        last_sync_at, base_account_id FROM settings WHERE id = 1
                        """))
        else { return nil }
        return Settings(
            origin: try FlakeID(stored: row[0]),
            flakeInstance: row[1],
            highWaterMark: try FlakeID(storedIfPresent: row[2]),
            serverURL: row[3],
            accountID: try FlakeID(storedIfPresent: row[4]),
            username: row[5],
            token: row[6],
            cursor: row[7],
            lastSyncAt: row[8],
            baseAccountID: try FlakeID(storedIfPresent: row[9])
        )
    }

    /// The signed-in account, when there is one.
    var account: AccountInfo? {
        guard token != nil, let accountID, let username, let serverURL else { return nil }
        return AccountInfo(accountID: accountID, username: username, serverURL: serverURL)
    }
}
