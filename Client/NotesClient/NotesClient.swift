import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import SQLiteSupport
import Synchronization

/// The FlakeNotes client: a local note store that works offline, and the engine that syncs it with a server.
///
/// Open one with ``open(home:environment:)`` (a data directory) or ``inMemory(environment:)`` (tests, the
/// simulation). Local commands (``add(_:)``, ``edit(_:text:)``, ``delete(_:)``, the reads) never touch the
/// network and are each one transaction. ``sync(progress:)`` pushes local changes, then pulls the server's.
///
/// A `NotesClient` is `Sendable`: its only mutable state is the database (plus the ID generator and the random
/// generator, each behind a lock), so it can be shared by tasks. The sync engine itself runs no concurrent work:
/// given the same transport answers, clock and random generator, it does the same thing.
public final class NotesClient: Sendable {
    let store: LocalStore
    let environment: NotesEnvironment
    let minter: IDMinter
    let random: Mutex<any RandomNumberGenerator & Sendable>

    /// This installation's origin: a random positive 63-bit ID minted once, sent with every note it creates.
    public let origin: FlakeID
    /// This installation's MiniFlake instance number, chosen once at random in `0..<1024`.
    public let flakeInstance: Int
    /// The data directory, or nil for an in-memory client.
    public let home: URL?

    private init(store: LocalStore, environment: NotesEnvironment, home: URL?) throws(NotesError) {
        self.store = store
        self.environment = environment
        self.home = home
        var random = environment.random
        let settings = try mapErrors {
            // Read first: only the very first open of an installation needs a write.
            if let settings = try store.writer.read({ db in try Settings.fetch(db) }) { return settings }
            return try store.writer.write { db -> Settings in
                if let settings = try Settings.fetch(db) { return settings }
                let origin = Int64.random(in: 1...Int64.max, using: &random)
                let randomInstance = Int.random(in: 0...FlakeID.maxInstance, using: &random)
                let instance = environment.flakeInstance ?? randomInstance
                guard (0...FlakeID.maxInstance).contains(instance) else {
                    throw NotesError(.invalidInput, "A flake instance is in 0...\(FlakeID.maxInstance), not \(instance).")
                }
                try db.execute(
                    sql: "INSERT INTO settings (id, origin, flake_instance) VALUES (1, ?, ?)", arguments: [origin, instance])
                return try Settings.fetch(db)!
            }
        }
        self.random = Mutex(random)
        origin = settings.origin
        flakeInstance = settings.flakeInstance
        do {
            minter = try IDMinter(instance: settings.flakeInstance, clock: environment.clock, after: settings.highWaterMark)
        } catch {
            throw NotesError(.storage, "The stored flake instance is invalid: \(error.description)")
        }
    }

    // MARK: - Opening

    /// The data directory: `$NOTES_HOME`, else `$XDG_DATA_HOME/notes`, else `~/.local/share/notes`.
    public static func defaultHome(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = environment["NOTES_HOME"], !home.isEmpty {
            return URL(fileURLWithPath: home, isDirectory: true)
        }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return URL(fileURLWithPath: data, isDirectory: true).appendingPathComponent("notes", isDirectory: true)
        }
        let user = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: user, isDirectory: true)
            .appendingPathComponent(".local/share/notes", isDirectory: true)
    }

    /// Opens the store in `home`, creating the directory (mode 0700) and the database on first use, and migrating
    /// an older schema.
    ///
    /// - Throws: `data_directory` when the directory cannot be created, read or written (or is a file);
    ///   `storage` when the database file is not a notes database or is corrupt.
    public static func open(home: URL, environment: NotesEnvironment = .live) throws(NotesError) -> NotesClient {
        let path = home.path
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw NotesError(.dataDirectory, "The notes data directory \(path) is not a directory.")
            }
        } else {
            do {
                try fileManager.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw NotesError(
                    .dataDirectory, "Cannot create the notes data directory \(path).",
                    cause: (error as NSError).localizedFailureReason ?? error.localizedDescription)
            }
        }
        guard access(path, R_OK | W_OK | X_OK) == 0 else {
            throw NotesError(
                .dataDirectory, "Cannot use the notes data directory \(path): \(String(cString: strerror(errno))).")
        }
        let store: LocalStore
        do {
            store = try LocalStore.open(directory: home)
        } catch let error as DatabaseError {
            let file = home.appendingPathComponent(LocalStore.fileName).path
            switch error.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CORRUPT:
                throw NotesError(.storage, "\(file) is not a notes database (or is corrupt).", cause: error.message)
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_AUTH, .SQLITE_IOERR:
                throw NotesError(.dataDirectory, "Cannot open \(file).", cause: error.message ?? error.description)
            default:
                throw NotesError(.storage, "Cannot open \(file).", cause: error.message ?? error.description)
            }
        } catch {
            throw NotesError.storage(error)
        }
        return try NotesClient(store: store, environment: environment, home: home)
    }

    /// A client whose database lives in memory only (tests, the simulation).
    public static func inMemory(environment: NotesEnvironment) throws(NotesError) -> NotesClient {
        let store = try mapErrors { try LocalStore.inMemory() }
        return try NotesClient(store: store, environment: environment, home: nil)
    }

    var now: Int64 { environment.clock.unixMilliseconds() }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`: another `notes` process waits for the lock).
    func write<T>(_ body: (Database) throws -> T) throws(NotesError) -> T {
        try mapErrors { try store.writer.immediateTransaction(body) }
    }

    /// Runs `body` in a deferred transaction: a consistent snapshot that takes no write lock (another `notes`
    /// process may be syncing). See `DatabaseWriter.deferredTransaction` for why not GRDB's `read`.
    func read<T>(_ body: (Database) throws -> T) throws(NotesError) -> T {
        try mapErrors { try store.writer.deferredTransaction(body) }
    }

    // MARK: - Local commands

    /// Creates a note with a new client ID. Works offline; the note syncs at the next ``sync(progress:)``.
    ///
    /// - Throws: `empty_note` when `text` is empty or only whitespace.
    @discardableResult
    public func add(_ text: String) throws(NotesError) -> LocalNote {
        try Self.requireContent(text)
        let now = now
        return try write { db in
            let clientID = try minter.mint(in: db)
            try db.execute(
                sql: """
                    INSERT INTO notes (client_id, origin, text, deleted, base_text, revision, dirty, created_at, updated_at)
                    VALUES (?, ?, ?, 0, NULL, 1, 1, ?, ?)
                    """,
                arguments: [clientID.rawValue, origin.rawValue, text, now, now])
            return LocalNote(
                id: db.lastInsertedRowID, clientID: clientID, origin: origin, serverID: nil, serverVersion: nil,
                text: text, isDeleted: false, baseText: nil, revision: 1, isDirty: true, isConflict: false,
                conflictOf: nil, pushError: nil, createdAt: now, updatedAt: now)
        }
    }

    /// Replaces a note's text. Editing a deleted note restores it. The same text again changes nothing.
    ///
    /// - Throws: `empty_note` for empty or whitespace-only text (delete the note instead), `note_not_found`.
    @discardableResult
    public func edit(_ id: LocalNote.ID, text: String) throws(NotesError) -> LocalNote {
        try Self.requireContent(text)
        let now = now
        return try write { db in
            let note = try Self.fetchNote(db, id: id)
            if note.text == text && !note.isDeleted { return note }
            try db.execute(
                sql: """
                    UPDATE notes SET text = ?, deleted = 0, revision = revision + 1, dirty = 1, push_error = NULL,
                    push_error_message = NULL, updated_at = ? WHERE id = ?
                    """,
                arguments: [text, now, id])
            return try Self.fetchNote(db, id: id)
        }
    }

    /// Deletes a note: it becomes a tombstone that syncs as a delete. A note never synced anywhere stays only as
    /// a local tombstone (shown by `list(includeDeleted: true)`) and is never pushed.
    ///
    /// - Throws: `note_not_found`.
    @discardableResult
    public func delete(_ id: LocalNote.ID) throws(NotesError) -> LocalNote {
        let now = now
        return try write { db in
            let note = try Self.fetchNote(db, id: id)
            if note.isDeleted { return note }
            let inFlight = try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM outbox WHERE note_id = ?)"), arguments: [id]) ?? false
            let neverSynced = note.baseText == nil && note.serverID == nil && !inFlight
            try db.execute(
                sql: """
                    UPDATE notes SET deleted = 1, revision = revision + 1, dirty = ?, push_error = NULL,
                    push_error_message = NULL, updated_at = ? WHERE id = ?
                    """,
                arguments: [!neverSynced, now, id])
            return try Self.fetchNote(db, id: id)
        }
    }

    static func requireContent(_ text: String) throws(NotesError) {
        if text.allSatisfy(\.isWhitespace) {
            throw NotesError(.emptyNote, "A note cannot be empty; to delete a note use `notes rm ID`.")
        }
    }

    static func fetchNote(_ db: Database, id: Int64) throws -> LocalNote {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT \(noteColumns) FROM notes WHERE id = ?"), arguments: [id]) else {
            throw NotesError(.noteNotFound, "No note has local ID \(id).")
        }
        return try LocalNote(row: row)
    }

    // MARK: - Reads

    /// One note by its local ID.
    public func note(_ id: LocalNote.ID) throws(NotesError) -> LocalNote {
        try read { db in try Self.fetchNote(db, id: id) }
    }

    /// Every note, newest change first; tombstones only when `includeDeleted`.
    public func notes(includeDeleted: Bool = false) throws(NotesError) -> [LocalNote] {
        try read { db in
            let filter = includeDeleted ? "" : "WHERE NOT deleted"
            return try Self.fetchNotes(db, sql: "SELECT \(noteColumns) FROM notes \(filter) ORDER BY updated_at DESC, id DESC")
        }
    }

    /// What a listing shows: every note newest change first (tombstones only when `includeDeleted`), with the
    /// display ID of each (unique among all local notes, tombstones included). One scan of the notes table that
    /// reads only the start of each text, so it stays fast with many long notes.
    public func listing(includeDeleted: Bool = false) throws(NotesError) -> Listing {
        try read { db in
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, client_id, origin, CASE WHEN deleted THEN NULL ELSE substr(text, 1, 400) END, deleted, dirty,
                    is_conflict, push_error, updated_at FROM notes
                    """)
            var keys: [(id: Int64, clientID: FlakeID, origin: FlakeID)] = []
            var summaries: [NoteSummary] = []
            while let row = try rows.next() {
                let key = (id: row[0] as Int64, clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]))
                keys.append(key)
                let deleted: Bool = row[4]
                guard includeDeleted || !deleted else { continue }
                let head: String? = row[3]
                summaries.append(
                    NoteSummary(
                        id: key.id, clientID: key.clientID, origin: key.origin, title: head.map(NoteSummary.title(of:)) ?? "",
                        isDeleted: deleted, isDirty: row[5], isConflict: row[6], pushErrorCode: row[7], updatedAt: row[8]))
            }
            summaries.sort { $0.updatedAt != $1.updatedAt ? $0.updatedAt > $1.updatedAt : $0.id > $1.id }
            return Listing(notes: summaries, displayIDs: ShortID.assign(keys))
        }
    }

    /// Every note including tombstones, in local ID order (for invariant checks).
    public func allNotes() throws(NotesError) -> [LocalNote] {
        try read { db in try Self.fetchNotes(db, sql: "SELECT \(noteColumns) FROM notes ORDER BY id") }
    }

    /// Every note's identity (tombstones included, in local ID order), the signed-in account and the pull cursor,
    /// read in one transaction and without the texts: what an invariant checker reads after every step.
    public func identities() throws(NotesError) -> NoteIdentities {
        try read { db in
            let settings = try Settings.fetch(db)
            let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT id, client_id, origin, server_id, deleted FROM notes ORDER BY id"))
            var notes: [NoteIdentity] = []
            while let row = try rows.next() {
                notes.append(
                    NoteIdentity(
                        id: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]),
                        serverID: try FlakeID(storedIfPresent: row[3]), isDeleted: row[4]))
            }
            return NoteIdentities(notes: notes, account: settings?.account, cursor: settings?.cursor)
        }
    }

    static func fetchNotes(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> [LocalNote] {
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        var notes: [LocalNote] = []
        while let row = try rows.next() { notes.append(try LocalNote(row: row)) }
        return notes
    }

    /// Live notes containing every word, case-insensitively, newest first. No words: every live note.
    public func search(_ words: [String]) throws(NotesError) -> [LocalNote] {
        let needles = words.flatMap { $0.split(whereSeparator: \.isWhitespace) }.map { $0.lowercased() }
        return try notes().filter { note in
            let haystack = note.text.lowercased()
            return needles.allSatisfy { haystack.contains($0) }
        }
    }

    /// Live conflict copies, newest first: each holds text that overlapped another device's edit of the note
    /// named by ``LocalNote/conflictOf``.
    public func conflicts() throws(NotesError) -> [LocalNote] {
        try read { db in
            try Self.fetchNotes(
                db, sql: "SELECT \(noteColumns) FROM notes WHERE is_conflict AND NOT deleted ORDER BY updated_at DESC, id DESC")
        }
    }

    /// The local note that has `serverID` in the signed-in account, if any.
    public func note(serverID: FlakeID) throws(NotesError) -> LocalNote? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(noteColumns) FROM notes WHERE server_id = ?"), arguments: [serverID.rawValue])
                .map(LocalNote.init(row:))
        }
    }

    /// The note a person named by an ID prefix (case-insensitive base32, optionally `-ORIG` after a full colliding
    /// ID; or a full decimal ID). Deleted notes count too.
    ///
    /// - Throws: `invalid_id` (not an ID), `note_not_found`, `ambiguous_id` (the message lists the candidates).
    public func note(byPrefix text: String) throws(NotesError) -> LocalNote {
        guard let prefix = ShortID.Prefix(text) else {
            throw NotesError(
                .invalidID, "'\(text)' is not a note ID: IDs are base32 (digits and letters except I, L, O, U).")
        }
        let candidates: [LocalNote] = try read { db in
            guard let range = prefix.range else { return [] }
            return try Self.fetchNotes(
                db, sql: "SELECT \(noteColumns) FROM notes WHERE client_id BETWEEN ? AND ? ORDER BY client_id, origin LIMIT 64",
                arguments: [range.lowerBound, range.upperBound]
            ).filter { prefix.matches(origin: $0.origin) }
        }
        switch candidates.count {
        case 0:
            throw NotesError(.noteNotFound, "No note has an ID starting with '\(text)'.")
        case 1:
            return candidates[0]
        default:
            let shown = try candidates.prefix(5).map { note throws(NotesError) in try displayID(of: note) }
            let more = candidates.count > 5 ? ", ..." : ""
            throw NotesError(
                .ambiguousID,
                "'\(text)' matches \(candidates.count) notes (\(shown.joined(separator: ", "))\(more)); type more of the ID.")
        }
    }

    /// The short ID people see for every local note (see ``ShortID``), keyed by local ID.
    public func displayIDs() throws(NotesError) -> [LocalNote.ID: String] {
        let keys = try read { db in
            let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT id, client_id, origin FROM notes ORDER BY client_id"))
            var keys: [(id: Int64, clientID: FlakeID, origin: FlakeID)] = []
            while let row = try rows.next() {
                keys.append((id: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2])))
            }
            return keys
        }
        return ShortID.assign(keys)
    }

    /// The short ID people see for one note (see ``ShortID``).
    public func displayID(of note: LocalNote) throws(NotesError) -> String {
        try read { db in
            let raw = note.clientID.rawValue
            let before = try Int64.fetchOne(
                db, sql: "SELECT client_id FROM notes WHERE client_id < ? ORDER BY client_id DESC LIMIT 1", arguments: [raw])
            let after = try Int64.fetchOne(
                db, sql: "SELECT client_id FROM notes WHERE client_id > ? ORDER BY client_id LIMIT 1", arguments: [raw])
            let twins = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE client_id = ?"), arguments: [raw]) ?? 1
            var shared = 0
            for neighbour in [before, after].compactMap({ $0 }) {
                shared = max(shared, ShortID.commonPrefix(note.clientID, try FlakeID(stored: neighbour)))
            }
            return ShortID.display(note.clientID, shared: shared, collides: twins > 1, origin: note.origin)
        }
    }

    /// The local state in brief: account, cursor, counts.
    public func status() throws(NotesError) -> NotesStatus {
        try read { db in
            guard let settings = try Settings.fetch(db) else { throw NotesError(.storage, "The settings row is missing.") }
            let counts = try Row.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(NOT deleted), 0), COALESCE(SUM(deleted), 0), COALESCE(SUM(dirty), 0),
                    COALESCE(SUM(push_error IS NOT NULL), 0), COALESCE(SUM(is_conflict AND NOT deleted), 0) FROM notes
                    """)!
            let inFlight = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox")) ?? 0
            return NotesStatus(
                origin: settings.origin, flakeInstance: settings.flakeInstance, highWaterMark: settings.highWaterMark,
                serverURL: settings.serverURL, account: settings.account, cursor: settings.cursor,
                lastSyncAt: settings.lastSyncAt, notes: counts[0], deletedNotes: counts[1], pending: counts[2],
                failed: counts[3], conflicts: counts[4], inFlight: inFlight)
        }
    }

    /// The signed-in account, nil when signed out.
    public func account() throws(NotesError) -> AccountInfo? {
        try read { db in try Settings.fetch(db)?.account }
    }
}
