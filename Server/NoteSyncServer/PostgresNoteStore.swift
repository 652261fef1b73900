import Foundation
import Logging
import MiniFlake
import NIOCore
import NoteSyncProtocol
import PostgresNIO
import Synchronization

/// The PostgreSQL ``NoteStore`` (postgres-nio), for several daemons sharing one database.
///
/// The store owns a `PostgresClient` (a connection pool). The daemon runs that client as a `Service` in its
/// service group (``client``); tests and tools use ``connect(_:logger:)``, which runs it in a task of its own.
/// ``migrate()`` must run before anything else; the daemon runs it before the HTTP server starts.
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
///   note may contain). Pushes write with a few set-based statements (`unnest` of arrays), never a query per note.
/// - Durability: each push is one transaction committed with PostgreSQL's default `synchronous_commit = on`.
public final class PostgresNoteStore: NoteStore {
    public let backendName = "postgres"

    /// The connection pool. Run it (`client.run()`, or as a `Service`) for as long as the store is used.
    public let client: PostgresClient
    private let logger: Logger
    /// The task running ``client`` when the store runs it itself (``connect(_:logger:)``).
    private let ownedRun: Mutex<Task<Void, Never>?>
    private let isClosed = Atomic<Bool>(false)

    /// A store over a new pool that is not running yet: run ``client``, then call ``migrate()``.
    public init(configuration: PostgresClient.Configuration, logger: Logger) {
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
        self.ownedRun = Mutex(nil)
    }

    /// Opens a store that runs its own pool, migrated and ready. For tests and tools; ``close()`` stops the pool.
    public static func connect(_ configuration: PostgresClient.Configuration, logger: Logger) async throws -> PostgresNoteStore {
        let store = PostgresNoteStore(configuration: configuration, logger: logger)
        let client = store.client
        store.ownedRun.withLock { $0 = Task { await client.run() } }
        do {
            try await store.migrate()
        } catch {
            try? await store.close()
            throw error
        }
        return store
    }

    // MARK: - Configuration

    /// A pool configuration from a `postgres://` or `postgresql://` URL:
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require&search_path=SCHEMA]`.
    ///
    /// `sslmode` defaults to `prefer` (TLS when the server offers it); `require` uses TLS with certificate checks.
    /// `search_path` selects a schema (tests use one schema per store). User and password may be percent-encoded.
    ///
    /// - Throws: ``ConfigurationError`` naming what is wrong (the password is never shown).
    public static func configuration(url: String, maximumConnections: Int = 20) throws(ConfigurationError) -> PostgresClient.Configuration {
        let shown = ServerConfiguration.Database.redacted(url)
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql"
        else { throw ConfigurationError("'\(shown)' is not a postgres:// URL") }
        guard let host = components.host, !host.isEmpty else {
            throw ConfigurationError("the PostgreSQL URL '\(shown)' names no host")
        }
        guard let user = components.user?.removingPercentEncoding, !user.isEmpty else {
            throw ConfigurationError("the PostgreSQL URL '\(shown)' names no user")
        }
        let password = components.password?.removingPercentEncoding
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw ConfigurationError("the PostgreSQL URL '\(shown)' has a bad port") }

        var tls = PostgresClient.Configuration.TLS.prefer(.makeClientConfiguration())
        var searchPath: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                switch item.value ?? "" {
                case "disable": tls = .disable
                case "prefer", "allow": tls = .prefer(.makeClientConfiguration())
                case "require", "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
                default: throw ConfigurationError("sslmode must be disable, prefer or require, got '\(item.value ?? "")'")
                }
            case "search_path":
                guard let value = item.value, !value.isEmpty else { throw ConfigurationError("search_path is empty") }
                searchPath = value
            case "application_name", "connect_timeout":
                continue
            default:
                throw ConfigurationError("unknown PostgreSQL URL parameter '\(item.name)' (known: sslmode, search_path)")
            }
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database.isEmpty ? nil : database, tls: tls
        )
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(10)
        var parameters = [("application_name", "notesyncd")]
        if let searchPath { parameters.append(("search_path", searchPath)) }
        configuration.options.additionalStartupParameters = parameters
        return configuration
    }

    // MARK: - Schema

    /// The migrations, in order. Never edit a shipped migration: append a new one.
    static let migrations: [(version: Int, sql: [String])] = [
        (
            1,
            [
                """
                CREATE TABLE accounts (
                    id BIGINT PRIMARY KEY,
                    username TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL,
                    change_seq BIGINT NOT NULL DEFAULT 0,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE sessions (
                    id BIGINT PRIMARY KEY,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    token_hash TEXT NOT NULL UNIQUE,
                    device_name TEXT,
                    origin BIGINT,
                    created_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX sessions_by_account ON sessions(account_id)",
                """
                CREATE TABLE notes (
                    server_id BIGINT PRIMARY KEY,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    client_id BIGINT NOT NULL,
                    origin BIGINT NOT NULL,
                    version BIGINT NOT NULL,
                    text BYTEA NOT NULL,
                    deleted BOOLEAN NOT NULL DEFAULT FALSE,
                    conflict_of BIGINT,
                    change_seq BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                "CREATE UNIQUE INDEX notes_by_client_key ON notes(account_id, client_id, origin)",
                "CREATE UNIQUE INDEX notes_by_change_seq ON notes(account_id, change_seq)",
                """
                CREATE TABLE applied_edits (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    edit_id BIGINT NOT NULL,
                    client_id BIGINT NOT NULL,
                    origin BIGINT NOT NULL,
                    pusher BIGINT NOT NULL, -- 0 when the pushing installation is unknown (a key column)
                    status TEXT NOT NULL,
                    server_id BIGINT,
                    version BIGINT,
                    conflict_server_id BIGINT,
                    conflict_client_id BIGINT,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, edit_id, client_id, origin, pusher)
                )
                """,
                """
                CREATE TABLE instance_leases (
                    instance INTEGER PRIMARY KEY CHECK (instance BETWEEN 0 AND 1023),
                    holder TEXT NOT NULL,
                    acquired_at TIMESTAMPTZ NOT NULL,
                    renewed_at TIMESTAMPTZ NOT NULL,
                    expires_at TIMESTAMPTZ NOT NULL
                )
                """,
            ]
        ),
        (2, ["CREATE INDEX applied_edits_by_age ON applied_edits(created_at)"]),
    ]

    /// The newest schema version this build knows.
    public static var schemaVersion: Int { migrations.last?.version ?? 0 }

    /// Brings the schema up to date. Safe when several daemons start at once: the whole migration runs in one
    /// transaction holding a transaction-level advisory lock (keyed by the schema's name), so one daemon migrates
    /// and the others wait, then find nothing to do. Refuses a database migrated by a newer notesyncd.
    public func migrate() async throws {
        try await transaction { connection in
            try await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.notesyncd.migrate'))", logger: self.logger
            )
            try await connection.execute(
                """
                CREATE TABLE IF NOT EXISTS notesyncd_migrations (
                    version INTEGER PRIMARY KEY,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """,
                logger: self.logger
            )
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM notesyncd_migrations", logger: self.logger)
                .decode(Int.self)
            {
                applied.insert(version)
            }
            if let newest = applied.max(), newest > Self.schemaVersion {
                throw ConfigurationError(
                    "the database schema is at version \(newest), newer than this notesyncd knows (\(Self.schemaVersion)); upgrade notesyncd"
                )
            }
            for migration in Self.migrations where !applied.contains(migration.version) {
                for statement in migration.sql {
                    try await connection.execute(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                }
                try await connection.execute(
                    "INSERT INTO notesyncd_migrations (version) VALUES (\(migration.version))", logger: self.logger
                )
                self.logger.info("database migrated", metadata: ["version": "\(migration.version)"])
            }
        }
    }

    /// The schema version recorded in the database (0 before the first migration).
    public func appliedSchemaVersion() async throws -> Int {
        try await run { client in
            let rows = try await client.query(
                "SELECT COALESCE(MAX(version), 0) FROM notesyncd_migrations", logger: self.logger
            )
            var version = 0
            for try await value in rows.decode(Int.self) { version = value }
            return version
        }
    }

    // MARK: - Access

    /// Runs `body` on the pool, mapping connection failures to ``NoteStoreError``.
    ///
    /// - Parameter evenIfClosed: For the instance lease's release, which runs after the HTTP server has drained
    ///   and the store was closed, while the pool still runs.
    private func run<T: Sendable>(evenIfClosed: Bool = false, _ body: (PostgresClient) async throws -> T) async throws -> T {
        guard evenIfClosed || !isClosed.load(ordering: .acquiring) else { throw NoteStoreError.closed }
        do {
            return try await body(client)
        } catch {
            throw Self.mapped(error)
        }
    }

    /// Runs `body` in a READ COMMITTED transaction on one pooled connection: `BEGIN`, the body, `COMMIT`; `ROLLBACK`
    /// when the body throws, rethrowing its error unchanged (so ``NoteStoreError`` values survive).
    func transaction<T: Sendable>(evenIfClosed: Bool = false, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await run(evenIfClosed: evenIfClosed) { client in
            try await client.withConnection { connection in
                try await connection.execute("BEGIN", logger: self.logger)
                let value: T
                do {
                    value = try await body(connection)
                } catch {
                    try? await connection.execute("ROLLBACK", logger: self.logger)
                    throw error
                }
                try await connection.execute("COMMIT", logger: self.logger)
                return value
            }
        }
    }

    /// Backend errors the service acts on: lost connections and overload become ``NoteStoreError/unavailable(_:)``
    /// (503, retry); a closed pool becomes ``NoteStoreError/closed``; anything else stays a server fault.
    static func mapped(_ error: any Error) -> any Error {
        guard let error = error as? PSQLError else { return error }
        switch error.code {
        case .poolClosed:
            return NoteStoreError.closed
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .queryCancelled:
            return NoteStoreError.unavailable("the PostgreSQL connection failed (\(error.code))")
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            // 40001 serialization failure, 40P01 deadlock, 53xxx insufficient resources, 57P0x shutdown/crash.
            if state == "40001" || state == "40P01" || state.hasPrefix("53") || state.hasPrefix("57P") {
                return NoteStoreError.unavailable("PostgreSQL asked to retry (SQLSTATE \(state))")
            }
            return error
        default:
            return error
        }
    }

    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    // MARK: - Accounts and sessions

    public func createAccount(_ account: AccountRecord) async throws {
        do {
            try await run { client in
                try await client.execute(
                    """
                    INSERT INTO accounts (id, username, password_hash, change_seq, created_at)
                    VALUES (\(account.id.rawValue), \(account.username), \(account.passwordHash), 0, \(account.createdAt))
                    """,
                    logger: self.logger
                )
            }
        } catch where Self.sqlState(error) == "23505" {
            throw NoteStoreError.usernameTaken
        }
    }

    public func account(byUsername username: String) async throws -> AccountRecord? {
        try await fetchAccount("SELECT id, username, password_hash, created_at FROM accounts WHERE username = \(username)")
    }

    public func account(byID id: FlakeID) async throws -> AccountRecord? {
        try await fetchAccount("SELECT id, username, password_hash, created_at FROM accounts WHERE id = \(id.rawValue)")
    }

    private func fetchAccount(_ query: PostgresQuery) async throws -> AccountRecord? {
        try await run { client in
            let rows = try await client.query(query, logger: self.logger)
            var account: AccountRecord?
            for try await (id, username, hash, createdAt) in rows.decode((Int64, String, String, Int64).self) {
                account = AccountRecord(id: try flake(id), username: username, passwordHash: hash, createdAt: createdAt)
            }
            return account
        }
    }

    public func createSession(_ session: SessionRecord) async throws {
        try await run { client in
            try await client.execute(
                """
                INSERT INTO sessions (id, account_id, token_hash, device_name, origin, created_at)
                VALUES (\(session.id.rawValue), \(session.accountID.rawValue), \(session.tokenHash), \(session.deviceName),
                        \(session.origin?.rawValue), \(session.createdAt))
                """,
                logger: self.logger
            )
        }
    }

    public func session(byTokenHash tokenHash: String) async throws -> SessionRecord? {
        try await run { client in
            let rows = try await client.query(
                "SELECT id, account_id, token_hash, device_name, origin, created_at FROM sessions WHERE token_hash = \(tokenHash)",
                logger: self.logger
            )
            var session: SessionRecord?
            for try await (id, account, hash, device, origin, createdAt) in rows.decode(
                (Int64, Int64, String, String?, Int64?, Int64).self
            ) {
                session = SessionRecord(
                    id: try flake(id), accountID: try flake(account), tokenHash: hash, deviceName: device,
                    origin: try origin.map(flake), createdAt: createdAt
                )
            }
            return session
        }
    }

    public func deleteSession(id: FlakeID, accountID: FlakeID) async throws {
        try await run { client in
            try await client.execute(
                "DELETE FROM sessions WHERE id = \(id.rawValue) AND account_id = \(accountID.rawValue)", logger: self.logger
            )
        }
    }

    // MARK: - Push

    public func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult] {
        let account = accountID.rawValue
        let logger = self.logger
        return try await transaction { connection in
            // The lock that serializes the account's pushes across every daemon; taken first.
            var sequence: Int64?
            for try await value in try await connection.query(
                "SELECT change_seq FROM accounts WHERE id = \(account) FOR UPDATE", logger: logger
            ).decode(Int64.self) {
                sequence = value
            }
            guard let sequence else { throw NoteStoreError.accountNotFound }

            // Load: applied edits, then the notes named by the changes and those edits.
            var appliedEdits: [AppliedEdit] = []
            let editIDs = PushPlanner.editIDs(of: changes).map(\.rawValue)
            if !editIDs.isEmpty {
                let rows = try await connection.query(
                    """
                    SELECT edit_id, status, server_id, version, conflict_server_id, conflict_client_id, created_at,
                           client_id, origin, pusher
                    FROM applied_edits WHERE account_id = \(account) AND edit_id = ANY(\(editIDs))
                    """,
                    logger: logger
                )
                for try await row in rows.decode(
                    (Int64, String, Int64?, Int64?, Int64?, Int64?, Int64, Int64, Int64, Int64).self
                ) {
                    appliedEdits.append(try Self.appliedEdit(row))
                }
            }
            let keys = PushPlanner.keysToLoad(changes: changes, appliedEdits: appliedEdits)
            let serverIDs = keys.serverIDs.map(\.rawValue)
            // By client ID; a rare extra note with the same client ID and another origin is ignored by the planner.
            let clientIDs = Array(Set(keys.clientKeys.map(\.clientID.rawValue)))
            var notes: [StoredNote] = []
            if !serverIDs.isEmpty || !clientIDs.isEmpty {
                let rows = try await connection.query(
                    """
                    SELECT \(unescaped: Self.noteColumns) FROM notes
                    WHERE account_id = \(account) AND (server_id = ANY(\(serverIDs)) OR client_id = ANY(\(clientIDs)))
                    """,
                    logger: logger
                )
                for try await row in rows.decode(NoteRow.self) { notes.append(try Self.note(row)) }
            }

            let plan = try PushPlanner.plan(
                PushPlanner.Input(
                    accountID: accountID, changes: changes, notes: notes, appliedEdits: appliedEdits,
                    currentSequence: sequence, limits: context.limits, now: context.now, pusher: context.pusher
                ),
                mintID: context.mintID
            )
            if plan.writes.isEmpty && plan.newEdits.isEmpty { return plan.results }

            // Write: every insert, update and edit in one statement. Data-modifying CTEs always run to completion
            // whether or not the main statement reads them, and they touch disjoint rows.
            var new = NoteColumns()
            var changed = NoteColumns()
            for write in plan.writes {
                if write.isNew { new.append(write.note) } else { changed.append(write.note) }
            }
            var edits = EditColumns()
            for edit in plan.newEdits { edits.append(edit) }
            try await connection.execute(
                """
                WITH inserted AS (
                    INSERT INTO notes (server_id, account_id, client_id, origin, version, text, deleted, conflict_of,
                                       change_seq, created_at, updated_at)
                    SELECT s, \(account), c, o, v, t, d, NULLIF(cf, 0), q, ca, ua
                    FROM unnest(\(new.serverID)::int8[], \(new.clientID)::int8[], \(new.origin)::int8[],
                                \(new.version)::int8[], \(new.text)::bytea[], \(new.deleted)::bool[],
                                \(new.conflictOf)::int8[], \(new.changeSeq)::int8[], \(new.createdAt)::int8[],
                                \(new.updatedAt)::int8[])
                         AS u(s, c, o, v, t, d, cf, q, ca, ua)
                ), updated AS (
                    UPDATE notes SET version = u.v, text = u.t, deleted = u.d, change_seq = u.q, updated_at = u.ua
                    FROM unnest(\(changed.serverID)::int8[], \(changed.version)::int8[], \(changed.text)::bytea[],
                                \(changed.deleted)::bool[], \(changed.changeSeq)::int8[], \(changed.updatedAt)::int8[])
                         AS u(s, v, t, d, q, ua)
                    WHERE notes.server_id = u.s AND notes.account_id = \(account)
                ), edits AS (
                    INSERT INTO applied_edits (account_id, edit_id, status, server_id, version, conflict_server_id,
                                               conflict_client_id, created_at, client_id, origin, pusher)
                    SELECT \(account), e, st, NULLIF(s, 0), NULLIF(v, 0), NULLIF(cs, 0), NULLIF(cc, 0), ca, c, o, p
                    FROM unnest(\(edits.editID)::int8[], \(edits.status)::text[], \(edits.serverID)::int8[],
                                \(edits.version)::int8[], \(edits.conflictServerID)::int8[],
                                \(edits.conflictClientID)::int8[], \(edits.createdAt)::int8[], \(edits.clientID)::int8[],
                                \(edits.origin)::int8[], \(edits.pusher)::int8[])
                         AS u(e, st, s, v, cs, cc, ca, c, o, p)
                )
                UPDATE accounts SET change_seq = \(plan.newSequence)
                WHERE id = \(account) AND change_seq <> \(plan.newSequence)
                """,
                logger: logger
            )
            return plan.results
        }
    }

    // MARK: - Pull

    public func pull(accountID: FlakeID, after sequence: Int64, limit: Int) async throws -> PullPage {
        let account = accountID.rawValue
        let limit = Int64(max(limit, 0))
        return try await run { client in
            // One statement, one snapshot: the account's sequence and the page agree.
            let rows = try await client.query(
                """
                SELECT a.change_seq, n.server_id, n.account_id, n.client_id, n.origin, n.version, n.text, n.deleted,
                       n.conflict_of, n.change_seq, n.created_at, n.updated_at
                FROM accounts a
                LEFT JOIN LATERAL (
                    SELECT \(unescaped: Self.noteColumns) FROM notes
                    WHERE notes.account_id = a.id AND notes.change_seq > \(sequence)
                    ORDER BY notes.change_seq LIMIT \(limit)
                ) n ON TRUE
                WHERE a.id = \(account)
                ORDER BY n.change_seq
                """,
                logger: self.logger
            )
            var current: Int64 = 0
            var notes: [StoredNote] = []
            for try await row in rows {
                let (seq, serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt, updatedAt) =
                    try row.decode(
                        (Int64, Int64?, Int64?, Int64?, Int64?, Int64?, ByteBuffer?, Bool?, Int64?, Int64?, Int64?, Int64?).self
                    )
                current = seq
                guard let serverID, let accountID, let clientID, let origin, let version, let text, let deleted,
                    let changeSeq, let createdAt, let updatedAt
                else { continue }
                notes.append(
                    try Self.note((serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt, updatedAt))
                )
            }
            return PullPage(notes: notes, currentSequence: current)
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
        try await run { client in
            let rows = try await client.query(
                """
                SELECT GREATEST((SELECT MAX(id) FROM accounts), (SELECT MAX(id) FROM sessions),
                                (SELECT MAX(server_id) FROM notes))
                """,
                logger: self.logger
            )
            var largest: Int64?
            for try await value in rows.decode(Int64?.self) { largest = value }
            return try largest.map(flake)
        }
    }

    public func pruneAppliedEdits(createdBefore cutoff: Int64) async throws -> Int {
        // Chunks of 5,000 (each statement its own transaction), so no push waits long on them.
        var total = 0
        while true {
            let deleted = try await run { client in
                var count = 0
                for try await _ in try await client.query(
                    """
                    DELETE FROM applied_edits WHERE ctid IN (
                        SELECT ctid FROM applied_edits WHERE created_at < \(cutoff) LIMIT 5000)
                    RETURNING 1
                    """,
                    logger: self.logger
                ) {
                    count += 1
                }
                return count
            }
            total += deleted
            if deleted < 5000 { return total }
        }
    }

    public func ping() async throws {
        try await run { client in
            try await client.execute("SELECT 1", logger: self.logger)
        }
    }

    public func close() async throws {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let task = ownedRun.withLock({ $0 }) {
            task.cancel()
            await task.value
        }
    }

    // MARK: - Rows

    static let noteColumns =
        "server_id, account_id, client_id, origin, version, text, deleted, conflict_of, change_seq, created_at, updated_at"

    typealias NoteRow = (Int64, Int64, Int64, Int64, Int64, ByteBuffer, Bool, Int64?, Int64, Int64, Int64)

    static func note(_ row: NoteRow) throws -> StoredNote {
        let (serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt, updatedAt) = row
        return StoredNote(
            accountID: try flake(accountID), serverID: try flake(serverID), clientID: try flake(clientID),
            origin: try flake(origin), version: version, text: String(buffer: text), deleted: deleted,
            conflictOf: try conflictOf.map(flake), changeSeq: changeSeq, createdAt: createdAt, updatedAt: updatedAt
        )
    }

    static func appliedEdit(
        _ row: (Int64, String, Int64?, Int64?, Int64?, Int64?, Int64, Int64, Int64, Int64)
    ) throws -> AppliedEdit {
        let (editID, statusText, serverID, version, conflictServerID, conflictClientID, createdAt, clientID, origin, pusher) = row
        guard let status = ChangeStatus(rawValue: statusText) else {
            throw PostgresStoreError("applied_edits.status holds an unknown status '\(statusText)'")
        }
        var conflict: ConflictCopy?
        if let conflictServerID, let conflictClientID {
            conflict = ConflictCopy(serverID: try flake(conflictServerID), clientID: try flake(conflictClientID))
        }
        return AppliedEdit(
            editID: try flake(editID), noteKey: NoteKey(clientID: try flake(clientID), origin: try flake(origin)),
            pusher: pusher == 0 ? nil : try flake(pusher), status: status, serverID: try serverID.map(flake),
            version: version, conflict: conflict, createdAt: createdAt
        )
    }

    /// Notes as column arrays, for `unnest`. Absent values are 0 (IDs are positive), turned back into NULL in SQL.
    struct NoteColumns {
        var serverID: [Int64] = [], clientID: [Int64] = [], origin: [Int64] = [], version: [Int64] = []
        var text: [ByteBuffer] = [], deleted: [Bool] = [], conflictOf: [Int64] = [], changeSeq: [Int64] = []
        var createdAt: [Int64] = [], updatedAt: [Int64] = []

        mutating func append(_ note: StoredNote) {
            serverID.append(note.serverID.rawValue)
            clientID.append(note.clientID.rawValue)
            origin.append(note.origin.rawValue)
            version.append(note.version)
            text.append(ByteBuffer(string: note.text))
            deleted.append(note.deleted)
            conflictOf.append(note.conflictOf?.rawValue ?? 0)
            changeSeq.append(note.changeSeq)
            createdAt.append(note.createdAt)
            updatedAt.append(note.updatedAt)
        }
    }

    /// Applied edits as column arrays, for `unnest`. Absent values are 0 (IDs and versions are positive).
    struct EditColumns {
        var editID: [Int64] = [], status: [String] = [], serverID: [Int64] = [], version: [Int64] = []
        var conflictServerID: [Int64] = [], conflictClientID: [Int64] = [], createdAt: [Int64] = []
        var clientID: [Int64] = [], origin: [Int64] = [], pusher: [Int64] = []

        mutating func append(_ edit: AppliedEdit) {
            editID.append(edit.editID.rawValue)
            status.append(edit.status.rawValue)
            serverID.append(edit.serverID?.rawValue ?? 0)
            version.append(edit.version ?? 0)
            conflictServerID.append(edit.conflict?.serverID.rawValue ?? 0)
            conflictClientID.append(edit.conflict?.clientID.rawValue ?? 0)
            createdAt.append(edit.createdAt)
            clientID.append(edit.noteKey.clientID.rawValue)
            origin.append(edit.noteKey.origin.rawValue)
            pusher.append(edit.pusher?.rawValue ?? 0)
        }
    }
}

extension PostgresClient {
    /// Runs a statement and drains its rows (a pooled connection goes back to the pool only when they are read).
    func execute(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

extension PostgresConnection {
    /// Runs a statement and drains its rows, so the connection is free for the next one.
    func execute(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

/// A stored value the PostgreSQL store cannot read back (a server fault).
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// A stored ID back as a ``FlakeID`` (every stored ID is positive).
private func flake(_ value: Int64) throws -> FlakeID {
    try FlakeID(validating: value)
}
