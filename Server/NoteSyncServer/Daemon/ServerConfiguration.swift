import Foundation
import Logging
import NoteSyncProtocol

/// Everything `notesyncd` is started with. The defaults are the initializer's; each option's flag, variable and range
/// are in ``NotesyncdOption/all``, which ``validate()`` checks.
public struct ServerConfiguration: Sendable, Equatable {
    /// Which database the daemon uses.
    public enum Database: Sendable, Equatable, CustomStringConvertible {
        /// SQLite in the data directory (`<dataDirectory>/notesyncd.sqlite`).
        case sqlite
        /// PostgreSQL at a `postgres://` or `postgresql://` URL (see ``PostgresDatabase/configuration(url:maximumConnections:)``).
        case postgres(url: String)

        /// Parses `sqlite` (or `sqlite:`), or a `postgres://`/`postgresql://` URL.
        public init?(parsing text: String) {
            let lowered = text.lowercased()
            if lowered == "sqlite" || lowered == "sqlite:" {
                self = .sqlite
            } else if lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") {
                self = .postgres(url: text)
            } else {
                return nil
            }
        }

        /// The form the parser reads; a PostgreSQL URL is shown without its password.
        public var description: String {
            switch self {
            case .sqlite: "sqlite"
            case .postgres(let url): Self.redacted(url)
            }
        }

        static func redacted(_ url: String) -> String {
            guard let schemeEnd = url.range(of: "://"), let at = url.range(of: "@", range: schemeEnd.upperBound..<url.endIndex)
            else { return url }
            let credentials = url[schemeEnd.upperBound..<at.lowerBound]
            guard let colon = credentials.firstIndex(of: ":") else { return url }
            return url.replacingCharacters(in: colon..<at.lowerBound, with: ":***")
        }
    }

    /// Where the SQLite database lives (created if missing). Default `./notesyncd-data`.
    public var dataDirectory: String
    /// The address to listen on.
    public var host: String
    /// The port to listen on, 0 to pick a free one (the listening line shows it).
    public var port: Int
    /// The MiniFlake instance number of this daemon's ID generator with SQLite. With PostgreSQL the number is
    /// leased from the database instead (``InstanceLease``).
    public var instance: Int
    /// How long an instance lease lasts without renewal (PostgreSQL only), in seconds.
    public var instanceLeaseSeconds: Int
    /// The most PostgreSQL connections this daemon opens.
    public var databaseConnections: Int
    /// How long the start may take to reach PostgreSQL, migrate and lease an instance number before the daemon
    /// gives up with an error naming the database (a database that cannot be reached is an operator's error, not a
    /// hang). 30 seconds; the tests that start many daemons at once on a loaded machine give more.
    public var postgresStartupDeadline: Duration = .seconds(30)
    /// How many days an applied edit is kept for replay detection (0 keeps them forever).
    public var editRetentionDays: Int
    /// The note history: its retention in days (`--history-days`, 0 keeps every version) and page limits, served by
    /// `GET /v1/info`.
    public var history: HistoryLimits = .default
    /// The bcrypt cost of new password hashes.
    public var bcryptCost: Int
    /// The limits enforced and served by `GET /v1/info`.
    public var limits: SyncLimits
    /// The least severe level logged.
    public var logLevel: Logger.Level
    /// SQLite in ``dataDirectory``, or PostgreSQL.
    public var database: Database
    /// Connection timeouts in seconds (see ``ConnectionTimeouts``).
    public var idleTimeoutSeconds: Int
    public var readTimeoutSeconds: Int
    public var writeTimeoutSeconds: Int
    /// Most connections served at once; past it new connections wait in the listen backlog.
    public var maxConnections: Int
    /// Who may create an account over HTTP: ``SignUpPolicy/closed`` by default (safe for a daemon reachable from the
    /// internet: the operator creates accounts with `notesyncd users add`).
    public var signUp: SignUpPolicy = .closed
    /// How log lines are written.
    public var logFormat: LogFormat = .text
    /// Where the Prometheus endpoint (`GET /metrics`) listens, as `HOST:PORT`; nil (the default) serves no metrics.
    /// It is a listener of its own, never the sync port, so it is not public by accident.
    public var metricsAddress: MetricsAddress?
    /// The per-account limits (``AccountQuota/default``).
    public var quota: AccountQuota = .default
    /// Days a session may go unused before its token stops working (0: never). Signing out
    /// loses nothing on a device (its notes stay and reconcile at the next sign-in), so an expiry costs a forgotten
    /// laptop one sign-in, while a token copied off a lost one stops working on its own.
    public var sessionIdleDays: Int = 180
    /// Most waiting pulls held at once, 1...max connections - 1 (checked by ``validate()``); nil: three quarters of ``maxConnections`` (so
    /// pushes and plain pulls still find a connection when every waiter is held).
    public var maxWaiters: Int?
    /// The limits of waiting pulls served by `GET /v1/info` (`live`): the longest wait and the most waiters per
    /// account (the daemon's ``maxWaiters`` bounds it too).
    public var live: LiveLimits = .default
    /// Days an attachment chunk no note refers to is kept before the prune service deletes it (its upload, or the
    /// last `missing` answer or note that named it, starts the period).
    public var chunkGraceDays: Int = 7

    /// ``maxWaiters`` or its default.
    public var effectiveMaxWaiters: Int { maxWaiters ?? max(1, maxConnections * 3 / 4) }

    public init(
        dataDirectory: String = "notesyncd-data", host: String = "127.0.0.1", port: Int = 8080, instance: Int = 0,
        bcryptCost: Int = 12, limits: SyncLimits = .default, logLevel: Logger.Level = .info, database: Database = .sqlite,
        instanceLeaseSeconds: Int = 30, databaseConnections: Int = 20, editRetentionDays: Int = 30,
        idleTimeoutSeconds: Int = 60, readTimeoutSeconds: Int = 30, writeTimeoutSeconds: Int = 60, maxConnections: Int = 1000
    ) {
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.readTimeoutSeconds = readTimeoutSeconds
        self.writeTimeoutSeconds = writeTimeoutSeconds
        self.maxConnections = maxConnections
        self.editRetentionDays = editRetentionDays
        self.instanceLeaseSeconds = instanceLeaseSeconds
        self.databaseConnections = databaseConnections
        self.dataDirectory = dataDirectory
        self.host = host
        self.port = port
        self.instance = instance
        self.bcryptCost = bcryptCost
        self.limits = limits
        self.logLevel = logLevel
        self.database = database
    }

    /// The connection timeouts.
    public var timeouts: ConnectionTimeouts {
        ConnectionTimeouts(idle: .seconds(idleTimeoutSeconds), read: .seconds(readTimeoutSeconds), write: .seconds(writeTimeoutSeconds))
    }

    /// Checks every value; throws a ``ConfigurationError`` naming the first bad one: each option's range
    /// (``NotesyncdOption/all``), then what depends on several values.
    public func validate() throws(ConfigurationError) {
        try NotesyncdOption.checkRanges(NotesyncdOption.all, of: self)
        guard !host.isEmpty else { throw ConfigurationError("host must not be empty") }
        guard !dataDirectory.isEmpty else { throw ConfigurationError("data directory must not be empty") }
        guard limits.defaultPageSize > 0, limits.defaultPageSize <= limits.maxPageSize else {
            throw ConfigurationError("the default page size must be 1...max page size (\(limits.maxPageSize))")
        }
        guard (1...max(1, maxConnections - 1)).contains(effectiveMaxWaiters) else {
            throw ConfigurationError("max waiters must be 1...\(max(1, maxConnections - 1)) (below max connections), got \(effectiveMaxWaiters)")
        }
        guard (1...3600).contains(live.maxWaitSeconds) else {
            throw ConfigurationError("the longest wait must be 1...3600 seconds, got \(live.maxWaitSeconds)")
        }
        if case .postgres(let url) = database {
            _ = try PostgresDatabase.configuration(url: url, maximumConnections: databaseConnections)
        }
    }
}

/// Who may create an account with `POST /v1/accounts`.
public enum SignUpPolicy: String, Sendable, Equatable, CaseIterable {
    /// Anyone who reaches the daemon (a demo, a daemon on a private network).
    case open
    /// Nobody: the operator creates accounts with `notesyncd users add`; sign-up answers 403 `sign_up_closed`.
    case closed
    /// Whoever holds an invite code from the operator (`notesyncd invites create`); each sign-up takes one use of
    /// it. Without a code sign-up answers 403 `invite_required`; with a code that cannot be used, `invalid_invite`.
    case invite
}

/// The form of the daemon's log lines on standard error.
public enum LogFormat: String, Sendable, Equatable, CaseIterable {
    /// swift-log's stream format: `TIMESTAMP LEVEL notesyncd : key=value message`.
    case text
    /// One JSON object a line (`ts`, `level`, `label`, `message`, then the metadata's keys), for log shippers.
    case json
}

/// The listen address of the metrics endpoint.
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    /// 0 picks a free port (the daemon logs the real one and prints `notesyncd metrics on http://HOST:PORT/metrics`).
    public var port: Int
}

extension MetricsAddress {
    /// Parses `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (loopback); nil for anything else.
    public init?(parsing text: String) {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { host = "127.0.0.1" }
        guard !host.contains(" ") else { return nil }
        self.init(host: host, port: port)
    }

    public var description: String { Listener.shown(host: host, port: port) }
}

/// A configuration value the daemon cannot start with.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One human sentence.
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
