import ArgumentParser
import Foundation

/// `notesyncd backup FILE`: a consistent copy of the live store, taken while the daemon runs and pushes go on.
///
/// - SQLite: SQLite's online backup API (``SQLiteNoteStore/backup(to:)``): `FILE` is a SQLite database of one
///   committed state. Restore: stop the daemon, copy `FILE` to `DATA_DIR/notesyncd.sqlite` (removing any
///   `notesyncd.sqlite-wal` and `-shm` beside it), start the daemon (Docs/OPERATIONS.md).
/// - PostgreSQL: runs `pg_dump --format=custom` (one snapshot of the database); restore with `pg_restore` into an
///   empty database (Docs/OPERATIONS.md).
///
/// Refuses an existing `FILE`; after a SQLite backup, runs `PRAGMA integrity_check` on the copy.
public struct BackupCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the live store to FILE without stopping the daemon (SQLite backup API, or pg_dump).",
        discussion: "Restore: see Docs/OPERATIONS.md, \"Backup and restore\". " + OperatorStoreOptions.help)
    @ParentCommand var daemon: NotesyncdCommand
    var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
    @Argument(help: "The new backup file (must not exist).") var file: String
    public init() {}

    public func run() async throws {
        guard !FileManager.default.fileExists(atPath: file) else {
            throw OperatorError("\(file) already exists; choose a new file")
        }
        let kind = try await store.withStore { opened -> String in
            if let sqlite = opened.sqlite {
                try await sqlite.backup(to: file)
                let copy = try SQLiteNoteStore(path: file)
                let problems = try await copy.checkInvariants()
                guard problems.isEmpty else {
                    throw OperatorError("the copy at \(file) is not consistent: \(problems[0])")
                }
                try await copy.close()
                return "SQLite online backup"
            }
            if let url = opened.postgresURL {
                try PostgresDump.dump(url: url, to: file)
                return "pg_dump, custom format"
            }
            throw OperatorError("this store cannot be backed up")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int64) ?? 0
        OperatorOutput.line("backed up to \(file) (\(size) bytes, \(kind))")
    }
}

/// Runs `pg_dump` for a `postgres://` URL, the password passed in `PGPASSWORD` rather than on the command line.
enum PostgresDump {
    static func dump(url: String, to file: String) throws {
        var environment = ProcessInfo.processInfo.environment
        var target = url
        if var components = URLComponents(string: url.replacingOccurrences(of: "postgresql://", with: "postgres://")) {
            if let password = components.password {
                environment["PGPASSWORD"] = password
                components.password = nil
            }
            target = components.string ?? url
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["pg_dump", "--format=custom", "--no-owner", "--file", file, "--dbname", target]
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw OperatorError("cannot run pg_dump (install postgresql-client): \(error)")
        }
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            try? FileManager.default.removeItem(atPath: file)
            let text = String(decoding: message, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            throw OperatorError("pg_dump failed (status \(process.terminationStatus)): \(text)")
        }
    }
}
