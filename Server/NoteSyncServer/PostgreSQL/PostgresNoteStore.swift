import Foundation
import Logging
import MiniFlake
import NoteCrypto
import NIOCore
import NoteSyncProtocol
import PostgresNIO
import Synchronization

/// The PostgreSQL ``NoteStore`` (postgres-nio), for several daemons sharing one database.
///
/// The store runs its statements on a ``PostgresDatabase`` (the daemon's pool, shared with its ``InstanceLease``).
/// The database must be migrated (``PostgresDatabase/migrate()``) before the store is used; the daemon does it before
/// the HTTP server starts, and ``connect(_:logger:)`` (tests and tools) does it on open.
///
/// Correct under concurrency across daemons:
/// - **Pushes of one account are serialized** by `SELECT ... FOR UPDATE` on the account row, the first statement of
///   every push transaction (READ COMMITTED: every later statement sees what the previous holder committed).
///   Reconciliation by `(account, client ID)` therefore never races, and a retry landing on another daemon finds
///   the applied edit the first one committed.
/// - **Change sequences are monotonic in commit order**: a push takes its numbers above the account's sequence
///   while holding the row lock and commits before releasing it, so a push that commits later never has smaller
///   numbers; a rolled-back push takes none (no gaps either).
/// - **A pull is one statement** (the account's sequence joined with its notes), so it reads one snapshot.
/// - Every statement is scoped by account ID. Note texts are `bytea` (PostgreSQL `text` cannot hold NUL, which a
///   note may contain). Pushes write with a few set-based statements (`unnest` of arrays), never a query per note
///   (``PostgresPushTransaction``, run by ``PushDriver``).
/// - Durability: each push is one transaction committed with PostgreSQL's default `synchronous_commit = on`.
public final class PostgresNoteStore: NoteStore {
    public let backendName = "postgres"

    /// Where the store runs its statements.
    public let database: PostgresDatabase
    var logger: Logger { database.logger }
    private let isClosed = Atomic<Bool>(false)

    /// A store over a migrated database.
    public init(database: PostgresDatabase) {
        self.database = database
    }

    /// Opens a store over a database that runs its own pool, migrated and ready. For tests and tools; ``close()``
    /// stops the pool.
    public static func connect(_ configuration: PostgresClient.Configuration, logger: Logger) async throws -> PostgresNoteStore {
        let database = PostgresDatabase.connect(configuration, logger: logger)
        do {
            try await database.migrate()
        } catch {
            await database.close()
            throw error
        }
        return PostgresNoteStore(database: database)
    }

    // MARK: - Access

    /// Runs `body` on the pool (see ``PostgresDatabase/run(_:)``); throws ``NoteStoreError/closed`` once the store is
    /// closed.
    func run<T: Sendable>(_ body: (PostgresClient) async throws -> T) async throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        return try await database.run(body)
    }

    /// Runs `body` in one transaction (see ``PostgresDatabase/transaction(_:)``); throws ``NoteStoreError/closed``
    /// once the store is closed.
    func transaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        return try await database.transaction(body)
    }


    // MARK: - Accounts and sessions

    public func createAccount(_ account: AccountRecord) async throws {
        let logger = self.logger
        guard account.keys == nil else {
            // The account and its keys in one transaction.
            return try await transaction { connection in try await Self.insertAccount(account, on: connection, logger: logger) }
        }
        try await run { client in
            try await client.withConnection { connection in try await Self.insertAccount(account, on: connection, logger: logger) }
        }
    }

    /// Inserts `account` (its change sequence starts at 0) on `connection`, in its transaction if it is in one.
    ///
    /// - Throws: ``NoteStoreError/usernameTaken`` when another account has the username.
    static func insertAccount(_ account: AccountRecord, on connection: PostgresConnection, logger: Logger) async throws {
        do {
            try await connection.execute(
                """
                INSERT INTO accounts (id, username, password_hash, change_seq, created_at, encryption, key_generation)
                VALUES (\(account.id.rawValue), \(account.username), \(account.passwordHash), 0, \(account.createdAt),
                        \(account.encryption.rawValue), \(Int64(account.keyGeneration)))
                """,
                logger: logger
            )
        } catch where PostgresDatabase.sqlState(error) == "23505" {
            throw NoteStoreError.usernameTaken
        }
        if let keys = account.keys { try await insertKeys(keys, accountID: account.id, on: connection, logger: logger) }
    }

    public func account(byUsername username: String) async throws -> AccountRecord? {
        try await fetchAccount("SELECT \(unescaped: Self.accountColumns) FROM accounts WHERE username = \(username)")
    }

    public func account(byID id: FlakeID) async throws -> AccountRecord? {
        try await fetchAccount("SELECT \(unescaped: Self.accountColumns) FROM accounts WHERE id = \(id.rawValue)")
    }

    private func fetchAccount(_ query: PostgresQuery) async throws -> AccountRecord? {
        try await run { client in
            let rows = try await client.query(query, logger: self.logger)
            var account: AccountRecord?
            for try await (id, username, hash, createdAt, disabledAt, state, generation) in rows.decode(
                (Int64, String, String, Int64, Int64?, String, Int64).self)
            {
                guard let encryption = EncryptionState(rawValue: state) else {
                    throw PostgresStoreError("accounts.encryption holds an unknown state '\(state)'")
                }
                account = AccountRecord(
                    id: try flake(id), username: username, passwordHash: hash, createdAt: createdAt, disabledAt: disabledAt,
                    encryption: encryption, keyGeneration: UInt32(clamping: generation))
            }
            return account
        }
    }

    private static let accountColumns = "id, username, password_hash, created_at, disabled_at, encryption, key_generation"

    public func createSession(_ session: SessionRecord) async throws {
        try await run { client in
            try await client.execute(
                """
                INSERT INTO sessions (id, account_id, token_hash, device_name, origin, created_at, device_public_key)
                VALUES (\(session.id.rawValue), \(session.accountID.rawValue), \(session.tokenHash), \(session.deviceName),
                        \(session.origin?.rawValue), \(session.createdAt), \(session.devicePublicKey.map { ByteBuffer(bytes: $0.bytes) }))
                """,
                logger: self.logger
            )
        }
    }

    public func session(byTokenHash tokenHash: String) async throws -> SessionRecord? {
        try await fetchSessions(
            // A disabled account's sessions do not authenticate (disabling also deletes them; this covers a sign-in
            // that raced with it).
            """
            SELECT id, account_id, token_hash, device_name, origin, created_at, last_seen_at, device_public_key FROM sessions
            WHERE token_hash = \(tokenHash) AND account_id IN (SELECT id FROM accounts WHERE disabled_at IS NULL)
            """
        ).first
    }

    private func fetchSessions(_ query: PostgresQuery) async throws -> [SessionRecord] {
        try await run { client in
            let rows = try await client.query(query, logger: self.logger)
            var sessions: [SessionRecord] = []
            for try await (id, account, hash, device, origin, createdAt, lastSeenAt, publicKey) in rows.decode(
                (Int64, Int64, String, String?, Int64?, Int64, Int64?, ByteBuffer?).self
            ) {
                sessions.append(
                    SessionRecord(
                        id: try flake(id), accountID: try flake(account), tokenHash: hash, deviceName: device,
                        origin: try origin.map(flake), createdAt: createdAt, lastSeenAt: lastSeenAt,
                        devicePublicKey: try publicKey.map { try DevicePublicKey(bytes: Array(buffer: $0)) }
                    ))
            }
            return sessions
        }
    }

    /// Runs a statement on a transaction's connection and counts the rows it returns (`RETURNING 1`).
    func count(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> Int {
        var count = 0
        for try await _ in try await connection.query(query, logger: logger) { count += 1 }
        return count
    }

    /// The `RETURNING` clause of every statement that deletes sessions: one row per session deleted, and a
    /// notification on ``PostgresChangeListener/channel`` (delivered when the transaction commits; one per account, as
    /// PostgreSQL folds identical ones), so the account's waiting pulls on every daemon re-check their session and a
    /// device signed out from anywhere, the operator's commands included, learns it at once.
    static let wakeWaiters = "RETURNING pg_notify('\(PostgresChangeListener.channel)', account_id::text)"

    @discardableResult
    public func deleteSession(id: FlakeID, accountID: FlakeID) async throws -> Bool {
        try await transaction { connection in
            try await self.count(
                "DELETE FROM sessions WHERE id = \(id.rawValue) AND account_id = \(accountID.rawValue) \(unescaped: Self.wakeWaiters)", on: connection
            ) > 0
        }
    }

    public func sessions(accountID: FlakeID, limit: Int) async throws -> [SessionRecord] {
        try await fetchSessions(
            """
            SELECT id, account_id, token_hash, device_name, origin, created_at, last_seen_at, device_public_key FROM sessions
            WHERE account_id = \(accountID.rawValue) ORDER BY created_at DESC, id DESC LIMIT \(Int64(max(limit, 0)))
            """
        )
    }

    @discardableResult
    public func deleteSessions(accountID: FlakeID, except: FlakeID?) async throws -> Int {
        try await transaction { connection in
            try await self.count(
                """
                DELETE FROM sessions WHERE account_id = \(accountID.rawValue) AND id IS DISTINCT FROM \(except?.rawValue)::int8
                \(unescaped: Self.wakeWaiters)
                """,
                on: connection
            )
        }
    }

    public func markSessionSeen(id: FlakeID, accountID: FlakeID, at time: Int64, ifBefore: Int64) async throws {
        try await run { client in
            try await client.execute(
                """
                UPDATE sessions SET last_seen_at = \(time)
                WHERE id = \(id.rawValue) AND account_id = \(accountID.rawValue) AND (last_seen_at IS NULL OR last_seen_at < \(ifBefore))
                """,
                logger: self.logger
            )
        }
    }

    @discardableResult
    public func changePassword(accountID: FlakeID, passwordHash: String, keepingSession: FlakeID?) async throws -> Int {
        try await transaction { connection in
            let account = accountID.rawValue
            guard
                try await self.count(
                    "UPDATE accounts SET password_hash = \(passwordHash) WHERE id = \(account) RETURNING 1", on: connection) > 0
            else { throw NoteStoreError.accountNotFound }
            return try await self.count(
                """
                DELETE FROM sessions WHERE account_id = \(account) AND id IS DISTINCT FROM \(keepingSession?.rawValue)::int8
                \(unescaped: Self.wakeWaiters)
                """,
                on: connection
            )
        }
    }

    @discardableResult
    public func deleteAccount(id: FlakeID) async throws -> Bool {
        try await transaction { connection in
            let account = id.rawValue
            // The push lock first: a push of the account runs wholly before this, and one after finds no account.
            guard try await self.count("SELECT 1 FROM accounts WHERE id = \(account) FOR UPDATE", on: connection) > 0 else {
                return false
            }
            try await connection.execute("DELETE FROM applied_edits WHERE account_id = \(account)", logger: self.logger)
            try await connection.execute("DELETE FROM note_versions WHERE account_id = \(account)", logger: self.logger)
            try await connection.execute("DELETE FROM notes WHERE account_id = \(account)", logger: self.logger)
            _ = try await self.count("DELETE FROM sessions WHERE account_id = \(account) \(unescaped: Self.wakeWaiters)", on: connection)
            try await connection.execute("DELETE FROM accounts WHERE id = \(account)", logger: self.logger)
            return true
        }
    }

    public func usage(accountID: FlakeID) async throws -> AccountUsage? {
        try await run { client in
            let rows = try await client.query(
                "SELECT note_count, text_bytes, replay_text_bytes, history_bytes, chunk_bytes FROM accounts WHERE id = \(accountID.rawValue)",
                logger: self.logger
            )
            var usage: AccountUsage?
            for try await (notes, bytes, replayBytes, historyBytes, chunkBytes) in rows.decode((Int64, Int64, Int64, Int64, Int64).self) {
                usage = AccountUsage(
                    noteCount: notes, textBytes: bytes, replayTextBytes: replayBytes, historyBytes: historyBytes, chunkBytes: chunkBytes)
            }
            return usage
        }
    }

    // MARK: - Push

    public func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult] {
        let logger = self.logger
        return try await transaction { connection in
            try await PushDriver.push(
                PostgresPushTransaction(connection: connection, logger: logger), accountID: accountID, changes: changes,
                context: context
            ).results
        }
    }

    // MARK: - Pull

    /// The note columns of a pull's rows (``PostgresRows/PullRow``).
    private static let pulledNoteColumns = PostgresRows.noteColumns(of: "n")

    public func pull(accountID: FlakeID, after sequence: Int64, limit: Int, maxBytes: Int) async throws -> PullPage {
        let account = accountID.rawValue
        let limit = Int64(max(limit, 0))
        let maxBytes = Int64(maxBytes)
        return try await run { client in
            // One statement, one snapshot: the account's sequence and the page agree. The page stops after the note
            // whose text reaches `maxBytes` (the texts before it are under the bound), read from at most `limit` rows.
            let rows = try await client.query(
                """
                SELECT a.change_seq, a.note_count, n.rows_read, \(unescaped: Self.pulledNoteColumns)
                FROM accounts a
                LEFT JOIN LATERAL (
                    SELECT * FROM (
                        SELECT \(unescaped: PostgresRows.noteColumns),
                            COALESCE(SUM(octet_length(notes.text)) OVER (
                                ORDER BY notes.change_seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS bytes_before,
                            COUNT(*) OVER () AS rows_read
                        FROM (
                            SELECT * FROM notes WHERE notes.account_id = a.id AND notes.change_seq > \(sequence)
                            ORDER BY notes.change_seq LIMIT \(limit)
                        ) notes
                    ) bounded WHERE bounded.bytes_before < \(maxBytes)
                ) n ON TRUE
                WHERE a.id = \(account)
                ORDER BY n.change_seq
                """,
                logger: self.logger
            )
            var current: Int64 = 0
            var noteCount: Int64 = 0
            var rowsRead: Int64 = 0
            var notes: [StoredNote] = []
            for try await row in rows.decode(PostgresRows.PullRow.self) {
                let pulled = try PostgresRows.pulled(row)
                current = pulled.sequence
                noteCount = pulled.noteCount
                rowsRead = pulled.rowsRead
                if let note = pulled.note { notes.append(note) }
            }
            return PullPage(notes: notes, currentSequence: current, noteCount: noteCount, cutByBytes: Int64(notes.count) < rowsRead)
        }
    }

    // MARK: - History

    public func versions(accountID: FlakeID, query: HistoryPlanner.Query) async throws -> VersionPage? {
        let account = accountID.rawValue
        let note = query.serverID.rawValue
        let logger = self.logger
        // One snapshot for both reads: the sizes (the planner picks the page), then the page's rows.
        return try await transaction { connection in
            try await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var found = false
            var sizes: [Int] = []
            for try await size in try await connection.query(
                """
                SELECT v.size FROM notes n
                LEFT JOIN LATERAL (
                    SELECT octet_length(text)::int8 AS size, version FROM note_versions
                    WHERE account_id = n.account_id AND server_id = n.server_id AND version > \(query.after)
                    ORDER BY version LIMIT \(Int64(query.pageSize) + 1)
                ) v ON TRUE
                WHERE n.server_id = \(note) AND n.account_id = \(account)
                ORDER BY v.version
                """,
                logger: logger
            ).decode(Int64?.self) {
                found = true
                if let size { sizes.append(Int(size)) }
            }
            guard found else { return nil }
            let (count, hasMore) = HistoryPlanner.pageLength(sizes: sizes, query: query)
            var versions: [StoredVersion] = []
            if count > 0 {
                for try await row in try await connection.query(
                    """
                    SELECT \(unescaped: PostgresRows.versionColumns) FROM note_versions
                    WHERE account_id = \(account) AND server_id = \(note) AND version > \(query.after)
                    ORDER BY version LIMIT \(Int64(count))
                    """,
                    logger: logger
                ).decode(PostgresRows.VersionRow.self) {
                    versions.append(try PostgresRows.version(row))
                }
            }
            return VersionPage(versions: versions, hasMore: hasMore)
        }
    }

    public func pruneHistory(savedBefore cutoff: Int64) async throws -> Int {
        // A version with a later one of its note is never the note's newest.
        let old = """
            FROM note_versions v WHERE v.saved_at < \(cutoff) AND EXISTS (
                SELECT 1 FROM note_versions w WHERE w.account_id = v.account_id AND w.server_id = v.server_id AND w.version > v.version)
            """
        return try await pruneInChunks(
            lock: "SELECT id FROM accounts WHERE id IN (SELECT v.account_id \(unescaped: old) LIMIT \(Self.pruneChunk)) ORDER BY id FOR UPDATE"
        ) { accounts in
            """
            WITH gone AS (
                DELETE FROM note_versions WHERE ctid IN (
                    SELECT v.ctid \(unescaped: old) AND v.account_id = ANY(\(accounts)::int8[]) LIMIT \(Self.pruneChunk))
                RETURNING account_id, octet_length(text) AS b
            ), freed AS (
                SELECT account_id, SUM(b) AS b, COUNT(*) AS n FROM gone GROUP BY account_id
            ), given AS (
                UPDATE accounts a SET history_bytes = a.history_bytes - f.b
                FROM freed f WHERE a.id = f.account_id AND f.b > 0
            )
            SELECT COALESCE(SUM(n), 0)::int8 FROM freed
            """
        }
    }

    public func currentChangeSequence(accountID: FlakeID) async throws -> Int64 {
        try await run { client in
            let rows = try await client.query(
                "SELECT change_seq FROM accounts WHERE id = \(accountID.rawValue)", logger: self.logger
            )
            var sequence: Int64 = 0
            for try await value in rows.decode(Int64.self) { sequence = value }
            return sequence
        }
    }

    // MARK: - Operations

    public func largestIssuedID() async throws -> FlakeID? {
        guard !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        return try await database.largestStoredID()
    }

    public func pruneAppliedEdits(createdBefore cutoff: Int64) async throws -> Int {
        try await pruneInChunks(
            lock: """
                SELECT id FROM accounts WHERE id IN (
                    SELECT account_id FROM applied_edits WHERE created_at < \(cutoff) LIMIT \(Self.pruneChunk))
                ORDER BY id FOR UPDATE
                """
        ) { accounts in
            """
            WITH gone AS (
                DELETE FROM applied_edits WHERE ctid IN (
                    SELECT ctid FROM applied_edits WHERE created_at < \(cutoff) AND account_id = ANY(\(accounts)::int8[])
                    LIMIT \(Self.pruneChunk))
                RETURNING account_id, COALESCE(octet_length(text), 0) AS b
            ), freed AS (
                SELECT account_id, SUM(b) AS b, COUNT(*) AS n FROM gone GROUP BY account_id
            ), given AS (
                UPDATE accounts a SET replay_text_bytes = a.replay_text_bytes - f.b
                FROM freed f WHERE a.id = f.account_id AND f.b > 0
            )
            SELECT COALESCE(SUM(n), 0)::int8 FROM freed
            """
        }
    }

    /// Rows a prune deletes per transaction.
    private static let pruneChunk: Int64 = 5000

    /// Prunes in chunks of ``pruneChunk`` rows, each its own short transaction, so no push waits long on it, until a
    /// chunk deletes fewer; answers how many rows it deleted. Each chunk first locks the rows of the accounts it
    /// touches (`lock`, in ID order, as a push and an account deletion do: account row first), so it never deadlocks
    /// with them, then runs `delete` with those accounts: it deletes their rows of the chunk, gives the deleted texts'
    /// bytes back to their accounts' running total, and answers the count.
    private func pruneInChunks(lock: PostgresQuery, delete: @Sendable ([Int64]) -> PostgresQuery) async throws -> Int {
        var total = 0
        while true {
            let deleted = try await transaction { connection in
                var accounts: [Int64] = []
                for try await id in try await connection.query(lock, logger: self.logger).decode(Int64.self) {
                    accounts.append(id)
                }
                guard !accounts.isEmpty else { return 0 }
                var count: Int64 = 0
                for try await value in try await connection.query(delete(accounts), logger: self.logger).decode(Int64.self) {
                    count = value
                }
                return Int(count)
            }
            total += deleted
            if deleted < Self.pruneChunk { return total }
        }
    }

    public func ping() async throws {
        try await run { client in
            try await client.execute("SELECT 1", logger: self.logger)
        }
    }

    public func close() async throws {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await database.close()
    }
}
