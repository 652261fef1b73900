import Logging
import MiniFlake
import PostgresNIO
import Synchronization

/// A PostgreSQL connection pool and the two ways the server runs statements on it: ``run(_:)`` (statements on any
/// pooled connection) and ``transaction(_:)`` (statements in one transaction). ``PostgresNoteStore`` and
/// ``InstanceLease`` each hold the daemon's one database.
///
/// The pool serves only while ``client`` runs: the daemon runs it as a `Service` in its service group;
/// ``connect(_:logger:)`` runs it in a task of its own (tests and tools), which ``close()`` stops. The schema is
/// brought up to date by ``migrate()``.
public final class PostgresDatabase: Sendable {
    /// The connection pool.
    public let client: PostgresClient
    let logger: Logger
    /// The task running ``client`` when the database runs it itself (``connect(_:logger:)``).
    private let ownedRun = Mutex<Task<Void, Never>?>(nil)

    /// A database over a new pool that is not running yet: run ``client`` (`client.run()`, or as a `Service`).
    public init(configuration: PostgresClient.Configuration, logger: Logger) {
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
    }

    /// A database whose pool runs in a task of its own until ``close()``. For tests and tools.
    public static func connect(_ configuration: PostgresClient.Configuration, logger: Logger) -> PostgresDatabase {
        let database = PostgresDatabase(configuration: configuration, logger: logger)
        let client = database.client
        database.ownedRun.withLock { $0 = Task { await client.run() } }
        return database
    }

    /// Stops the pool when the database runs it itself (``connect(_:logger:)``); later statements throw
    /// ``NoteStoreError/closed``. Does nothing for a pool run by the daemon's service group.
    public func close() async {
        if let task = ownedRun.withLock({ $0 }) {
            task.cancel()
            await task.value
        }
    }

    /// Runs `body` on the pool, mapping connection failures to ``NoteStoreError`` (see ``mapped(_:)``).
    func run<T: Sendable>(_ body: (PostgresClient) async throws -> T) async throws -> T {
        do {
            return try await body(client)
        } catch {
            throw Self.mapped(error)
        }
    }

    /// Runs `body` in a READ COMMITTED transaction on one pooled connection: `BEGIN`, the body, `COMMIT`; `ROLLBACK`
    /// when the body throws, rethrowing its error unchanged (so ``NoteStoreError`` values survive).
    func transaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await run { client in
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

    /// The largest ID stored in the database (accounts, sessions, notes), whoever minted it: the high-water mark of
    /// a generator starting with a leased instance number (``InstanceLease``) and of ``NoteStore/largestIssuedID()``.
    func largestStoredID() async throws -> FlakeID? {
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

    /// The SQLSTATE of a server error, if it is one.
    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
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
