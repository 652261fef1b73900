import ArgumentParser
import Foundation
import Logging
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

@Suite("notesyncd command line")
struct CommandTests {
    @Test func defaults() throws {
        let configuration = try NotesyncdCommand.parse([]).resolvedConfiguration(environment: [:])
        #expect(configuration == ServerConfiguration())
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 8080)
        #expect(configuration.instance == 0)
        #expect(configuration.bcryptCost == 12)
        #expect(configuration.logLevel == .info)
        #expect(configuration.database == .sqlite)
        #expect(configuration.limits == SyncLimits.default)
        #expect(configuration.sessionIdleDays == 180)
        #expect(try NotesyncdCommand.parse(["--session-idle-days", "0"]).resolvedConfiguration(environment: [:]).sessionIdleDays == 0)
        #expect(try NotesyncdCommand.parse([]).resolvedConfiguration(environment: ["NOTESYNCD_SESSION_IDLE_DAYS": "30"]).sessionIdleDays == 30)
    }

    @Test func environmentThenFlags() throws {
        let environment = [
            "NOTESYNCD_DATA_DIR": "/env/data", "NOTESYNCD_HOST": "0.0.0.0", "NOTESYNCD_PORT": "9000",
            "NOTESYNCD_INSTANCE": "12", "NOTESYNCD_BCRYPT_COST": "10", "NOTESYNCD_LOG_LEVEL": "DEBUG",
            "NOTESYNCD_DATABASE": "sqlite", "NOTESYNCD_MAX_BODY_BYTES": "1000000", "NOTESYNCD_MAX_NOTE_BYTES": "5000",
            "NOTESYNCD_MAX_BATCH": "77", "NOTESYNCD_MAX_PAGE": "300",
        ]
        let fromEnvironment = try NotesyncdCommand.parse([]).resolvedConfiguration(environment: environment)
        #expect(fromEnvironment.dataDirectory == "/env/data")
        #expect(fromEnvironment.host == "0.0.0.0")
        #expect(fromEnvironment.port == 9000)
        #expect(fromEnvironment.instance == 12)
        #expect(fromEnvironment.bcryptCost == 10)
        #expect(fromEnvironment.logLevel == .debug)
        #expect(fromEnvironment.limits == SyncLimits(maxBodyBytes: 1_000_000, maxNoteBytes: 5000, maxBatchChanges: 77, maxPageSize: 300, defaultPageSize: 300))

        let flags = try NotesyncdCommand.parse([
            "--data-dir", "/flag/data", "--host", "::1", "--port", "0", "--instance", "1023", "--bcrypt-cost", "4",
            "--log-level", "warning", "--database", "sqlite", "--max-body-bytes", "2048", "--max-note-bytes", "1024",
            "--max-batch", "5", "--max-page", "10",
        ]).resolvedConfiguration(environment: environment)
        #expect(flags.dataDirectory == "/flag/data")
        #expect(flags.host == "::1")
        #expect(flags.port == 0)
        #expect(flags.instance == 1023)
        #expect(flags.bcryptCost == 4)
        #expect(flags.logLevel == .warning)
        #expect(flags.limits == SyncLimits(maxBodyBytes: 2048, maxNoteBytes: 1024, maxBatchChanges: 5, maxPageSize: 10, defaultPageSize: 10))
    }

    @Test(arguments: [
        (["--instance", "1024"], [String: String]()),
        (["--bcrypt-cost", "3"], [:]),
        (["--port", "70000"], [:]),
        (["--log-level", "loud"], [:]),
        (["--database", "mysql://x"], [:]),
        (["--database", "postgres://localhost/notes"], [:]),
        ([], ["NOTESYNCD_PORT": "eighty"]),
        ([], ["NOTESYNCD_DATABASE": "postgresql://u:p@h/db", "NOTESYNCD_INSTANCE": "2"]),
        ([], ["NOTESYNCD_DATABASE": "postgresql://u:p@h/db?sslmode=sometimes"]),
        (["--max-page", "0"], [:]),
        (["--session-idle-days", "-1"], [:]),
        ([], ["NOTESYNCD_SESSION_IDLE_DAYS": "36501"]),
    ])
    func invalidValues(arguments: [String], environment: [String: String]) {
        // `parse` runs `validate()` (with the process environment); either step must refuse.
        #expect(throws: (any Error).self) {
            try NotesyncdCommand.parse(arguments).resolvedConfiguration(environment: environment)
        }
    }

    @Test func postgresOptions() throws {
        #expect(ServerConfiguration.Database(parsing: "postgres://u:p@h:5432/db") == .postgres(url: "postgres://u:p@h:5432/db"))
        #expect(ServerConfiguration.Database(parsing: "SQLite") == .sqlite)
        #expect(ServerConfiguration.Database(parsing: "mysql://h") == nil)
        let configuration = try NotesyncdCommand.parse([
            "--database", "postgres://me@h/db", "--instance-lease-seconds", "5", "--database-connections", "7",
        ]).resolvedConfiguration(environment: [:])
        #expect(configuration.database == .postgres(url: "postgres://me@h/db"))
        #expect(configuration.instanceLeaseSeconds == 5)
        #expect(configuration.databaseConnections == 7)
        let fromEnvironment = try NotesyncdCommand.parse([]).resolvedConfiguration(environment: [
            "NOTESYNCD_DATABASE": "postgresql://me@h/db", "NOTESYNCD_INSTANCE_LEASE_SECONDS": "9",
        ])
        #expect(fromEnvironment.database == .postgres(url: "postgresql://me@h/db"))
        #expect(fromEnvironment.instanceLeaseSeconds == 9)
        #expect(fromEnvironment.instanceLeaseSeconds == 9)
    }

    @Test(arguments: [
        (["--database", "postgres://me@h/db", "--instance", "3"], "leases its instance number"),
        (["--database", "postgres://h/db"], "names no user"),
        (["--database", "postgres://me:pw@h/db?sslmode=maybe"], "sslmode"),
        (["--database", "postgres://me@h/db", "--instance-lease-seconds", "0"], "instance lease"),
        (["--database", "postgres://me@h/db", "--database-connections", "0"], "connections"),
    ])
    func badPostgresOptionsAreRefusedClearly(_ arguments: [String], _ expected: String) throws {
        do {
            _ = try NotesyncdCommand.parse(arguments).resolvedConfiguration(environment: [:])
            Issue.record("\(arguments) must be refused")
        } catch {
            #expect("\(error)".contains(expected))
            #expect(!"\(error)".contains(":pw@"))
        }
    }
}

/// Issue 15, item 8: option errors are one line, and a negative number is a value, not a missing one.
@Suite("notesyncd option errors")
struct CommandErrorTests {
    /// Failed before: `--instance -1` was "Missing value for '--instance <instance>'", and every error printed the
    /// usage and a help hint after it (three or four lines).
    @Test(arguments: [
        (["--instance", "-1"], "instance must be 0...1023, got -1"),
        (["--port", "-5"], "port must be 0...65535, got -5"),
        (["--port", "eighty"], "eighty"),
        (["--bcrypt-cost", "3"], "bcrypt cost must be 4...31, got 3"),
        (["--no-such-flag"], "no-such-flag"),
        (["--port"], "--port"),
        (["--idle-timeout", "0"], "idle timeout must be 1...3600 seconds, got 0"),
        (["--read-timeout", "3601"], "read timeout must be 1...3600 seconds, got 3601"),
        (["--write-timeout", "-1"], "write timeout must be 1...3600 seconds, got -1"),
        (["--max-connections", "0"], "max connections must be 1...100000, got 0"),
    ])
    func everyOptionErrorIsOneLine(_ arguments: [String], _ expected: String) {
        do {
            _ = try NotesyncdCommand.parse(arguments).resolvedConfiguration(environment: [:])
            Issue.record("\(arguments) must be refused")
        } catch {
            let line = NotesyncdCommand.oneLine(for: error)
            #expect(line?.contains(expected) == true, "\(arguments): \(line ?? "nil")")
            #expect(line?.hasPrefix("notesyncd: ") == true)
            #expect(line?.contains("\n") == false)
            #expect(line?.contains("Usage") == false, "\(line ?? "")")
            #expect(NotesyncdCommand.exitCode(for: error).rawValue == 64, "\(arguments)")
        }
    }

    @Test func helpIsNotAnError() throws {
        do {
            _ = try NotesyncdCommand.parse(["--help"])
            Issue.record("--help must stop parsing")
        } catch {
            #expect(NotesyncdCommand.oneLine(for: error) == nil)
        }
    }

    @Test func connectionOptions() throws {
        let configuration = try NotesyncdCommand.parse([
            "--idle-timeout", "5", "--read-timeout", "6", "--write-timeout", "7", "--max-connections", "8",
        ]).resolvedConfiguration(environment: [:])
        #expect(configuration.timeouts == ConnectionTimeouts(idle: .seconds(5), read: .seconds(6), write: .seconds(7)))
        #expect(configuration.maxConnections == 8)
        let fromEnvironment = try NotesyncdCommand.parse([]).resolvedConfiguration(environment: [
            "NOTESYNCD_IDLE_TIMEOUT": "9", "NOTESYNCD_READ_TIMEOUT": "10", "NOTESYNCD_WRITE_TIMEOUT": "11", "NOTESYNCD_MAX_CONNECTIONS": "12",
        ])
        #expect(fromEnvironment.timeouts == ConnectionTimeouts(idle: .seconds(9), read: .seconds(10), write: .seconds(11)))
        #expect(fromEnvironment.maxConnections == 12)
        let defaults = ServerConfiguration()
        #expect(defaults.timeouts == ConnectionTimeouts())
        #expect(defaults.maxConnections == 1000)
    }
}

/// Issue 29, item 6: each option is declared once, in ``NotesyncdOption/all``; `--help` and Docs/OPERATIONS.md's
/// option table are checked against it.
@Suite("notesyncd options table")
struct NotesyncdOptionTableTests {
    /// Fails when OPERATIONS.md's table and the code disagree: a flag missing or extra, out of order, another
    /// variable, another default, or a range the row does not state.
    @Test func operationsOptionTableIsTheOptionsTable() throws {
        let text = try String(contentsOf: Binaries.packageRoot.appendingPathComponent("Docs/OPERATIONS.md"), encoding: .utf8)
        let rows = try MarkdownTable.rows(after: "## Running one daemon with SQLite", in: text)
        #expect(rows.map { MarkdownTable.code($0["flag"] ?? "") } == NotesyncdOption.all.map { "--\($0.flag)" })
        for (row, option) in zip(rows, NotesyncdOption.all) {
            #expect(MarkdownTable.code(row["environment"] ?? "") == option.variable, "--\(option.flag)")
            let documentedDefault = (row["default"] ?? "").replacingOccurrences(of: "`", with: "")
            #expect(
                documentedDefault == option.defaultText || documentedDefault.hasPrefix(option.defaultText + " ("),
                "--\(option.flag): the table says \(documentedDefault), the code \(option.defaultText)")
            if let range = option.rangeText {
                #expect(row["what"]?.contains(range) == true, "--\(option.flag): the table does not say \(range)")
            }
        }
    }

    /// Every option's help names its variable and default, and the defaults are the configuration's.
    @Test func helpStatesEachOptionsVariableAndDefault() throws {
        let help = NotesyncdCommand.helpMessage(columns: 10_000)
        for option in NotesyncdOption.all {
            #expect(help.contains("--\(option.flag) <"), "\(option.flag)")
            #expect(help.contains(option.help), "\(option.flag)")
        }
        // Every flag the command parses is an entry of the table (none declared beside it).
        let parsed = help.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ")
            guard words.count >= 2, words[0].hasPrefix("--"), words[1].hasPrefix("<") else { return nil }
            return String(words[0].dropFirst(2))
        }
        #expect(parsed == NotesyncdOption.all.map(\.flag))
        #expect(NotesyncdOption.port.help == "Port to listen on, 0 for any free port (NOTESYNCD_PORT; default 8080; 0–65535).")
        #expect(NotesyncdOption.dataDirectory.variable == "NOTESYNCD_DATA_DIR")
        // Each option's text sets the configuration, from the flag and from the variable alike.
        #expect(try NotesyncdCommand.parse(["--max-notes-per-account", "7"]).resolvedConfiguration(environment: [:]).quota.maxNotes == 7)
        #expect(
            try NotesyncdCommand.parse([]).resolvedConfiguration(environment: ["NOTESYNCD_MAX_WAITERS_PER_ACCOUNT": "9"]).live
                .maxWaitersPerAccount == 9)
    }
}
