import ArgumentParser
import Foundation
import Logging
import NoteSyncProtocol

/// One `notesyncd` option, declared once: its flag, environment variable, default, range and help, and how its
/// text sets the ``ServerConfiguration``. ``all`` is the table; from it come the parsing (``NotesyncdCommand``
/// declares each as `@Option(.name) var name: String?`, one line that ArgumentParser needs to see a flag), the
/// environment fallback, the `--help` text, the range checks of ``ServerConfiguration/validate()`` and the check of
/// Docs/OPERATIONS.md's option table (a test fails when they disagree).
///
/// The defaults are ``ServerConfiguration``'s own (`ServerConfiguration()`), shown as the table shows them.
public struct NotesyncdOption: Sendable {
    /// The flag without its dashes (`port` for `--port`).
    public let flag: String
    /// What the default is, as `--help` and OPERATIONS.md show it (`8080`, `off`).
    public let defaultText: String
    /// The values an integer option takes (checked by ``ServerConfiguration/validate()``); nil for the others.
    public let range: ClosedRange<Int64>?
    /// What the option does, in a sentence without its variable, default or range.
    public let summary: String
    /// How a range error names the option (`instance`, `the idle timeout`), and the unit after the range.
    let noun: String
    let unit: String
    /// The flag's parsed text in ``NotesyncdCommand``.
    let flagValue: any KeyPath<NotesyncdCommand, String?> & Sendable
    /// Sets the configuration from the option's text; `source` names the flag or the variable it came from.
    let set: @Sendable (_ configuration: inout ServerConfiguration, _ text: String, _ source: String) throws -> Void
    /// The configured value, for the range check.
    let value: (@Sendable (ServerConfiguration) -> Int64)?

    /// `NOTESYNCD_` and the flag in capitals, dashes as underscores (`NOTESYNCD_DATA_DIR`).
    public var variable: String { "NOTESYNCD_" + flag.uppercased().replacingOccurrences(of: "-", with: "_") }

    /// `0–65535`, or `at least 1` for a range without a ceiling; nil without a range.
    public var rangeText: String? {
        range.map { $0.upperBound == .max ? "at least \($0.lowerBound)" : "\($0.lowerBound)–\($0.upperBound)" }
    }

    /// The `--help` text: the summary, then the variable, the default and the range.
    public var help: String {
        "\(summary) (\(variable); default \(defaultText)\(rangeText.map { "; \($0)" } ?? ""))."
    }

    /// The error for a value outside ``range`` (`instance must be 0...1023, got -1`).
    func outOfRange(_ value: Int64) -> ConfigurationError {
        Self.outOfRange(noun: noun, unit: unit, range: range ?? 0...0, value)
    }

    static func outOfRange(noun: String, unit: String, range: ClosedRange<Int64>, _ value: Int64) -> ConfigurationError {
        let bounds = range.upperBound == .max ? "at least \(range.lowerBound)" : "\(range.lowerBound)...\(range.upperBound)"
        return ConfigurationError("\(noun) must be \(bounds)\(unit), got \(value)")
    }

    /// A text option (a path, a host, a name to parse).
    static func text(
        _ flag: String, _ given: any KeyPath<NotesyncdCommand, String?> & Sendable, default defaultText: String, help summary: String,
        set: @escaping @Sendable (_ configuration: inout ServerConfiguration, _ text: String) throws -> Void
    ) -> NotesyncdOption {
        NotesyncdOption(
            flag: flag, defaultText: defaultText, range: nil, summary: summary, noun: flag, unit: "", flagValue: given,
            set: { configuration, text, _ in try set(&configuration, text) }, value: nil)
    }

    /// An integer option stored at `field`, its default the configuration's, checked against `range`.
    static func integer<T: FixedWidthInteger & Sendable>(
        _ flag: String, _ given: any KeyPath<NotesyncdCommand, String?> & Sendable,
        _ field: any WritableKeyPath<ServerConfiguration, T> & Sendable, range: ClosedRange<Int64>, noun: String, unit: String = "",
        default defaultText: String? = nil, help summary: String,
        then: (@Sendable (inout ServerConfiguration) -> Void)? = nil
    ) -> NotesyncdOption {
        NotesyncdOption(
            flag: flag, defaultText: defaultText ?? "\(ServerConfiguration()[keyPath: field])", range: range, summary: summary,
            noun: noun, unit: unit, flagValue: given,
            set: { configuration, text, source in
                let number = try integer(text, source)
                guard let value = T(exactly: number) else { throw outOfRange(noun: noun, unit: unit, range: range, number) }
                configuration[keyPath: field] = value
                then?(&configuration)
            },
            value: { Int64($0[keyPath: field]) })
    }

    /// The integer `text` holds (spaces around it ignored).
    static func integer(_ text: String, _ source: String) throws -> Int64 {
        guard let value = Int64(text.trimmingCharacters(in: .whitespaces)) else {
            throw ValidationError("\(source) must be an integer, got '\(text)'.")
        }
        return value
    }

    /// The text this option was given and where it came from (`--port`, or `NOTESYNCD_PORT`): the flag's
    /// (`flags`, by flag), else the environment variable's; nil when neither is set (an empty variable is unset).
    func given(flags: [String: String], environment: [String: String]) -> (text: String, source: String)? {
        if let text = flags[flag] { return (text, "--\(flag)") }
        if let text = environment[variable], !text.isEmpty { return (text, variable) }
        return nil
    }

    /// Sets `options` on `configuration` from `flags`, then `environment`; what neither sets keeps its value.
    ///
    /// - Throws: `ValidationError` naming the flag or variable whose text is not a value of its option.
    static func apply(
        _ options: [NotesyncdOption], flags: [String: String], environment: [String: String], to configuration: inout ServerConfiguration
    ) throws {
        for option in options {
            guard let given = option.given(flags: flags, environment: environment) else { continue }
            do {
                try option.set(&configuration, given.text, given.source)
            } catch let error as ConfigurationError {
                throw ValidationError(error.message)
            }
        }
    }

    /// Checks `options`' ranges on `configuration`: the first value outside its option's range throws.
    static func checkRanges(_ options: [NotesyncdOption], of configuration: ServerConfiguration) throws(ConfigurationError) {
        for option in options {
            guard let range = option.range, let value = option.value?(configuration) else { continue }
            guard range.contains(value) else { throw option.outOfRange(value) }
        }
    }
}

extension NotesyncdOption {
    /// Every option of `notesyncd`, in the order `--help` and Docs/OPERATIONS.md list them. A new option is its entry
    /// below (named here) and its one-line `@Option(.name) var name: String?` in ``NotesyncdCommand``; a test fails
    /// when the two disagree, or when OPERATIONS.md's table does not list it as the entry says.
    public static let all: [NotesyncdOption] = [
        dataDirectory, host, port, instance, bcryptCost, logLevel, database, instanceLeaseSeconds, databaseConnections,
        editRetentionDays, historyDays, maxBodyBytes, maxNoteBytes, maxBatch, maxPage, idleTimeout, readTimeout, writeTimeout,
        maxConnections, signUp, logFormat, metricsAddress, maxNotesPerAccount, maxBytesPerAccount, maxWaiters,
        maxWaitersPerAccount, sessionIdleDays, chunkGraceDays,
    ]

    static let dataDirectory = text(
        "data-dir", \.dataDirectory, default: ServerConfiguration().dataDirectory, help: "Directory of the SQLite database"
    ) { configuration, text in configuration.dataDirectory = text }

    static let host = text("host", \.host, default: ServerConfiguration().host, help: "Address to listen on") { configuration, text in
        configuration.host = text
    }

    static let port = integer("port", \.port, \.port, range: 0...65535, noun: "port", help: "Port to listen on, 0 for any free port")

    static let instance = integer(
        "instance", \.instance, \.instance, range: 0...1023, noun: "instance",
        help: "MiniFlake instance number of this daemon with SQLite; PostgreSQL leases one")

    static let bcryptCost = integer(
        "bcrypt-cost", \.bcryptCost, \.bcryptCost, range: 4...31, noun: "bcrypt cost", help: "bcrypt cost of new password hashes")

    static let logLevel = text(
        "log-level", \.logLevel, default: ServerConfiguration().logLevel.rawValue,
        help: "trace, debug, info, notice, warning, error or critical"
    ) { configuration, text in
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError("Unknown log level '\(text)'; use trace, debug, info, notice, warning, error or critical.")
        }
        configuration.logLevel = level
    }

    static let database = text(
        "database", \.database, default: ServerConfiguration().database.description,
        help: "'sqlite', or a postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require] URL"
    ) { configuration, text in
        guard let parsed = ServerConfiguration.Database(parsing: text) else {
            throw ValidationError("The database must be 'sqlite' or a postgres:// URL, got '\(text)'.")
        }
        configuration.database = parsed
    }

    static let instanceLeaseSeconds = integer(
        "instance-lease-seconds", \.instanceLeaseSeconds, \.instanceLeaseSeconds, range: 1...3600, noun: "the instance lease",
        unit: " seconds", help: "PostgreSQL: how long an instance-number lease lasts unrenewed, in seconds")

    static let databaseConnections = integer(
        "database-connections", \.databaseConnections, \.databaseConnections, range: 1...1000, noun: "database connections",
        help: "PostgreSQL: most connections this daemon opens")

    static let editRetentionDays = integer(
        "edit-retention-days", \.editRetentionDays, \.editRetentionDays, range: 0...36500, noun: "edit retention", unit: " days",
        help: "Days applied edits are kept to recognise replayed pushes; 0 keeps them forever")

    static let historyDays = integer(
        "history-days", \.historyDays, \.history.retentionDays, range: 0...36500, noun: "history retention", unit: " days",
        help: "Days each version of a note is kept in its history (counted in the byte quota); 0 keeps them forever")

    static let maxBodyBytes = integer(
        "max-body-bytes", \.maxBodyBytes, \.limits.maxBodyBytes, range: 1...Int64.max, noun: "max body bytes",
        help: "Largest request body in bytes")

    static let maxNoteBytes = integer(
        "max-note-bytes", \.maxNoteBytes, \.limits.maxNoteBytes, range: 1...Int64.max, noun: "max note bytes",
        help: "Largest note text in UTF-8 bytes")

    static let maxBatch = integer(
        "max-batch", \.maxBatch, \.limits.maxBatchChanges, range: 1...Int64.max, noun: "max batch", help: "Most changes in one push")

    static let maxPage = integer(
        "max-page", \.maxPage, \.limits.maxPageSize, range: 1...Int64.max, noun: "max page",
        help: "Most notes in one pull page (also caps the page given when a pull names no limit)"
    ) { configuration in
        configuration.limits.defaultPageSize = min(configuration.limits.defaultPageSize, max(configuration.limits.maxPageSize, 1))
    }

    static let idleTimeout = integer(
        "idle-timeout", \.idleTimeout, \.idleTimeoutSeconds, range: 1...3600, noun: "the idle timeout", unit: " seconds",
        help: "Seconds a connection with no request in progress may stay silent")

    static let readTimeout = integer(
        "read-timeout", \.readTimeout, \.readTimeoutSeconds, range: 1...3600, noun: "the read timeout", unit: " seconds",
        help: "Seconds a request head may take, and a body may stall")

    static let writeTimeout = integer(
        "write-timeout", \.writeTimeout, \.writeTimeoutSeconds, range: 1...3600, noun: "the write timeout", unit: " seconds",
        help: "Seconds an answer may wait for a client that does not read it")

    static let maxConnections = integer(
        "max-connections", \.maxConnections, \.maxConnections, range: 1...100_000, noun: "max connections",
        help: "Most connections served at once; more wait in the listen backlog")

    static let signUp = text(
        "sign-up", \.signUp, default: ServerConfiguration().signUp.rawValue,
        help: """
            Who may create accounts over HTTP: 'closed' (the operator runs 'notesyncd users add'), 'invite' (whoever holds \
            a code from 'notesyncd invites create') or 'open'
            """
    ) { configuration, text in
        guard let policy = SignUpPolicy(rawValue: text.lowercased()) else {
            throw ValidationError("The sign-up policy must be 'open', 'closed' or 'invite', got '\(text)'.")
        }
        configuration.signUp = policy
    }

    static let logFormat = text(
        "log-format", \.logFormat, default: ServerConfiguration().logFormat.rawValue, help: "'text' or 'json', one JSON object a line"
    ) { configuration, text in
        guard let format = LogFormat(rawValue: text.lowercased()) else {
            throw ValidationError("The log format must be 'text' or 'json', got '\(text)'.")
        }
        configuration.logFormat = format
    }

    static let metricsAddress = text(
        "metrics-address", \.metricsAddress, default: "off",
        help: "Serve Prometheus metrics at http://HOST:PORT/metrics on a listener of its own"
    ) { configuration, text in
        guard let address = MetricsAddress(parsing: text) else {
            throw ValidationError("The metrics address must be HOST:PORT (e.g. 127.0.0.1:9090), got '\(text)'.")
        }
        configuration.metricsAddress = address
    }

    static let maxNotesPerAccount = integer(
        "max-notes-per-account", \.maxNotesPerAccount, \.quota.maxNotes, range: 1...Int64.max, noun: "max notes per account",
        help: "Most notes an account may store, deleted ones included")

    static let maxBytesPerAccount = integer(
        "max-bytes-per-account", \.maxBytesPerAccount, \.quota.maxTextBytes, range: 1...Int64.max, noun: "max bytes per account",
        help: "Most bytes an account may store: its notes' texts, the texts kept to answer replays and its attachments' chunks")

    /// Its range depends on `--max-connections`: ``ServerConfiguration/validate()`` checks it.
    static let maxWaiters = NotesyncdOption(
        flag: "max-waiters", defaultText: "¾ of --max-connections", range: nil,
        summary: "Most waiting pulls (wait=) held at once, 1 to --max-connections - 1", noun: "max waiters", unit: "",
        flagValue: \.maxWaiters,
        set: { configuration, text, source in configuration.maxWaiters = Int(exactly: try integer(text, source)) ?? .max },
        value: nil)

    static let maxWaitersPerAccount = integer(
        "max-waiters-per-account", \.maxWaitersPerAccount, \.live.maxWaitersPerAccount, range: 1...100_000,
        noun: "max waiters per account", help: "Most waiting pulls one account may hold on this daemon")

    static let sessionIdleDays = integer(
        "session-idle-days", \.sessionIdleDays, \.sessionIdleDays, range: 0...36500, noun: "the session idle limit", unit: " days",
        help: "Days a device may go unused before its session expires and it must sign in again; 0 for never")

    static let chunkGraceDays = integer(
        "chunk-grace-days", \.chunkGraceDays, \.chunkGraceDays, range: 1...36500, noun: "the chunk grace period", unit: " days",
        help: "Days an attachment chunk no note refers to is kept before it is deleted")
}

extension Option where Value == String? {
    /// The flag of a ``NotesyncdOption``: its long name, its help, and its value taken unconditionally
    /// (`--instance -1` is the value -1, refused by its range, not a missing value).
    init(_ option: NotesyncdOption) {
        self.init(name: .customLong(option.flag), parsing: .unconditional, help: ArgumentHelp(option.help))
    }
}
