import Foundation
import GRDB
import GRDBSQLite
import MiniFlake
import NoteSyncProtocol
import SQLiteSupport
import Synchronization

/// The local SQLite database: owns the connection, the schema (``migrator``) and every query.
///
/// The rest of the client runs one transaction with ``read(_:)`` or ``write(_:)`` and calls the intention-named
/// methods of the ``Transaction`` it is handed; it never spells SQL. Only the files in `Store/` import GRDB:
/// `LocalStore+Schema` (migrations), `LocalStore+Rows` (row decoding), `LocalStore+Notes` (local commands and
/// reads), `LocalStore+Search` (search, listing pages, the trash), `LocalStore+Sync` (what the sync engine reads
/// and writes), `LocalStore+Owners` (owners and the notes on show). The planners' rules that statements run over
/// many notes at once are SQL conditions named after their rules, each spelled once in ``NoteFilter``.
///
/// Tables:
/// - `settings`: one row (`id = 1`): installation origin and flake instance, the flake high-water mark, the
///   remembered server URL, and the account state (account, token, cursor, last sync) forgotten at sign-out.
/// - `notes`: every local note, live or tombstone, with its owner (`owner_account_id`) and whether it is set aside
///   (`aside`: not on show, see `OwnerPlanner`); `(owner_account_id, client_id, origin)` unique, `server_id` unique.
/// - `outbox`: at most one in-flight push snapshot per note, re-sent unchanged (same edit ID) until answered.
/// - `known_accounts`: the accounts signed in to here (ID, username, server), for messages and copies.
/// - `note_tags`, `tag_counts`, `note_versions`: a note's tags by key, how many notes have each, its history cache
///   (migration `v-tags-flags-history`, ``NoteTags``).
struct LocalStore: Sendable {
    private let writer: any DatabaseWriter
    /// Counts the statements run, when asked (``NotesEnvironment/countsStoreActivity``).
    private let statements: StatementCounter?

    /// The database file inside a data directory.
    static let fileName = "notes.sqlite"
    /// The map of the file reads go through (256 MiB).
    static let mmapSize = 268_435_456
    /// Every commit waits for the disk (GRDB's default for a queue): what `notes add` acknowledged survives a power loss.
    static let synchronous = "FULL"

    /// Opens (creating when missing) the database file in `directory`, which must exist, and migrates it.
    ///
    /// - Throws: `storage` when the file is not a notes database or is corrupt (or fails otherwise);
    ///   `data_directory` when it cannot be opened, read or written.
    static func open(directory: URL, countingStatements: Bool = false) throws(NotesError) -> LocalStore {
        let file = directory.appendingPathComponent(fileName).path
        let counter = countingStatements ? StatementCounter() : nil
        do {
            var configuration = Configuration()
            configuration.journalMode = .wal
            configuration.busyMode = .timeout(10)
            configuration.label = "notes"
            configuration.prepareDatabase { db in
                // Reads map the file instead of copying it page by page: listings of many notes stay fast.
                try db.execute(sql: "PRAGMA mmap_size = \(Self.mmapSize)")
                counter?.install(on: db)
            }
            return try LocalStore(writer: DatabaseQueue(path: file, configuration: configuration), statements: counter)
        } catch let error as DatabaseError {
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
    }

    /// A database that lives in memory only (tests, the simulation).
    static func inMemory(countingStatements: Bool = false) throws(NotesError) -> LocalStore {
        try mapErrors {
            let counter = countingStatements ? StatementCounter() : nil
            var configuration = Configuration()
            configuration.label = "notes-memory"
            configuration.prepareDatabase { db in counter?.install(on: db) }
            return try LocalStore(writer: DatabaseQueue(configuration: configuration), statements: counter)
        }
    }

    private init(writer: any DatabaseWriter, statements: StatementCounter?) throws {
        self.writer = writer
        self.statements = statements
        try Self.migrator.migrate(writer)
    }

    /// What the store did since it was opened (nil unless it counts, ``NotesEnvironment/countsStoreActivity``):
    /// statements run (its own, and the nested ones of triggers and the search index), and pages written by its connection (SQLite's `SQLITE_DBSTATUS_CACHE_WRITE`: pages of 4 KiB
    /// written to the WAL).
    func activity() throws(NotesError) -> StoreActivity? {
        guard let statements else { return nil }
        let count = statements.statements.load(ordering: .relaxed)
        let nested = statements.nested.load(ordering: .relaxed)
        let pages = try mapErrors {
            try writer.unsafeReentrantRead { db in
                var current: Int32 = 0
                var highest: Int32 = 0
                sqlite3_db_status(db.sqliteConnection, SQLITE_DBSTATUS_CACHE_WRITE, &current, &highest, 0)
                return Int(current)
            }
        }
        return StoreActivity(statements: count, nestedStatements: nested, pagesWritten: pages)
    }

    /// Runs `body` in a deferred transaction: a consistent snapshot that takes no write lock (another `notes`
    /// process may be syncing). Why this and not GRDB's `read`: see `DatabaseWriter.deferredTransaction`
    /// (SQLiteSupport).
    ///
    /// - Throws: what `body` throws when it is a ``NotesError``; any other failure as `storage`.
    func read<T>(_ body: (Transaction) throws -> T) throws(NotesError) -> T {
        try mapErrors { try writer.deferredTransaction { db in try body(Transaction(db: db)) } }
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`: another `notes` process waits for the lock), and
    /// commits it, or rolls it back when `body` throws.
    ///
    /// - Throws: what `body` throws when it is a ``NotesError``; any other failure as `storage`.
    func write<T>(_ body: (Transaction) throws -> T) throws(NotesError) -> T {
        try mapErrors {
            try writer.immediateTransaction { db in
                let tx = Transaction(db: db)
                let result = try body(tx)
                try tx.flushTagCounts()
                return result
            }
        }
    }

    /// Runs `body` with the connection set for a pull's pages (``SyncEngine``'s pull): commits do not wait for the
    /// disk (`synchronous = NORMAL`: a power loss may undo the last pages, whose cursor is committed with them, and
    /// never corrupts; the next commit made with `FULL` makes them durable), and reads go through a page cache rather
    /// than the file's map, whose pages would count in the process's memory (a million-note sign-in reads indexes
    /// and search segments all over the file). The durability and the cache size come back after `body`, thrown or not;
    /// the map does not (below).
    func withBulkWrites<T>(_ body: () async throws(NotesError) -> T) async throws(NotesError) -> T {
        try mapErrors {
            try writer.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL; PRAGMA mmap_size = 0; PRAGMA cache_size = -16384")
            }
        }
        let result: Result<T, NotesError>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        try mapErrors {
            try writer.writeWithoutTransaction { db in
                // The map stays off for the rest of this connection: turned back on after a bulk pull, the next read
                // brought the whole file into this process's memory (measured at the end of a 100,000-note sign-in:
                // 113 MiB resident instead of 61; at 1,000,000 notes, 304 MiB). Reads copy pages through the cache.
                try db.execute(sql: "PRAGMA synchronous = \(Self.synchronous); PRAGMA cache_size = -2000")
            }
        }
        return try result.get()
    }

    /// The settings row; on the first open of an installation, creates it with the origin and flake instance
    /// `makeIdentity` returns (called at most once, inside the creating transaction; what it throws is thrown).
    func settings(creatingWith makeIdentity: () throws -> (origin: Int64, flakeInstance: Int)) throws(NotesError) -> Settings {
        try mapErrors {
            // Read first: only the very first open of an installation needs a write.
            if let settings = try writer.read({ db in try Settings.fetch(db) }) { return settings }
            return try writer.write { db -> Settings in
                if let settings = try Settings.fetch(db) { return settings }
                let identity = try makeIdentity()
                try db.execute(
                    sql: "INSERT INTO settings (id, origin, flake_instance) VALUES (1, ?, ?)",
                    arguments: [identity.origin, identity.flakeInstance])
                return try Settings.fetch(db)!
            }
        }
    }

    /// One transaction in progress, handed to the body of ``LocalStore/read(_:)`` or ``LocalStore/write(_:)``.
    /// Its methods (in the `LocalStore+...` files) are every query the client runs. Do not keep it past the body.
    struct Transaction {
        /// The connection, inside the transaction. Only the files in `Store/` use it (the others do not import
        /// GRDB, so they cannot).
        let db: Database
        /// What the transaction's tag changes add to `tag_counts`, written once before it commits (``NoteTags``).
        let tagCountChanges = TagCountChanges()
    }
}

extension LocalStore.Transaction {
    /// The settings row (nil only before the installation's first open completed).
    func settings() throws -> Settings? {
        try Settings.fetch(db)
    }

    /// The settings row, which every opened store has.
    ///
    /// - Throws: `storage` when it is missing.
    func requireSettings() throws -> Settings {
        guard let settings = try Settings.fetch(db) else { throw NotesError(.storage, "The settings row is missing.") }
        return settings
    }

    /// `count` new IDs from `minter`, in increasing order; persists the new high-water mark in this transaction,
    /// so the mark is durable exactly when what uses the IDs is. Reads the stored mark first: another process on
    /// the same data directory may have minted past this one's generator.
    func mintIDs(_ count: Int, with minter: IDMinter) throws -> [FlakeID] {
        guard count > 0 else { return [] }
        let stored = try Int64.fetchOne(db.cachedStatement(sql: "SELECT flake_high_water FROM settings WHERE id = 1"))
        let ids = try minter.mint(count, after: stored)
        try db.cachedStatement(sql: "UPDATE settings SET flake_high_water = ? WHERE id = 1")
            .execute(arguments: [ids[ids.count - 1].rawValue])
        return ids
    }

    /// A new note's client ID, created at `createdAt` (Unix ms), minted with the minter's client-ID scheme.
    ///
    /// MiniFlake: one ID from ``mintIDs(_:with:)``. Another scheme: its value (a CDCounter's next, the creation
    /// time), raised to one above `client_id_high_water` when it is not above it, and persisted as the new mark in
    /// this transaction. So the installation never repeats a client ID, whatever the scheme repeats (a counter
    /// restarted in the same second, two notes in one millisecond, a clock set back), and the note's identity
    /// (client ID, origin) stays unique; the mark also outlives a wipe of the local notes.
    func mintClientID(with minter: IDMinter, createdAt: Int64) throws -> FlakeID {
        guard minter.clientIDScheme != .miniflake else { return try mintIDs(1, with: minter)[0] }
        let candidate = try minter.clientIDCandidate(createdAt: createdAt)
        let stored = try Int64.fetchOne(db.cachedStatement(sql: "SELECT client_id_high_water FROM settings WHERE id = 1"))
        var value = candidate
        if let stored, candidate <= stored {
            guard stored < Int64.max else {
                throw NotesError(.idGenerator, "Cannot mint a new note ID: the \(minter.clientIDScheme.rawValue) scheme's IDs are used up.")
            }
            value = stored + 1
        }
        try db.cachedStatement(sql: "UPDATE settings SET client_id_high_water = ? WHERE id = 1").execute(arguments: [value])
        return try FlakeID(validating: value)
    }
}
