import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NoteSyncProtocol

/// The `notesyncd` command line: every option is also read from an environment variable; a flag wins over the
/// environment, the environment over the default.
///
/// | flag | environment | default |
/// | --- | --- | --- |
/// | `--data-dir` | `NOTESYNCD_DATA_DIR` | `notesyncd-data` |
/// | `--host` | `NOTESYNCD_HOST` | `127.0.0.1` |
/// | `--port` | `NOTESYNCD_PORT` | `8080` (0 picks a free port) |
/// | `--instance` | `NOTESYNCD_INSTANCE` | `0` (0...1023; SQLite only, PostgreSQL leases one) |
/// | `--instance-lease-seconds` | `NOTESYNCD_INSTANCE_LEASE_SECONDS` | `30` (PostgreSQL) |
/// | `--database-connections` | `NOTESYNCD_DATABASE_CONNECTIONS` | `20` (PostgreSQL) |
/// | `--edit-retention-days` | `NOTESYNCD_EDIT_RETENTION_DAYS` | `30` (0 keeps applied edits forever) |
/// | `--bcrypt-cost` | `NOTESYNCD_BCRYPT_COST` | `12` (4...31) |
/// | `--log-level` | `NOTESYNCD_LOG_LEVEL` | `info` |
/// | `--database` | `NOTESYNCD_DATABASE` | `sqlite` |
/// | `--max-body-bytes` | `NOTESYNCD_MAX_BODY_BYTES` | 8 MiB |
/// | `--max-note-bytes` | `NOTESYNCD_MAX_NOTE_BYTES` | 256 KiB |
/// | `--max-batch` | `NOTESYNCD_MAX_BATCH` | 1000 |
/// | `--max-page` | `NOTESYNCD_MAX_PAGE` | 1000 |
/// | `--idle-timeout` | `NOTESYNCD_IDLE_TIMEOUT` | 60 (seconds) |
/// | `--read-timeout` | `NOTESYNCD_READ_TIMEOUT` | 30 (seconds) |
/// | `--write-timeout` | `NOTESYNCD_WRITE_TIMEOUT` | 60 (seconds) |
/// | `--max-connections` | `NOTESYNCD_MAX_CONNECTIONS` | 1000 |
/// | `--max-notes-per-account` | `NOTESYNCD_MAX_NOTES_PER_ACCOUNT` | 1000000 (deleted notes included) |
/// | `--max-bytes-per-account` | `NOTESYNCD_MAX_BYTES_PER_ACCOUNT` | 1 GiB (note texts plus texts kept for replays) |
/// | `--max-waiters` | `NOTESYNCD_MAX_WAITERS` | 3/4 of `--max-connections` |
/// | `--max-waiters-per-account` | `NOTESYNCD_MAX_WAITERS_PER_ACCOUNT` | 64 |
/// | `--session-idle-days` | `NOTESYNCD_SESSION_IDLE_DAYS` | 180 (0: sessions never expire) |
/// | `--sign-up` | `NOTESYNCD_SIGN_UP` | `closed` (or `open`, `invite`) |
/// | `--log-format` | `NOTESYNCD_LOG_FORMAT` | `text` (or `json`) |
/// | `--metrics-address` | `NOTESYNCD_METRICS_ADDRESS` | none (no metrics endpoint) |
///
/// The operator subcommands (`users`, `sessions`, `check`, `stats`, `backup`, `invites`) open the same store from the same
/// `--data-dir` / `--database` options and variables.
///
/// Integer options take their value unconditionally (`--instance -1` is the value -1, refused by its range, not a
/// missing value). A bad option or variable prints one line on stderr and exits 64.
public struct NotesyncdCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "notesyncd",
        abstract: "The FlakeNotes sync server.",
        discussion: """
            Every option can also be set with the environment variable named in its help; a flag wins over the \
            environment. On start the server prints one line, 'notesyncd listening on http://HOST:PORT', to \
            standard output; logs go to standard error. SIGTERM or SIGINT stop it gracefully. The subcommands \
            are the operator's tools over the same store (--data-dir, --database); they work while the daemon runs.
            """,
        version: NotesyncdVersion.current,
        subcommands: [UsersCommand.self, SessionsCommand.self, CheckCommand.self, StatsCommand.self, BackupCommand.self, InvitesCommand.self]
    )

    /// Environment variable names.
    public enum Environment {
        public static let dataDirectory = "NOTESYNCD_DATA_DIR"
        public static let host = "NOTESYNCD_HOST"
        public static let port = "NOTESYNCD_PORT"
        public static let instance = "NOTESYNCD_INSTANCE"
        public static let bcryptCost = "NOTESYNCD_BCRYPT_COST"
        public static let logLevel = "NOTESYNCD_LOG_LEVEL"
        public static let database = "NOTESYNCD_DATABASE"
        public static let instanceLeaseSeconds = "NOTESYNCD_INSTANCE_LEASE_SECONDS"
        public static let databaseConnections = "NOTESYNCD_DATABASE_CONNECTIONS"
        public static let editRetentionDays = "NOTESYNCD_EDIT_RETENTION_DAYS"
        public static let maxBodyBytes = "NOTESYNCD_MAX_BODY_BYTES"
        public static let maxNoteBytes = "NOTESYNCD_MAX_NOTE_BYTES"
        public static let maxBatch = "NOTESYNCD_MAX_BATCH"
        public static let maxPage = "NOTESYNCD_MAX_PAGE"
        public static let idleTimeout = "NOTESYNCD_IDLE_TIMEOUT"
        public static let readTimeout = "NOTESYNCD_READ_TIMEOUT"
        public static let writeTimeout = "NOTESYNCD_WRITE_TIMEOUT"
        public static let maxConnections = "NOTESYNCD_MAX_CONNECTIONS"
        public static let signUp = "NOTESYNCD_SIGN_UP"
        public static let logFormat = "NOTESYNCD_LOG_FORMAT"
        public static let metricsAddress = "NOTESYNCD_METRICS_ADDRESS"
        public static let maxNotesPerAccount = "NOTESYNCD_MAX_NOTES_PER_ACCOUNT"
        public static let maxBytesPerAccount = "NOTESYNCD_MAX_BYTES_PER_ACCOUNT"
        public static let maxWaiters = "NOTESYNCD_MAX_WAITERS"
        public static let maxWaitersPerAccount = "NOTESYNCD_MAX_WAITERS_PER_ACCOUNT"
        public static let sessionIdleDays = "NOTESYNCD_SESSION_IDLE_DAYS"
    }

    @Option(name: .customLong("data-dir"), parsing: .unconditional, help: "Directory of the SQLite database (NOTESYNCD_DATA_DIR; default notesyncd-data).")
    var dataDirectory: String?

    @Option(parsing: .unconditional, help: "Address to listen on (NOTESYNCD_HOST; default 127.0.0.1).")
    var host: String?

    @Option(parsing: .unconditional, help: "Port to listen on, 0 for any free port (NOTESYNCD_PORT; default 8080).")
    var port: Int?

    @Option(parsing: .unconditional, help: "MiniFlake instance number of this daemon with SQLite, 0...1023; PostgreSQL leases one (NOTESYNCD_INSTANCE; default 0).")
    var instance: Int?

    @Option(
        name: .customLong("instance-lease-seconds"), parsing: .unconditional,
        help: "PostgreSQL: how long an instance-number lease lasts unrenewed (NOTESYNCD_INSTANCE_LEASE_SECONDS; default 30)."
    )
    var instanceLeaseSeconds: Int?

    @Option(
        name: .customLong("database-connections"), parsing: .unconditional,
        help: "PostgreSQL: most connections this daemon opens (NOTESYNCD_DATABASE_CONNECTIONS; default 20)."
    )
    var databaseConnections: Int?

    @Option(
        name: .customLong("edit-retention-days"), parsing: .unconditional,
        help: "Days applied edits are kept to recognise replayed pushes; 0 keeps them forever (NOTESYNCD_EDIT_RETENTION_DAYS; default 30)."
    )
    var editRetentionDays: Int?

    @Option(name: .customLong("bcrypt-cost"), parsing: .unconditional, help: "bcrypt cost of new password hashes, 4...31 (NOTESYNCD_BCRYPT_COST; default 12).")
    var bcryptCost: Int?

    @Option(
        name: .customLong("log-level"), parsing: .unconditional,
        help: "trace, debug, info, notice, warning, error or critical (NOTESYNCD_LOG_LEVEL; default info)."
    )
    var logLevel: String?

    @Option(parsing: .unconditional, help: "'sqlite', or a postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require] URL (NOTESYNCD_DATABASE; default sqlite).")
    var database: String?

    @Option(name: .customLong("max-body-bytes"), parsing: .unconditional, help: "Largest request body in bytes (NOTESYNCD_MAX_BODY_BYTES; default 8388608).")
    var maxBodyBytes: Int?

    @Option(name: .customLong("max-note-bytes"), parsing: .unconditional, help: "Largest note text in UTF-8 bytes (NOTESYNCD_MAX_NOTE_BYTES; default 262144).")
    var maxNoteBytes: Int?

    @Option(name: .customLong("max-batch"), parsing: .unconditional, help: "Most changes in one push (NOTESYNCD_MAX_BATCH; default 1000).")
    var maxBatch: Int?

    @Option(name: .customLong("max-page"), parsing: .unconditional, help: "Most notes in one pull page (NOTESYNCD_MAX_PAGE; default 1000).")
    var maxPage: Int?

    @Option(
        name: .customLong("idle-timeout"), parsing: .unconditional,
        help: "Seconds a connection with no request in progress may stay silent, 1...3600 (NOTESYNCD_IDLE_TIMEOUT; default 60)."
    )
    var idleTimeout: Int?

    @Option(
        name: .customLong("read-timeout"), parsing: .unconditional,
        help: "Seconds a request head may take, and a body may stall, 1...3600 (NOTESYNCD_READ_TIMEOUT; default 30)."
    )
    var readTimeout: Int?

    @Option(
        name: .customLong("write-timeout"), parsing: .unconditional,
        help: "Seconds an answer may wait for a client that does not read it, 1...3600 (NOTESYNCD_WRITE_TIMEOUT; default 60)."
    )
    var writeTimeout: Int?

    @Option(
        name: .customLong("max-connections"), parsing: .unconditional,
        help: "Most connections served at once; more wait in the listen backlog (NOTESYNCD_MAX_CONNECTIONS; default 1000)."
    )
    var maxConnections: Int?

    @Option(
        name: .customLong("sign-up"), parsing: .unconditional,
        help: "Who may create accounts over HTTP: 'closed' (the operator runs 'notesyncd users add'), 'invite' (whoever holds a code from 'notesyncd invites create') or 'open' (NOTESYNCD_SIGN_UP; default closed)."
    )
    var signUp: String?

    @Option(name: .customLong("log-format"), parsing: .unconditional, help: "'text' or 'json', one JSON object a line (NOTESYNCD_LOG_FORMAT; default text).")
    var logFormat: String?

    @Option(
        name: .customLong("metrics-address"), parsing: .unconditional,
        help: "Serve Prometheus metrics at http://HOST:PORT/metrics on a listener of its own (NOTESYNCD_METRICS_ADDRESS; default off)."
    )
    var metricsAddress: String?

    @Option(
        name: .customLong("max-notes-per-account"), parsing: .unconditional,
        help: "Most notes an account may store, deleted ones included (NOTESYNCD_MAX_NOTES_PER_ACCOUNT; default 1000000)."
    )
    var maxNotesPerAccount: Int?

    @Option(
        name: .customLong("max-bytes-per-account"), parsing: .unconditional,
        help: "Most bytes an account may store: its notes' texts plus the texts kept to answer replays (NOTESYNCD_MAX_BYTES_PER_ACCOUNT; default 1073741824)."
    )
    var maxBytesPerAccount: Int?

    @Option(
        name: .customLong("session-idle-days"), parsing: .unconditional,
        help: "Days a device may go unused before its session expires and it must sign in again, 0 for never (NOTESYNCD_SESSION_IDLE_DAYS; default 180)."
    )
    var sessionIdleDays: Int?

    @Option(
        name: .customLong("max-waiters"), parsing: .unconditional,
        help: "Most waiting pulls (wait=) held at once, below --max-connections (NOTESYNCD_MAX_WAITERS; default 3/4 of max connections)."
    )
    var maxWaiters: Int?

    @Option(
        name: .customLong("max-waiters-per-account"), parsing: .unconditional,
        help: "Most waiting pulls one account may hold on this daemon (NOTESYNCD_MAX_WAITERS_PER_ACCOUNT; default 64)."
    )
    var maxWaitersPerAccount: Int?

    public init() {}

    /// The configuration from the flags, then `environment`, then the defaults.
    ///
    /// - Throws: `ValidationError` naming the bad flag or variable.
    public func resolvedConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        func integer(_ flag: Int?, _ variable: String) throws -> Int? {
            if let flag { return flag }
            guard let text = environment[variable], !text.isEmpty else { return nil }
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("\(variable) must be an integer, got '\(text)'.")
            }
            return value
        }
        func string(_ flag: String?, _ variable: String) -> String? {
            if let flag { return flag }
            guard let text = environment[variable], !text.isEmpty else { return nil }
            return text
        }

        var configuration = ServerConfiguration()
        if let value = string(dataDirectory, Environment.dataDirectory) { configuration.dataDirectory = value }
        if let value = string(host, Environment.host) { configuration.host = value }
        if let value = try integer(port, Environment.port) { configuration.port = value }
        if let value = try integer(instance, Environment.instance) { configuration.instance = value }
        if let value = try integer(bcryptCost, Environment.bcryptCost) { configuration.bcryptCost = value }
        if let value = string(logLevel, Environment.logLevel) {
            guard let level = Logger.Level(rawValue: value.lowercased()) else {
                throw ValidationError("Unknown log level '\(value)'; use trace, debug, info, notice, warning, error or critical.")
            }
            configuration.logLevel = level
        }
        if let value = string(database, Environment.database) {
            guard let parsed = ServerConfiguration.Database(parsing: value) else {
                throw ValidationError("The database must be 'sqlite' or a postgres:// URL, got '\(value)'.")
            }
            configuration.database = parsed
        }
        if let value = try integer(instanceLeaseSeconds, Environment.instanceLeaseSeconds) {
            configuration.instanceLeaseSeconds = value
        }
        if let value = try integer(databaseConnections, Environment.databaseConnections) {
            configuration.databaseConnections = value
        }
        if let value = try integer(editRetentionDays, Environment.editRetentionDays) {
            configuration.editRetentionDays = value
        }
        if case .postgres = configuration.database, try integer(instance, Environment.instance) != nil {
            throw ValidationError(
                "With PostgreSQL each daemon leases its instance number from the database; remove --instance (\(Environment.instance))."
            )
        }
        if let value = try integer(maxBodyBytes, Environment.maxBodyBytes) { configuration.limits.maxBodyBytes = value }
        if let value = try integer(maxNoteBytes, Environment.maxNoteBytes) { configuration.limits.maxNoteBytes = value }
        if let value = try integer(maxBatch, Environment.maxBatch) { configuration.limits.maxBatchChanges = value }
        if let value = try integer(maxPage, Environment.maxPage) {
            configuration.limits.maxPageSize = value
            configuration.limits.defaultPageSize = min(configuration.limits.defaultPageSize, max(value, 1))
        }
        if let value = try integer(idleTimeout, Environment.idleTimeout) { configuration.idleTimeoutSeconds = value }
        if let value = try integer(readTimeout, Environment.readTimeout) { configuration.readTimeoutSeconds = value }
        if let value = try integer(writeTimeout, Environment.writeTimeout) { configuration.writeTimeoutSeconds = value }
        if let value = try integer(maxConnections, Environment.maxConnections) { configuration.maxConnections = value }
        if let value = string(signUp, Environment.signUp) {
            guard let policy = SignUpPolicy(rawValue: value.lowercased()) else {
                throw ValidationError("The sign-up policy must be 'open', 'closed' or 'invite', got '\(value)'.")
            }
            configuration.signUp = policy
        }
        if let value = string(logFormat, Environment.logFormat) {
            guard let format = LogFormat(rawValue: value.lowercased()) else {
                throw ValidationError("The log format must be 'text' or 'json', got '\(value)'.")
            }
            configuration.logFormat = format
        }
        if let value = string(metricsAddress, Environment.metricsAddress) {
            guard let address = MetricsAddress(parsing: value) else {
                throw ValidationError("The metrics address must be HOST:PORT (e.g. 127.0.0.1:9090), got '\(value)'.")
            }
            configuration.metricsAddress = address
        }
        if let value = try integer(maxNotesPerAccount, Environment.maxNotesPerAccount) { configuration.quota.maxNotes = Int64(value) }
        if let value = try integer(maxBytesPerAccount, Environment.maxBytesPerAccount) { configuration.quota.maxTextBytes = Int64(value) }
        if let value = try integer(maxWaiters, Environment.maxWaiters) { configuration.maxWaiters = value }
        if let value = try integer(sessionIdleDays, Environment.sessionIdleDays) { configuration.sessionIdleDays = value }
        if let value = try integer(maxWaitersPerAccount, Environment.maxWaitersPerAccount) {
            configuration.live.maxWaitersPerAccount = value
        }
        do {
            try configuration.validate()
        } catch {
            throw ValidationError(error.message)
        }
        return configuration
    }

    public func validate() throws {
        _ = try resolvedConfiguration()
    }

    public func run() async throws {
        let configuration = try resolvedConfiguration()
        bootstrapLogging(format: configuration.logFormat, level: configuration.logLevel)
        let app = try await buildApplication(configuration: configuration)
        try await app.runService()
    }
}

extension NotesyncdCommand {
    /// Parses the process's arguments and runs the daemon; on an error prints one line to stderr and exits non-zero
    /// (64 for a bad option or variable, 1 for a runtime failure). `--help` prints the help and exits 0.
    /// `main.swift` calls only this.
    public static func runFromCommandLine(_ arguments: [String]? = nil) async {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            exitWithOneLine(error)
        }
        do {
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exitWithOneLine(error)
        }
    }

    /// The one stderr line for an error (`notesyncd: ...`), or nil for help and version requests, which print
    /// their text as ArgumentParser does.
    static func oneLine(for error: any Error) -> String? {
        if exitCode(for: error) == .success { return nil }
        // A bare exit status (`check` found problems) has already said what it had to.
        if error is ExitCode { return nil }
        let message = message(for: error)
            .split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .joined(separator: " ")
        return "notesyncd: \(message.isEmpty ? "\(error)" : message)"
    }

    private static func exitWithOneLine(_ error: any Error) -> Never {
        guard let line = oneLine(for: error) else { exit(withError: error) }
        FileHandle.standardError.write(Data((line + "\n").utf8))
        Foundation.exit(exitCode(for: error).rawValue)
    }
}
