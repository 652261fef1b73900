import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol

/// The local SQLite database: owns the writer and the migrations. Every method that changes state is one
/// transaction, run by ``NotesClient``.
///
/// Tables (the migration lists the columns):
/// - `settings`: one row (`id = 1`): installation origin and flake instance, the flake high-water mark, the
///   remembered server URL, and the account state (account, token, cursor, last sync) forgotten at sign-out.
/// - `notes`: every local note, live or tombstone; `(client_id, origin)` unique, `server_id` unique.
/// - `outbox`: at most one in-flight push snapshot per note, re-sent unchanged (same edit ID) until answered.
struct LocalStore: Sendable {
    let writer: any DatabaseWriter

    /// The database file inside a data directory.
    static let fileName = "notes.sqlite"

    /// Opens (creating when missing) the database file in `directory`, which must exist.
    static func open(directory: URL) throws -> LocalStore {
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(10)
        configuration.label = "notes"
        configuration.prepareDatabase { db in
            // Reads map the file instead of copying it page by page: listings of many notes stay fast.
            try db.execute(sql: "PRAGMA mmap_size = 268435456")
        }
        let path = directory.appendingPathComponent(fileName).path
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        return try LocalStore(writer: queue)
    }

    /// A database that lives in memory only (tests, the simulation).
    static func inMemory() throws -> LocalStore {
        var configuration = Configuration()
        configuration.label = "notes-memory"
        return try LocalStore(writer: DatabaseQueue(configuration: configuration))
    }

    init(writer: any DatabaseWriter) throws {
        self.writer = writer
        try Self.migrator.migrate(writer)
    }

    /// The schema. Migrations are never edited once shipped: add new ones.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE settings (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        origin INTEGER NOT NULL CHECK (origin > 0),
                        flake_instance INTEGER NOT NULL CHECK (flake_instance BETWEEN 0 AND 1023),
                        flake_high_water INTEGER,
                        server_url TEXT,
                        account_id INTEGER,
                        username TEXT,
                        token TEXT,
                        cursor TEXT,
                        last_sync_at INTEGER,
                        base_account_id INTEGER
                    );
                    CREATE TABLE notes (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        client_id INTEGER NOT NULL CHECK (client_id > 0),
                        origin INTEGER NOT NULL CHECK (origin > 0),
                        server_id INTEGER,
                        server_version INTEGER,
                        text TEXT NOT NULL,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        base_text TEXT,
                        revision INTEGER NOT NULL DEFAULT 1,
                        dirty INTEGER NOT NULL DEFAULT 1,
                        is_conflict INTEGER NOT NULL DEFAULT 0,
                        conflict_of_server_id INTEGER,
                        push_error TEXT,
                        push_error_message TEXT,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX notes_client_id_origin ON notes(client_id, origin);
                    CREATE UNIQUE INDEX notes_server_id ON notes(server_id) WHERE server_id IS NOT NULL;
                    CREATE INDEX notes_dirty ON notes(id) WHERE dirty;
                    CREATE INDEX notes_updated_at ON notes(updated_at, id);
                    CREATE TABLE outbox (
                        note_id INTEGER PRIMARY KEY REFERENCES notes(id) ON DELETE CASCADE,
                        edit_id INTEGER NOT NULL UNIQUE,
                        text TEXT NOT NULL,
                        deleted INTEGER NOT NULL,
                        base_version INTEGER,
                        base_text TEXT,
                        server_id INTEGER,
                        revision INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v2-account-bases") { db in
            // The base texts of the accounts this installation is not signed in to (see
            // `NotesClient.switchBases`): signing back in to one pushes its notes with that account's bases, so an
            // edit made meanwhile fast-forwards or merges instead of becoming a conflict copy.
            try db.execute(
                sql: """
                    CREATE TABLE account_bases (
                        account_id INTEGER NOT NULL,
                        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
                        base_text TEXT NOT NULL,
                        PRIMARY KEY (account_id, note_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX account_bases_note ON account_bases(note_id);
                    -- Clean live notes without a server ID: left by a sign-in for its first pull to find.
                    CREATE INDEX notes_unmatched ON notes(id) WHERE server_id IS NULL AND NOT dirty AND NOT deleted;
                    """)
        }
        return migrator
    }
}

// MARK: - Rows

/// The columns of `notes` in the order ``LocalNote/init(row:)`` reads them.
let noteColumns = """
    id, client_id, origin, server_id, server_version, text, deleted, base_text, revision, dirty, is_conflict, \
    conflict_of_server_id, push_error, push_error_message, created_at, updated_at
    """

/// `noteColumns` prefixed with a table alias.
func noteColumns(as alias: String) -> String {
    noteColumns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespaces))" }.joined(separator: ", ")
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

    static func fetch(_ db: Database) throws -> Settings? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT origin, flake_instance, flake_high_water, server_url, account_id, username, token, cursor,
                        last_sync_at FROM settings WHERE id = 1
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
            lastSyncAt: row[8]
        )
    }

    /// The signed-in account, when there is one.
    var account: AccountInfo? {
        guard token != nil, let accountID, let username, let serverURL else { return nil }
        return AccountInfo(accountID: accountID, username: username, serverURL: serverURL)
    }
}

/// One row of `outbox` joined with its note's identity: a change ready to send.
struct OutboxEntry: Sendable {
    var noteID: Int64
    var editID: FlakeID
    var text: String
    var deleted: Bool
    var baseVersion: Int64?
    var baseText: String?
    var serverID: FlakeID?
    var revision: Int64
    var clientID: FlakeID
    var origin: FlakeID

    var change: NoteChange {
        NoteChange(
            clientID: clientID, origin: origin, serverID: serverID, editID: editID, text: text, deleted: deleted,
            baseVersion: baseVersion, baseText: baseText)
    }

    /// The whole outbox in push order: conflict copies first, then oldest edit first.
    ///
    /// Copies go first because a note carried into another account may have lost a line to a conflict copy (the
    /// conflict gave the note the other side's text). Pushed in this order, the account's change sequence holds the
    /// copy before the note's new text, so no pull that stops between them shows the line gone from every note.
    static func fetchAll(_ db: Database) throws -> [OutboxEntry] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT o.note_id, o.edit_id, o.text, o.deleted, o.base_version, o.base_text, o.server_id, o.revision,
                    n.client_id, n.origin
                    FROM outbox o JOIN notes n ON n.id = o.note_id
                    ORDER BY n.is_conflict DESC, o.edit_id
                    """))
        var entries: [OutboxEntry] = []
        while let row = try rows.next() {
            entries.append(
                OutboxEntry(
                    noteID: row[0], editID: try FlakeID(stored: row[1]), text: row[2], deleted: row[3],
                    baseVersion: row[4], baseText: row[5], serverID: try FlakeID(storedIfPresent: row[6]),
                    revision: row[7], clientID: try FlakeID(stored: row[8]), origin: try FlakeID(stored: row[9])))
        }
        return entries
    }
}
