import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NoteSyncProtocol

/// The `notesyncd` command line: the daemon's options (``NotesyncdOption/all``, each also read from its environment
/// variable; a flag wins over the environment, the environment over the default) and the operator subcommands
/// (`users`, `sessions`, `check`, `stats`, `backup`, `invites`), which open the same store from the same
/// `--data-dir` / `--database` options and variables. Docs/OPERATIONS.md's option table is checked against the
/// options' table by a test.
///
/// A bad option or variable prints one line on stderr and exits 64.
public struct NotesyncdCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "notesyncd",
        abstract: "The FlakeNotes sync server.",
        discussion: """
            Every option can also be set with the environment variable named in its help; a flag wins over the \
            environment. On start the server prints one line, 'notesyncd listening on http://HOST:PORT', to \
            standard output once it listens (then 'notesyncd metrics on ...' with --metrics-address); logs go to \
            standard error. SIGTERM or SIGINT stop it gracefully. The subcommands are the operator's tools over the \
            same store (--data-dir, --database); they work while the daemon runs.
            """,
        version: NotesyncdVersion.current,
        subcommands: [UsersCommand.self, SessionsCommand.self, CheckCommand.self, StatsCommand.self, BackupCommand.self, InvitesCommand.self]
    )

    // One line per entry of `NotesyncdOption.all` (ArgumentParser sees a flag only as a stored property); everything
    // else about an option is its entry.
    @Option(.dataDirectory) var dataDirectory: String?
    @Option(.host) var host: String?
    @Option(.port) var port: String?
    @Option(.instance) var instance: String?
    @Option(.bcryptCost) var bcryptCost: String?
    @Option(.logLevel) var logLevel: String?
    @Option(.database) var database: String?
    @Option(.instanceLeaseSeconds) var instanceLeaseSeconds: String?
    @Option(.databaseConnections) var databaseConnections: String?
    @Option(.editRetentionDays) var editRetentionDays: String?
    @Option(.historyDays) var historyDays: String?
    @Option(.maxBodyBytes) var maxBodyBytes: String?
    @Option(.maxNoteBytes) var maxNoteBytes: String?
    @Option(.maxBatch) var maxBatch: String?
    @Option(.maxPage) var maxPage: String?
    @Option(.idleTimeout) var idleTimeout: String?
    @Option(.readTimeout) var readTimeout: String?
    @Option(.writeTimeout) var writeTimeout: String?
    @Option(.maxConnections) var maxConnections: String?
    @Option(.signUp) var signUp: String?
    @Option(.logFormat) var logFormat: String?
    @Option(.metricsAddress) var metricsAddress: String?
    @Option(.maxNotesPerAccount) var maxNotesPerAccount: String?
    @Option(.maxBytesPerAccount) var maxBytesPerAccount: String?
    @Option(.maxWaiters) var maxWaiters: String?
    @Option(.maxWaitersPerAccount) var maxWaitersPerAccount: String?
    @Option(.sessionIdleDays) var sessionIdleDays: String?
    @Option(.chunkGraceDays) var chunkGraceDays: String?

    public init() {}

    /// The flags given on the command line, by flag name (`port` → `9090`).
    var givenFlags: [String: String] {
        var flags: [String: String] = [:]
        for option in NotesyncdOption.all {
            if let text = self[keyPath: option.flagValue] { flags[option.flag] = text }
        }
        return flags
    }

    /// The configuration from the flags, then `environment`, then the defaults.
    ///
    /// - Throws: `ValidationError` naming the bad flag or variable.
    public func resolvedConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        let flags = givenFlags
        try NotesyncdOption.apply(NotesyncdOption.all, flags: flags, environment: environment, to: &configuration)
        if case .postgres = configuration.database, let instance = NotesyncdOption.instance.given(flags: flags, environment: environment) {
            throw ValidationError("With PostgreSQL each daemon leases its instance number from the database; remove \(instance.source).")
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
