import ArgumentParser
import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import Synchronization

/// An operator command's failure: one human sentence, printed as `notesyncd: MESSAGE` with exit status 1.
public struct OperatorError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An operator subcommand: it opens the store with the root command's options (``OperatorStoreOptions``), which it
/// reads through its `@ParentCommand var daemon`.
protocol OperatorCommand {
    var daemon: NotesyncdCommand { get }
}

extension OperatorCommand {
    /// The store options the root command was given.
    var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
}

/// The options every operator subcommand opens the store with: the daemon's own `--data-dir`, `--database` and
/// `--bcrypt-cost` (and their variables), so `notesyncd users list` reads the store `notesyncd` serves with the same
/// settings. They are the root command's options, which ArgumentParser also takes after a subcommand's name
/// (`notesyncd users list --data-dir /var/lib/notesyncd`); each subcommand reads them through `@ParentCommand`.
public struct OperatorStoreOptions: Sendable {
    /// The root command's flags, by flag name.
    let flags: [String: String]

    /// The options an operator command reads: the store's, the cost of a password it sets, and the daemon's
    /// instance number (operator commands mint with another, ``operatorInstance(daemon:)``).
    static let options: [NotesyncdOption] = [.dataDirectory, .database, .bcryptCost, .instance]

    /// What every operator subcommand's help says about the store options (they belong to the root command, so
    /// ArgumentParser lists them under `notesyncd --help`, not the subcommand's).
    static let help = """
        The store is the daemon's: --data-dir DIR (\(NotesyncdOption.dataDirectory.variable)) for SQLite, or --database \
        postgres://... (\(NotesyncdOption.database.variable)); --bcrypt-cost (\(NotesyncdOption.bcryptCost.variable)) for a \
        password set here. Safe while the daemon runs; with SQLite run it as the daemon's user.
        """

    init(_ daemon: NotesyncdCommand) {
        flags = daemon.givenFlags
    }

    /// The store's settings from the flags, then `environment`, then the daemon's defaults.
    ///
    /// - Throws: `ValidationError` naming a bad flag or variable, or a value outside its option's range.
    func resolved(
        environment: [String: String]
    ) throws -> (database: ServerConfiguration.Database, dataDirectory: String, bcryptCost: Int, instance: Int) {
        var configuration = ServerConfiguration()
        try NotesyncdOption.apply(Self.options, flags: flags, environment: environment, to: &configuration)
        do {
            try NotesyncdOption.checkRanges(Self.options, of: configuration)
        } catch {
            throw ValidationError(error.message)
        }
        return (
            configuration.database, configuration.dataDirectory, configuration.bcryptCost,
            Self.operatorInstance(daemon: configuration.instance)
        )
    }

    /// The MiniFlake instance number operator commands mint with on SQLite: never the daemon's own (`--instance`,
    /// default 0), so an account ID minted here cannot equal one the running daemon mints in the same millisecond.
    static func operatorInstance(daemon: Int) -> Int {
        (daemon + 512) % 1024
    }

    /// Opens the store, runs `body`, and closes the store whatever happens.
    ///
    /// SQLite: the data directory's `notesyncd.sqlite` must exist (a mistyped directory is an error, never a new empty
    /// store). PostgreSQL: connects (30 s at most) and migrates like the daemon; a command that mints IDs leases an
    /// instance number like a daemon does.
    func withStore<T: Sendable>(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        _ body: (OpenedStore) async throws -> T
    ) async throws -> T {
        let settings = try resolved(environment: environment)
        let logger = {
            // Standard error, so that a database error logged by a driver never mixes into --json output.
            var logger = Logger(label: "notesyncd", factory: { label in StreamLogHandler.standardError(label: label) })
            logger.logLevel = .error
            return logger
        }()
        let opened: OpenedStore
        switch settings.database {
        case .sqlite:
            let path = (settings.dataDirectory as NSString).appendingPathComponent(SQLiteNoteStore.fileName)
            guard FileManager.default.fileExists(atPath: path) else {
                throw OperatorError("no database at \(path) (set --data-dir or NOTESYNCD_DATA_DIR to the daemon's data directory)")
            }
            let store = try SQLiteNoteStore(path: path)
            let highWaterMark = try await store.largestIssuedID()
            // Another instance number than the running daemon's, and past every stored ID: never one of its IDs.
            let generator = try FlakeGenerator(instance: settings.instance, clock: SystemFlakeClock.coarse, after: highWaterMark)
            opened = OpenedStore(
                store: store, sqlite: store, postgresURL: nil, bcryptCost: settings.bcryptCost, logger: logger,
                mintID: { try generator.next() }, close: { try? await store.close() })
        case .postgres(let url):
            let configuration = try PostgresDatabase.configuration(url: url, maximumConnections: 4)
            let store = try await Self.withDeadline("connecting to PostgreSQL at \(settings.database)") {
                try await PostgresNoteStore.connect(configuration, logger: logger)
            }
            let lease = InstanceLease(database: store.database, ttl: .seconds(60), logger: logger)
            let leased = Mutex(false)
            opened = OpenedStore(
                store: store, sqlite: nil, postgresURL: url, bcryptCost: settings.bcryptCost, logger: logger,
                mintID: {
                    guard leased.withLock({ $0 }) else { throw OperatorError("no instance number leased") }
                    return try lease.next()
                },
                prepareIDs: {
                    if !leased.withLock({ $0 }) {
                        _ = try await lease.acquire()
                        leased.withLock { $0 = true }
                    }
                },
                close: {
                    if leased.withLock({ $0 }) { await lease.release() }
                    try? await store.close()
                })
        }
        do {
            let value = try await body(opened)
            await opened.close()
            return value
        } catch {
            await opened.close()
            throw error
        }
    }

    static func withDeadline<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withinDeadline(.seconds(30), timedOut: OperatorError("timed out after 30 seconds \(what)"), body)
    }
}

/// A store opened by an operator command.
struct OpenedStore: Sendable {
    let store: any OperatorStore
    /// The SQLite store, for `backup`.
    let sqlite: SQLiteNoteStore?
    /// The PostgreSQL URL, for `backup` (pg_dump).
    let postgresURL: String?
    let bcryptCost: Int
    let logger: Logger
    /// Mints account IDs (after ``prepareIDs`` on PostgreSQL).
    let mintID: @Sendable () throws -> FlakeID
    /// Leases an instance number on PostgreSQL; nothing on SQLite.
    var prepareIDs: @Sendable () async throws -> Void = {}
    let close: @Sendable () async -> Void

    /// The account with this username (canonicalized like sign-in does).
    ///
    /// - Throws: ``OperatorError`` when there is none.
    func account(named username: String) async throws -> AccountRecord {
        guard let canonical = CredentialRules.canonicalUsername(username), let account = try await store.account(byUsername: canonical)
        else {
            throw OperatorError("no account named '\(username)'")
        }
        return account
    }

    /// A service over the store, for the rules sign-up applies (username and password checks, bcrypt).
    func service() async throws -> AccountService {
        try await prepareIDs()
        return AccountService(
            ServiceContext(store: store, clock: SystemFlakeClock.coarse, mintID: mintID, logger: logger),
            configuration: ServiceConfiguration(passwords: .bcrypt(cost: bcryptCost)))
    }
}
