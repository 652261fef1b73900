import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import SQLiteSupport
import Synchronization

/// The SQLite ``NoteStore`` (GRDB, the system's SQLite).
///
/// It owns one private database connection set, migrated on open:
/// - On disk it is a `DatabasePool` in WAL mode: one writer connection (every push, one transaction each, so pushes
///   are serialized) and concurrent readers for pulls, sign-in checks and token lookups.
/// - **Durability**: the writer runs with `PRAGMA synchronous = FULL`, so the WAL is synced to stable storage at
///   every commit: an acknowledged push survives `kill -9` and power loss (GRDB's WAL default, `NORMAL`, could lose
///   the last commits on power loss).
/// - `busy_timeout` is 5 s; foreign keys are on.
/// - Note texts are stored as UTF-8 BLOBs (a NUL character in a note would truncate a TEXT binding); the empty text
///   is stored as NULL.
///
/// A push reads the account's change sequence, loads the applied edits and notes the batch names with batched
/// `IN (...)` queries (chunks of at most 500, padded to a few fixed sizes so their statements stay cached), runs
/// ``PushPlanner``, writes the plan with cached prepared statements and updates the account's change sequence, all
/// in one transaction. Every query is scoped by account ID.
public final class SQLiteNoteStore: NoteStore {
    public let backendName = "sqlite"

    private let writer: any DatabaseWriter
    /// Whether this is the in-memory `DatabaseQueue` (tests, the simulation), which differs in two ways:
    /// - Reads run as deferred transactions on the writer: GRDB's read-only mode on a queue toggles
    ///   `PRAGMA query_only`, and SQLite expires every prepared statement of the connection after a flag pragma, so
    ///   each read would make every cached statement compile again. A pool reads on its own read-only connections.
    /// - Reads and writes run on the calling thread (GRDB's synchronous API) instead of hopping to the queue's
    ///   thread and back: with no file, a transaction is a few microseconds of CPU, less than the two thread
    ///   wake-ups of a hop, and nothing waits on I/O. The on-disk pool keeps the asynchronous API.
    private let inMemoryQueue: Bool
    /// Removed on close (temporary stores only).
    private let temporaryDirectory: URL?
    private let isClosed = Atomic<Bool>(false)

    /// The database file name inside a data directory.
    public static let fileName = "notesyncd.sqlite"

    private init(writer: any DatabaseWriter, temporaryDirectory: URL?) throws {
        self.writer = writer
        self.inMemoryQueue = writer is DatabaseQueue
        self.temporaryDirectory = temporaryDirectory
        try Self.migrator.migrate(writer)
    }

    /// Opens (creating if needed) the database at `path` as a WAL `DatabasePool` and migrates it.
    public convenience init(path: String) throws {
        try self.init(path: path, temporaryDirectory: nil)
    }

    /// Opens the store of a data directory (`<directory>/notesyncd.sqlite`), creating the directory if needed.
    public convenience init(dataDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        try self.init(path: (dataDirectory as NSString).appendingPathComponent(Self.fileName))
    }

    private convenience init(path: String, temporaryDirectory: URL?) throws {
        let pool = try DatabasePool(path: path, configuration: Self.configuration())
        // DatabasePool switches the writer to WAL with `synchronous = NORMAL`; durability needs FULL.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try self.init(writer: pool, temporaryDirectory: temporaryDirectory)
    }

    /// A store in a fresh temporary directory (a real WAL pool), removed on ``close()`` or when the store is released.
    /// For tests.
    public static func temporary() throws -> SQLiteNoteStore {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("notesyncd-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try SQLiteNoteStore(path: directory.appendingPathComponent(fileName).path, temporaryDirectory: directory)
    }

    /// A store in memory (one `DatabaseQueue` connection, no file, no durability). For tests and the simulation.
    public static func inMemory() throws -> SQLiteNoteStore {
        try SQLiteNoteStore(writer: DatabaseQueue(configuration: configuration()), temporaryDirectory: nil)
    }

    private static func configuration() -> Configuration {
        var configuration = Configuration()
        configuration.label = "notesyncd"
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        return configuration
    }

    /// The `PRAGMA synchronous` value of the writer connection (2 is FULL), for tests.
    public func synchronousMode() async throws -> Int {
        try await writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    // MARK: - Schema

    /// The schema's migrations. Never edit a shipped migration: add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE accounts (
                        id INTEGER PRIMARY KEY,
                        username TEXT NOT NULL UNIQUE,
                        password_hash TEXT NOT NULL,
                        change_seq INTEGER NOT NULL DEFAULT 0,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE sessions (
                        id INTEGER PRIMARY KEY,
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        token_hash TEXT NOT NULL UNIQUE,
                        device_name TEXT,
                        origin INTEGER,
                        created_at INTEGER NOT NULL
                    );
                    CREATE INDEX sessions_by_account ON sessions(account_id);
                    CREATE TABLE notes (
                        server_id INTEGER PRIMARY KEY,
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        client_id INTEGER NOT NULL,
                        origin INTEGER NOT NULL,
                        version INTEGER NOT NULL,
                        text BLOB,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        conflict_of INTEGER,
                        change_seq INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX notes_by_client_key ON notes(account_id, client_id, origin);
                    CREATE UNIQUE INDEX notes_by_change_seq ON notes(account_id, change_seq);
                    CREATE TABLE applied_edits (
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        edit_id INTEGER NOT NULL,
                        client_id INTEGER NOT NULL,
                        origin INTEGER NOT NULL,
                        pusher INTEGER NOT NULL, -- 0 when the pushing installation is unknown (a key column)
                        status TEXT NOT NULL,
                        server_id INTEGER,
                        version INTEGER,
                        conflict_server_id INTEGER,
                        conflict_client_id INTEGER,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (account_id, edit_id, client_id, origin, pusher)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v2: applied edits by age") { db in
            try db.execute(sql: "CREATE INDEX applied_edits_by_age ON applied_edits(created_at)")
        }
        return migrator
    }

    // MARK: - Access

    /// Runs a read, mapping closed/busy states to ``NoteStoreError``.
    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        do {
            guard inMemoryQueue else { return try await writer.read(body) }
            return try writer.deferredTransaction(body)  // on the calling thread (see `inMemoryQueue`)
        } catch {
            throw Self.mapped(error)
        }
    }

    /// Runs a write transaction, mapping closed/busy states to ``NoteStoreError``.
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        do {
            guard inMemoryQueue else { return try await writer.write(body) }
            return try writer.immediateTransaction(body)  // on the calling thread (see `inMemoryQueue`)
        } catch {
            throw Self.mapped(error)
        }
    }

    private static func mapped(_ error: any Error) -> any Error {
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return NoteStoreError.unavailable("the database is busy (\(error.resultCode))")
            case .SQLITE_MISUSE where error.message?.contains("closed") == true:
                return NoteStoreError.closed
            default:
                return error
            }
        }
        return error
    }

    // MARK: - Accounts and sessions

    public func createAccount(_ account: AccountRecord) async throws {
        try await write { db in
            do {
                try db.execute(
                    sql: "INSERT INTO accounts (id, username, password_hash, change_seq, created_at) VALUES (?, ?, ?, 0, ?)",
                    arguments: [account.id.rawValue, account.username, account.passwordHash, account.createdAt]
                )
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
                throw NoteStoreError.usernameTaken
            }
        }
    }

    public func account(byUsername username: String) async throws -> AccountRecord? {
        try await read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT id, username, password_hash, created_at FROM accounts WHERE username = ?"
            )
            return try Row.fetchOne(statement, arguments: [username]).map(Self.account(from:))
        }
    }

    public func account(byID id: FlakeID) async throws -> AccountRecord? {
        try await read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT id, username, password_hash, created_at FROM accounts WHERE id = ?"
            )
            return try Row.fetchOne(statement, arguments: [id.rawValue]).map(Self.account(from:))
        }
    }

    private static func account(from row: Row) throws -> AccountRecord {
        AccountRecord(id: try flake(row[0]), username: row[1], passwordHash: row[2], createdAt: row[3])
    }

    public func createSession(_ session: SessionRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO sessions (id, account_id, token_hash, device_name, origin, created_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    session.id.rawValue, session.accountID.rawValue, session.tokenHash, session.deviceName,
                    session.origin?.rawValue, session.createdAt,
                ]
            )
        }
    }

    public func session(byTokenHash tokenHash: String) async throws -> SessionRecord? {
        try await read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT id, account_id, token_hash, device_name, origin, created_at FROM sessions WHERE token_hash = ?"
            )
            guard let row = try Row.fetchOne(statement, arguments: [tokenHash]) else { return nil }
            let origin: Int64? = row[4]
            return SessionRecord(
                id: try flake(row[0]), accountID: try flake(row[1]), tokenHash: row[2], deviceName: row[3],
                origin: try origin.map(flake), createdAt: row[5]
            )
        }
    }

    public func deleteSession(id: FlakeID, accountID: FlakeID) async throws {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM sessions WHERE id = ? AND account_id = ?", arguments: [id.rawValue, accountID.rawValue]
            )
        }
    }

    // MARK: - Push

    public func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult] {
        try await write { db in
            let account = accountID.rawValue
            guard
                let sequence = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT change_seq FROM accounts WHERE id = ?"), arguments: [account]
                )
            else { throw NoteStoreError.accountNotFound }

            // Load: applied edits, then the notes named by the changes and those edits.
            var appliedEdits: [AppliedEdit] = []
            try Self.forEachChunk(PushPlanner.editIDs(of: changes).map(\.rawValue)) { chunk in
                let statement = try db.cachedStatement(
                    sql: """
                        SELECT edit_id, status, server_id, version, conflict_server_id, conflict_client_id, created_at,
                               client_id, origin, pusher
                        FROM applied_edits WHERE account_id = ? AND edit_id IN (\(Self.placeholders(chunk.count)))
                        """
                )
                let rows = try Row.fetchCursor(statement, arguments: StatementArguments([account] + chunk))
                while let row = try rows.next() { appliedEdits.append(try Self.appliedEdit(from: row)) }
            }
            let keys = PushPlanner.keysToLoad(changes: changes, appliedEdits: appliedEdits)
            var notes: [StoredNote] = []
            try Self.forEachChunk(keys.serverIDs.map(\.rawValue)) { chunk in
                let statement = try db.cachedStatement(
                    // `+account_id` keeps the planner on rowid lookups (never a scan of the account's change index).
                    sql: "SELECT \(Self.noteColumns) FROM notes WHERE +account_id = ? AND server_id IN (\(Self.placeholders(chunk.count)))"
                )
                try Self.fetchNotes(statement, StatementArguments([account] + chunk), into: &notes)
            }
            // By client ID; a rare extra note with the same client ID and another origin is ignored by the planner.
            var clientIDs: [Int64] = []
            var seenClientIDs = Set<Int64>()
            for key in keys.clientKeys where seenClientIDs.insert(key.clientID.rawValue).inserted {
                clientIDs.append(key.clientID.rawValue)
            }
            try Self.forEachChunk(clientIDs) { chunk in
                let statement = try db.cachedStatement(
                    sql: "SELECT \(Self.noteColumns) FROM notes WHERE account_id = ? AND client_id IN (\(Self.placeholders(chunk.count)))"
                )
                try Self.fetchNotes(statement, StatementArguments([account] + chunk), into: &notes)
            }

            let plan = try PushPlanner.plan(
                PushPlanner.Input(
                    accountID: accountID, changes: changes, notes: notes, appliedEdits: appliedEdits,
                    currentSequence: sequence, limits: context.limits, now: context.now, pusher: context.pusher
                ),
                mintID: context.mintID
            )

            // Write.
            if !plan.writes.isEmpty {
                let insert = try db.cachedStatement(
                    sql: """
                        INSERT INTO notes (server_id, account_id, client_id, origin, version, text, deleted, conflict_of,
                                           change_seq, created_at, updated_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """
                )
                let update = try db.cachedStatement(
                    sql: """
                        UPDATE notes SET version = ?, text = ?, deleted = ?, change_seq = ?, updated_at = ?
                        WHERE server_id = ? AND account_id = ?
                        """
                )
                // New change sequences are all above the account's current one, so the unique
                // (account_id, change_seq) index never sees a clash.
                for write in plan.writes {
                    let note = write.note
                    if write.isNew {
                        try insert.execute(arguments: [
                            note.serverID.rawValue, account, note.clientID.rawValue, note.origin.rawValue, note.version,
                            Self.textBlob(note.text), note.deleted, note.conflictOf?.rawValue, note.changeSeq,
                            note.createdAt, note.updatedAt,
                        ])
                    } else {
                        try update.execute(arguments: [
                            note.version, Self.textBlob(note.text), note.deleted, note.changeSeq, note.updatedAt,
                            note.serverID.rawValue, account,
                        ])
                    }
                }
                try db.cachedStatement(sql: "UPDATE accounts SET change_seq = ? WHERE id = ?")
                    .execute(arguments: [plan.newSequence, account])
            }
            if !plan.newEdits.isEmpty {
                let insertEdit = try db.cachedStatement(
                    sql: """
                        INSERT INTO applied_edits (account_id, edit_id, status, server_id, version, conflict_server_id,
                                                   conflict_client_id, created_at, client_id, origin, pusher)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """
                )
                for edit in plan.newEdits {
                    try insertEdit.execute(arguments: [
                        account, edit.editID.rawValue, edit.status.rawValue, edit.serverID?.rawValue, edit.version,
                        edit.conflict?.serverID.rawValue, edit.conflict?.clientID.rawValue, edit.createdAt,
                        edit.noteKey.clientID.rawValue, edit.noteKey.origin.rawValue, edit.pusher?.rawValue ?? 0,
                    ])
                }
            }
            return plan.results
        }
    }

    // MARK: - Pull

    public func pull(accountID: FlakeID, after sequence: Int64, limit: Int) async throws -> PullPage {
        try await read { db in
            let account = accountID.rawValue
            let current =
                try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT change_seq FROM accounts WHERE id = ?"), arguments: [account]
                ) ?? 0
            var notes: [StoredNote] = []
            if sequence < current, limit > 0 {
                notes.reserveCapacity(min(limit, Int(current - sequence)))
                let statement = try db.cachedStatement(
                    sql: "SELECT \(Self.noteColumns) FROM notes WHERE account_id = ? AND change_seq > ? ORDER BY change_seq LIMIT ?"
                )
                try Self.fetchNotes(statement, [account, sequence, limit], into: &notes)
            }
            return PullPage(notes: notes, currentSequence: current)
        }
    }

    public func currentChangeSequence(accountID: FlakeID) async throws -> Int64 {
        try await read { db in
            try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT change_seq FROM accounts WHERE id = ?"), arguments: [accountID.rawValue]
            ) ?? 0
        }
    }

    // MARK: - Operations

    public func largestIssuedID() async throws -> FlakeID? {
        try await read { db in
            let value = try Int64.fetchOne(
                db,
                sql: """
                    SELECT MAX(m) FROM (
                        SELECT MAX(id) AS m FROM accounts
                        UNION ALL SELECT MAX(id) FROM sessions
                        UNION ALL SELECT MAX(server_id) FROM notes
                    )
                    """
            )
            return try value.map(flake)
        }
    }

    public func pruneAppliedEdits(createdBefore cutoff: Int64) async throws -> Int {
        // Chunks of 5,000, each its own short write transaction, so pushes are never held up for long.
        var total = 0
        while true {
            let deleted = try await write { db in
                try db.execute(
                    sql: """
                        DELETE FROM applied_edits WHERE (account_id, edit_id, client_id, origin, pusher) IN (
                            SELECT account_id, edit_id, client_id, origin, pusher FROM applied_edits
                            WHERE created_at < ? LIMIT 5000)
                        """,
                    arguments: [cutoff]
                )
                return db.changesCount
            }
            total += deleted
            if deleted < 5000 { return total }
        }
    }

    public func ping() async throws {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    public func close() async throws {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try writer.close()
        if let temporaryDirectory {
            try? FileManager.default.removeItem(at: temporaryDirectory)
        }
    }

    /// A temporary store dropped without ``close()`` (a test that ended early) still removes its directory.
    deinit {
        if let temporaryDirectory, !isClosed.load(ordering: .acquiring) {
            try? writer.close()
            try? FileManager.default.removeItem(at: temporaryDirectory)
        }
    }

    // MARK: - Helpers

    private static let noteColumns =
        "server_id, account_id, client_id, origin, version, text, deleted, conflict_of, change_seq, created_at, updated_at"

    private static func fetchNotes(_ statement: Statement, _ arguments: StatementArguments, into notes: inout [StoredNote]) throws {
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        while let row = try rows.next() {
            let conflictOf: Int64? = row[7]
            notes.append(
                StoredNote(
                    accountID: try flake(row[1]), serverID: try flake(row[0]), clientID: try flake(row[2]),
                    origin: try flake(row[3]), version: row[4], text: try text(row, 5), deleted: row[6],
                    conflictOf: try conflictOf.map(flake), changeSeq: row[8], createdAt: row[9], updatedAt: row[10]
                )
            )
        }
    }

    /// Note texts are stored as UTF-8 BLOBs: binding a Swift string as TEXT stops at the first NUL character, which
    /// would silently truncate a note. The empty text is stored as NULL (an empty blob binds as NULL in SQLite).
    private static func textBlob(_ text: String) -> Data {
        Data(text.utf8)
    }

    private static func text(_ row: Row, _ index: Int) throws -> String {
        try row.withUnsafeData(atIndex: index) { data in data.map { String(decoding: $0, as: UTF8.self) } ?? "" }
    }

    private static func appliedEdit(from row: Row) throws -> AppliedEdit {
        let status: String = row[1]
        guard let status = ChangeStatus(rawValue: status) else {
            throw DatabaseError(message: "applied_edits.status holds an unknown status '\(status)'")
        }
        let serverID: Int64? = row[2]
        let conflictServerID: Int64? = row[4]
        let conflictClientID: Int64? = row[5]
        var conflict: ConflictCopy?
        if let conflictServerID, let conflictClientID {
            conflict = ConflictCopy(serverID: try flake(conflictServerID), clientID: try flake(conflictClientID))
        }
        return AppliedEdit(
            editID: try flake(row[0]), noteKey: NoteKey(clientID: try flake(row[7]), origin: try flake(row[8])),
            pusher: (row[9] as Int64) == 0 ? nil : try flake(row[9]),
            status: status, serverID: try serverID.map(flake), version: row[3],
            conflict: conflict, createdAt: row[6]
        )
    }

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

/// A stored ID back as a ``FlakeID`` (every stored ID is positive).
private func flake(_ value: Int64) throws -> FlakeID {
    try FlakeID(validating: value)
}
