import Foundation
import GRDB
import MiniFlake
import NoteCrypto
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
/// - In memory (tests) and in the simulation's file (``unsynced(path:)``: WAL, `synchronous = OFF`) it is one
///   `DatabaseQueue` connection used on the calling thread.
/// - `busy_timeout` is 5 s; foreign keys are on.
/// - Note texts are stored as UTF-8 BLOBs (a NUL character in a note would truncate a TEXT binding); the empty text
///   is stored as NULL (``SQLiteRows``).
///
/// A push is one write transaction running ``PushDriver`` over ``SQLitePushTransaction``. The schema is
/// ``migrator``. Every query is scoped by account ID.
public final class SQLiteNoteStore: NoteStore {
    public let backendName = "sqlite"

    let writer: any DatabaseWriter
    /// Whether this is a one-connection `DatabaseQueue` (in memory for tests, or the simulation's file,
    /// ``unsynced(path:)``), which differs from the pool in two ways:
    /// - Reads run as deferred transactions on the writer (see SQLiteSupport's `deferredTransaction` for why not
    ///   GRDB's `read`). A pool reads on its own read-only connections.
    /// - Reads and writes run on the calling thread (GRDB's synchronous API) instead of hopping to the queue's
    ///   thread and back: with nothing waiting on a disk, a transaction costs less CPU than the two thread wake-ups
    ///   of a hop. The daemon's pool keeps the asynchronous API.
    private let onCallingThread: Bool
    /// The database file's path; nil in memory.
    public let databasePath: String?
    /// Removed on close (temporary stores only).
    private let temporaryDirectory: URL?
    private let isClosed = Atomic<Bool>(false)
    /// Where the chunks' files live (``ChunkStore``): `chunks` beside the database file, or a temporary directory
    /// for a store in memory (removed on close).
    let chunkDirectory: URL

    /// The database file name inside a data directory.
    public static let fileName = "notesyncd.sqlite"
    /// The chunk directory's name inside a data directory.
    public static let chunkDirectoryName = "chunks"

    private init(writer: any DatabaseWriter, inMemory: Bool = false, temporaryDirectory: URL?, chunkDirectory: URL) throws {
        self.writer = writer
        self.onCallingThread = writer is DatabaseQueue
        self.databasePath = inMemory ? nil : writer.path
        self.temporaryDirectory = temporaryDirectory
        self.chunkDirectory = chunkDirectory
        try Self.migrator.migrate(writer)
    }

    /// Opens (creating if needed) the database at `path` as a WAL `DatabasePool` and migrates it; its chunks are in
    /// `chunkDirectory` (default: `chunks` beside the file).
    public convenience init(path: String, chunkDirectory: String? = nil) throws {
        try self.init(path: path, temporaryDirectory: nil, chunkDirectory: chunkDirectory)
    }

    /// Opens the store of a data directory (`<directory>/notesyncd.sqlite`), creating the directory if needed.
    public convenience init(dataDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        try self.init(path: (dataDirectory as NSString).appendingPathComponent(Self.fileName))
    }

    private convenience init(path: String, temporaryDirectory: URL?, chunkDirectory: String? = nil) throws {
        let pool = try DatabasePool(path: path, configuration: Self.configuration())
        // DatabasePool switches the writer to WAL with `synchronous = NORMAL`; durability needs FULL.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let chunks = chunkDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(Self.chunkDirectoryName, isDirectory: true)
        try self.init(writer: pool, temporaryDirectory: temporaryDirectory, chunkDirectory: chunks)
    }

    /// A store in a fresh temporary directory (a real WAL pool), removed on ``close()`` or when the store is released.
    /// For tests.
    public static func temporary() throws -> SQLiteNoteStore {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("notesyncd-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try SQLiteNoteStore(path: directory.appendingPathComponent(fileName).path, temporaryDirectory: directory)
    }

    /// A store in memory (one `DatabaseQueue` connection, no file, no durability). For tests.
    public static func inMemory() throws -> SQLiteNoteStore {
        // Its chunks still need files: a temporary directory, made on the first chunk and removed on close.
        let chunks = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-chunks-\(UUID().uuidString)", isDirectory: true)
        return try SQLiteNoteStore(
            writer: DatabaseQueue(configuration: configuration()), inMemory: true, temporaryDirectory: chunks, chunkDirectory: chunks)
    }

    /// A store in the file at `path` (created if needed; its chunks in `chunks` beside it) that is **not durable**: one
    /// connection in WAL mode, reads and writes on the calling thread, `synchronous = OFF` (a commit returns
    /// before anything is flushed: the operating system's crash or a power loss may lose or corrupt it; the
    /// process's own crash does not). For the simulation (notes-sim), whose server must keep a store as a daemon's
    /// files (the database, its WAL and `-shm`, the chunks: what the canary scan reads) but never loses power
    /// and never reopens the store (its restarts keep it open); the daemon uses ``init(path:chunkDirectory:)``.
    /// The files hold the same bytes as a daemon's would after the same requests: what differs is when they reach
    /// the disk.
    public static func unsynced(path: String) throws -> SQLiteNoteStore {
        var configuration = configuration()
        configuration.journalMode = .wal
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = OFF") }
        let chunks = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(chunkDirectoryName, isDirectory: true)
        return try SQLiteNoteStore(writer: queue, temporaryDirectory: nil, chunkDirectory: chunks)
    }

    private static func configuration() -> Configuration {
        var configuration = Configuration()
        configuration.label = "notesyncd"
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Deleted and overwritten content is zeroed in the file, not left in free space: a converted account's
            // old plaintext (and a deleted account's notes) must not stay readable in the database file.
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        return configuration
    }

    /// The connections, for the online backup (``backup(to:)``).
    var databaseReader: any DatabaseReader { writer }

    /// A number that moves when another process commits to the database file, nil in memory (no other process can
    /// reach it): SQLite's `PRAGMA data_version` on the writer connection, which this store's own commits never move
    /// (they are that connection's). The operator's commands (`notesyncd sessions`, `users`) are such processes; a
    /// moved number tells the daemon they may have ended sessions (``ExternalCommitWatch``). One statement on the
    /// writer's queue, so it waits behind a push in progress.
    public func externalCommitVersion() async throws -> Int64? {
        guard databasePath != nil else { return nil }
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        do {
            return try await writer.writeWithoutTransaction { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
        } catch {
            throw Self.mapped(error)
        }
    }

    /// The `PRAGMA synchronous` value of the writer connection (2 is FULL), for tests.
    public func synchronousMode() async throws -> Int {
        try await writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    // MARK: - Access

    /// Runs a read, mapping closed/busy states to ``NoteStoreError``.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        do {
            guard onCallingThread else { return try await writer.read(body) }
            return try writer.deferredTransaction(body)  // on the calling thread (see `onCallingThread`)
        } catch {
            throw Self.mapped(error)
        }
    }

    /// Runs a write transaction, mapping closed/busy states to ``NoteStoreError``.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        do {
            guard onCallingThread else { return try await writer.write(body) }
            return try writer.immediateTransaction(body)  // on the calling thread (see `onCallingThread`)
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
        try await write { db in try Self.insertAccount(account, db) }
    }

    /// Inserts `account` (its change sequence starts at 0) in the caller's transaction.
    ///
    /// - Throws: ``NoteStoreError/usernameTaken`` when another account has the username.
    static func insertAccount(_ account: AccountRecord, _ db: Database) throws {
        do {
            try db.execute(
                sql: """
                    INSERT INTO accounts (id, username, password_hash, change_seq, created_at, encryption, key_generation)
                    VALUES (?, ?, ?, 0, ?, ?, ?)
                    """,
                arguments: [
                    account.id.rawValue, account.username, account.passwordHash, account.createdAt, account.encryption.rawValue,
                    account.keyGeneration,
                ]
            )
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw NoteStoreError.usernameTaken
        }
        if let keys = account.keys { try insertKeys(keys, accountID: account.id, db) }
    }

    public func account(byUsername username: String) async throws -> AccountRecord? {
        try await read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT \(Self.accountColumns) FROM accounts WHERE username = ?"
            )
            return try Row.fetchOne(statement, arguments: [username]).map(Self.account(from:))
        }
    }

    public func account(byID id: FlakeID) async throws -> AccountRecord? {
        try await read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT \(Self.accountColumns) FROM accounts WHERE id = ?"
            )
            return try Row.fetchOne(statement, arguments: [id.rawValue]).map(Self.account(from:))
        }
    }

    private static let accountColumns = "id, username, password_hash, created_at, disabled_at, encryption, key_generation"

    private static func account(from row: Row) throws -> AccountRecord {
        let state: String = row[5]
        guard let encryption = EncryptionState(rawValue: state) else {
            throw DatabaseError(message: "accounts.encryption holds an unknown state '\(state)'")
        }
        return AccountRecord(
            id: try flake(row[0]), username: row[1], passwordHash: row[2], createdAt: row[3], disabledAt: row[4],
            encryption: encryption, keyGeneration: row[6])
    }

    public func createSession(_ session: SessionRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO sessions (id, account_id, token_hash, device_name, origin, created_at, device_public_key)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    session.id.rawValue, session.accountID.rawValue, session.tokenHash, session.deviceName,
                    session.origin?.rawValue, session.createdAt, session.devicePublicKey.map { Data($0.bytes) },
                ]
            )
        }
    }

    public func session(byTokenHash tokenHash: String) async throws -> SessionRecord? {
        try await read { db in
            // A disabled account's sessions do not authenticate (disabling also deletes them; this covers a sign-in
            // that raced with it).
            let statement = try db.cachedStatement(
                sql: """
                    SELECT \(Self.sessionColumns) FROM sessions
                    WHERE token_hash = ? AND account_id IN (SELECT id FROM accounts WHERE disabled_at IS NULL)
                    """)
            return try Row.fetchOne(statement, arguments: [tokenHash]).map(Self.session(from:))
        }
    }

    private static let sessionColumns = "id, account_id, token_hash, device_name, origin, created_at, last_seen_at, device_public_key"

    private static func session(from row: Row) throws -> SessionRecord {
        let origin: Int64? = row[4]
        let publicKey: Data? = row[7]
        return SessionRecord(
            id: try flake(row[0]), accountID: try flake(row[1]), tokenHash: row[2], deviceName: row[3],
            origin: try origin.map(flake), createdAt: row[5], lastSeenAt: row[6],
            devicePublicKey: try publicKey.map { try DevicePublicKey(bytes: Array($0)) }
        )
    }

    @discardableResult
    public func deleteSession(id: FlakeID, accountID: FlakeID) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM sessions WHERE id = ? AND account_id = ?", arguments: [id.rawValue, accountID.rawValue]
            )
            return db.changesCount > 0
        }
    }

    public func sessions(accountID: FlakeID, limit: Int) async throws -> [SessionRecord] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.sessionColumns) FROM sessions WHERE account_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
                arguments: [accountID.rawValue, max(limit, 0)]
            ).map(Self.session(from:))
        }
    }

    @discardableResult
    public func deleteSessions(accountID: FlakeID, except: FlakeID?) async throws -> Int {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM sessions WHERE account_id = ? AND id IS NOT ?", arguments: [accountID.rawValue, except?.rawValue]
            )
            return db.changesCount
        }
    }

    public func markSessionSeen(id: FlakeID, accountID: FlakeID, at time: Int64, ifBefore: Int64) async throws {
        try await write { db in
            try db.cachedStatement(
                sql: "UPDATE sessions SET last_seen_at = ? WHERE id = ? AND account_id = ? AND (last_seen_at IS NULL OR last_seen_at < ?)"
            ).execute(arguments: [time, id.rawValue, accountID.rawValue, ifBefore])
        }
    }

    @discardableResult
    public func changePassword(accountID: FlakeID, passwordHash: String, keepingSession: FlakeID?) async throws -> Int {
        try await write { db in
            try db.execute(sql: "UPDATE accounts SET password_hash = ? WHERE id = ?", arguments: [passwordHash, accountID.rawValue])
            guard db.changesCount > 0 else { throw NoteStoreError.accountNotFound }
            try db.execute(
                sql: "DELETE FROM sessions WHERE account_id = ? AND id IS NOT ?",
                arguments: [accountID.rawValue, keepingSession?.rawValue]
            )
            return db.changesCount
        }
    }

    @discardableResult
    public func deleteAccount(id: FlakeID) async throws -> Bool {
        // One write transaction: pushes (which take the same writer) run wholly before or after it.
        let deleted = try await write { db in
            let account = id.rawValue
            try db.execute(sql: "DELETE FROM applied_edits WHERE account_id = ?", arguments: [account])
            try db.execute(sql: "DELETE FROM note_versions WHERE account_id = ?", arguments: [account])
            try db.execute(sql: "DELETE FROM notes WHERE account_id = ?", arguments: [account])
            try db.execute(sql: "DELETE FROM sessions WHERE account_id = ?", arguments: [account])
            try db.execute(sql: "DELETE FROM accounts WHERE id = ?", arguments: [account])
            return db.changesCount > 0  // its chunks' rows go with it (ON DELETE CASCADE)
        }
        removeChunkFiles(accountID: id)
        return deleted
    }

    public func usage(accountID: FlakeID) async throws -> AccountUsage? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT note_count, text_bytes, replay_text_bytes, history_bytes, chunk_bytes FROM accounts WHERE id = ?"),
                arguments: [accountID.rawValue]
            ).map {
                AccountUsage(noteCount: $0[0], textBytes: $0[1], replayTextBytes: $0[2], historyBytes: $0[3], chunkBytes: $0[4])
            }
        }
    }

    // MARK: - Push

    public func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult] {
        let pushed = try await write { db in
            try PushDriver.push(SQLitePushTransaction(db: db), accountID: accountID, changes: changes, context: context)
        }
        if pushed.convertedAccount { await truncateWriteAheadLog() }
        return pushed.results
    }

    // MARK: - Pull

    public func pull(accountID: FlakeID, after sequence: Int64, limit: Int, maxBytes: Int) async throws -> PullPage {
        try await read { db in
            let account = accountID.rawValue
            let totals = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT change_seq, note_count FROM accounts WHERE id = ?"), arguments: [account])
            let current: Int64 = totals?[0] ?? 0
            var notes: [StoredNote] = []
            var cutByBytes = false
            if sequence < current, limit > 0 {
                notes.reserveCapacity(min(limit, Int(current - sequence)))
                let statement = try db.cachedStatement(
                    sql: "SELECT \(SQLiteRows.noteColumns) FROM notes WHERE account_id = ? AND change_seq > ? ORDER BY change_seq LIMIT ?"
                )
                cutByBytes = try SQLiteRows.fetchNotes(statement, [account, sequence, limit], into: &notes, maxBytes: maxBytes)
            }
            return PullPage(notes: notes, currentSequence: current, noteCount: totals?[1] ?? 0, cutByBytes: cutByBytes)
        }
    }

    // MARK: - History

    public func versions(accountID: FlakeID, query: HistoryPlanner.Query) async throws -> VersionPage? {
        try await read { db in
            let account = accountID.rawValue
            let note = query.serverID.rawValue
            guard
                try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT 1 FROM notes WHERE server_id = ? AND account_id = ?"), arguments: [note, account]) != nil
            else { return nil }
            // The sizes first (SQLite reads a blob's length from its header), then the page's rows.
            let sizes = try Int.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT LENGTH(text) FROM note_versions WHERE account_id = ? AND server_id = ? AND version > ?
                        ORDER BY version LIMIT ?
                        """),
                arguments: [account, note, query.after, query.pageSize + 1])
            let (count, hasMore) = HistoryPlanner.pageLength(sizes: sizes, query: query)
            var versions: [StoredVersion] = []
            versions.reserveCapacity(count)
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT \(SQLiteRows.versionColumns) FROM note_versions
                        WHERE account_id = ? AND server_id = ? AND version > ? ORDER BY version LIMIT ?
                        """),
                arguments: [account, note, query.after, count])
            while let row = try rows.next() { versions.append(try SQLiteRows.version(row)) }
            return VersionPage(versions: versions, hasMore: hasMore)
        }
    }

    public func pruneHistory(savedBefore cutoff: Int64) async throws -> Int {
        // A version with a later one of its note is never the note's newest.
        try await pruneInChunks(
            delete: """
                DELETE FROM note_versions WHERE rowid IN (
                    SELECT v.rowid FROM note_versions v
                    WHERE v.saved_at < ? AND EXISTS (
                        SELECT 1 FROM note_versions w
                        WHERE w.account_id = v.account_id AND w.server_id = v.server_id AND w.version > v.version)
                    LIMIT \(Self.pruneChunk))
                RETURNING account_id, LENGTH(text)
                """,
            cutoff: cutoff, total: "history_bytes")
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
        try await pruneInChunks(
            delete: """
                DELETE FROM applied_edits WHERE (account_id, edit_id, client_id, origin, pusher) IN (
                    SELECT account_id, edit_id, client_id, origin, pusher FROM applied_edits
                    WHERE created_at < ? LIMIT \(Self.pruneChunk))
                RETURNING account_id, COALESCE(LENGTH(CAST(text AS BLOB)), 0)
                """,
            cutoff: cutoff, total: "replay_text_bytes")
    }

    /// Rows a prune deletes per transaction.
    private static let pruneChunk = 5000

    /// Prunes in chunks of ``pruneChunk`` rows, each its own short write transaction, so pushes are never held up for
    /// long, until a chunk deletes fewer; answers how many rows it deleted. `delete` deletes one chunk of the rows
    /// older than `cutoff` (its one parameter) and returns each deleted row's account and text bytes, which are given
    /// back to the account's running total `total` (a column of `accounts`) in the same transaction.
    private func pruneInChunks(delete: String, cutoff: Int64, total column: String) async throws -> Int {
        var total = 0
        while true {
            let deleted = try await write { db in
                var freed: [Int64: Int64] = [:]
                var count = 0
                let rows = try Row.fetchCursor(db.cachedStatement(sql: delete), arguments: [cutoff])
                while let row = try rows.next() {
                    count += 1
                    let bytes: Int64 = row[1]
                    if bytes > 0 { freed[row[0], default: 0] += bytes }
                }
                let giveBack = try db.cachedStatement(sql: "UPDATE accounts SET \(column) = \(column) - ? WHERE id = ?")
                for (account, bytes) in freed { try giveBack.execute(arguments: [bytes, account]) }
                return count
            }
            total += deleted
            if deleted < Self.pruneChunk { return total }
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
}
