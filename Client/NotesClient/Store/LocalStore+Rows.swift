import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol

// Decoding rows into the client's values.

/// The columns of `notes` in the order ``LocalNote/init(row:)`` reads them.
let noteColumns = """
    id, client_id, origin, server_id, server_version, text, deleted, base_text, revision, dirty, is_conflict, \
    conflict_of_server_id, push_error, push_error_message, created_at, updated_at, conflict_here, tags, pinned, \
    archived, base_tags, base_pinned, base_archived, attachments, base_attachments
    """

/// How many columns ``noteColumns`` names: a statement that selects more after them reads those from this index on.
let noteColumnCount = 25

/// A note text as the store keeps it: its UTF-8 bytes in a BLOB, because GRDB binds and reads a Swift string as a
/// C string, which stops at the first NUL, and a note may hold NUL. The empty text is the TEXT value `''` (GRDB binds
/// an empty blob as NULL, and NULL means "no text" in `base_text`). Equal texts are always stored as equal values, so
/// SQL comparisons (`text IS NOT base_text`) stay right.
struct StoredText: DatabaseValueConvertible {
    var text: String

    init(_ text: String) { self.text = text }

    var databaseValue: DatabaseValue {
        text.isEmpty ? "".databaseValue : Data(text.utf8).databaseValue
    }

    static func fromDatabaseValue(_ value: DatabaseValue) -> StoredText? {
        switch value.storage {
        case .blob(let data): StoredText(String(decoding: data, as: UTF8.self))
        case .string(let string): StoredText(string)
        default: nil
        }
    }
}

extension Optional where Wrapped == String {
    /// The stored form of an optional text (NULL stays NULL).
    var stored: StoredText? { map(StoredText.init) }
}

extension String {
    /// The stored form of a text.
    var stored: StoredText { StoredText(self) }
}

extension Row {
    /// A text column read byte-exactly, in place (NUL included); "" for NULL.
    func text(at index: Int) -> String {
        (try? withUnsafeData(atIndex: index) { data in data.map { String(decoding: $0, as: UTF8.self) } }) ?? ""
    }

    /// A nullable text column read byte-exactly.
    func textIfPresent(at index: Int) -> String? {
        hasNull(atIndex: index) ? nil : text(at: index)
    }
}

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
        text = row.text(at: 5)
        isDeleted = row[6]
        baseText = row.textIfPresent(at: 7)
        revision = row[8]
        isDirty = row[9]
        isConflict = row[10]
        conflictOf = try FlakeID(storedIfPresent: row[11])
        pushError = errorCode.map { PushError(code: $0, message: row[13] ?? $0) }
        createdAt = row[14]
        updatedAt = row[15]
        isConflictFromThisDevice = row[16]
        tags = StoredTags.names(row[17])
        isPinned = row[18]
        isArchived = row[19]
        baseTags = StoredTags.names(row[20])
        basePinned = row[21]
        baseArchived = row[22]
        attachments = StoredAttachments.manifests(row[23])
        baseAttachments = StoredAttachments.manifests(row[24])
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
    /// The remembered server's limits from its `GET /v1/info` at the last sync (nil before one): local writes are
    /// checked against them.
    var maxNoteBytes: Int?
    var maxBodyBytes: Int?
    /// Whether the last pull stopped before the server said it had nothing more (an interrupted sync).
    var pullUnfinished: Bool

    static func fetch(_ db: Database) throws -> Settings? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT origin, flake_instance, flake_high_water, server_url, account_id, username, token, cursor,
                        last_sync_at, base_account_id, max_note_bytes, max_body_bytes, pull_unfinished FROM settings WHERE id = 1
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
            baseAccountID: try FlakeID(storedIfPresent: row[9]),
            maxNoteBytes: row[10],
            maxBodyBytes: row[11],
            pullUnfinished: row[12]
        )
    }

    /// The signed-in account, when there is one.
    var account: AccountInfo? {
        guard token != nil, let accountID, let username, let serverURL else { return nil }
        return AccountInfo(accountID: accountID, username: username, serverURL: serverURL)
    }
}
