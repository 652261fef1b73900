import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `notesyncd backup FILE`: a consistent copy of the live store, taken while the daemon runs and pushes go on.
///
/// - SQLite: SQLite's online backup API (``SQLiteNoteStore/backup(to:)``): `FILE` is a SQLite database of one
///   committed state, which passed `check` (``OperatorStore/checkInvariants()``) before it became `FILE`; the chunk
///   files its rows name are in `FILE.chunks/` (hard links when on the same file system: chunk files are never
///   rewritten; ``SQLiteNoteStore/backupChunks(intoCopy:directory:)``). Restore: stop the daemon, copy `FILE` to
///   `DATA_DIR/notesyncd.sqlite` (removing any `notesyncd.sqlite-wal` and `-shm` beside it) and `FILE.chunks` to
///   `DATA_DIR/chunks`, start the daemon (Docs/OPERATIONS.md).
/// - PostgreSQL: runs `pg_dump --format=custom` (one snapshot of the database), reads the whole archive back with
///   `pg_restore`, and checks the database; restore with `pg_restore` into an empty database (Docs/OPERATIONS.md).
///
/// The copy is written to a hidden temporary file beside `FILE` (``BackupFile``) and becomes `FILE` only once it is
/// complete, checked and on disk, so a failed backup leaves no `FILE` for a rotation to keep as if it were good. It
/// refuses an existing `FILE`. A failure is one stderr line and exit 1.
public struct BackupCommand: AsyncParsableCommand, OperatorCommand {
    public static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the live store to FILE without stopping the daemon (SQLite backup API, or pg_dump).",
        discussion: """
            The copy is checked before it is renamed to FILE: a backup that fails leaves no FILE. Restore: see \
            Docs/OPERATIONS.md, "Backup and restore". \(OperatorStoreOptions.help)
            """)
    @ParentCommand var daemon: NotesyncdCommand
    @Argument(help: "The new backup file (must not exist).") var file: String
    public init() {}

    public func run() async throws {
        let target = try BackupFile(file)
        let kind = try await target.write { partial in
            try await store.withStore { opened -> String in
                if let sqlite = opened.sqlite {
                    try await sqlite.backup(to: partial)
                    // The chunk files the copy's rows name, beside it (hard links on the same file system).
                    let chunks = try await sqlite.backupChunks(intoCopy: partial, directory: target.partialChunks)
                    let copy = try SQLiteNoteStore(path: partial, chunkDirectory: target.partialChunks)
                    let problems: [String]
                    do {
                        problems = try await copy.checkInvariants() + copy.checkChunks(.sample)
                    } catch {
                        try? await copy.close()
                        throw error
                    }
                    try await copy.close()
                    try target.refuse(problems, of: "the copy")
                    return "SQLite online backup, \(chunks) chunk\(chunks == 1 ? "" : "s") in \(target.chunks)"
                }
                if let url = opened.postgresURL {
                    try PostgresDump.dump(url: url, to: partial)
                    try PostgresDump.verify(archive: partial)
                    // pg_dump's snapshot is its own; the database is checked right after it.
                    try target.refuse(try await opened.store.checkInvariants(), of: "the database")
                    return "pg_dump, custom format"
                }
                throw OperatorError("this store cannot be backed up")
            }
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int64) ?? 0
        OperatorOutput.line("backed up to \(file) (\(size) bytes, \(kind))")
    }
}

/// Where a backup is written: a hidden temporary file beside its destination (`.NAME.partial-UUID`, on the same file
/// system), which becomes the destination only once complete, checked and fsynced. The destination is linked to it
/// (`link(2)` never replaces a file, so one made meanwhile is not overwritten), then the temporary name is removed
/// and the directory fsynced. On any failure the temporary file (with any `-wal`, `-shm` or `-journal` beside it)
/// is removed and the destination is never created.
///
/// A SQLite backup's chunk files go to a directory beside it (``chunks``, `NAME.chunks`), written as
/// ``partialChunks`` and renamed to ``chunks`` just before the destination is linked: a destination that exists is
/// complete, chunks included.
struct BackupFile {
    /// The backup's path, as given.
    let path: String
    let directory: String
    let partial: String
    /// The chunk directory of a SQLite backup (`FILE.chunks`), and its temporary name.
    let chunks: String
    let partialChunks: String

    /// - Throws: ``OperatorError`` when `path` exists or its directory does not.
    init(_ path: String) throws {
        self.path = path
        let url = URL(fileURLWithPath: path)
        directory = url.deletingLastPathComponent().path
        partial = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).partial-\(UUID().uuidString)").path
        chunks = path + ".chunks"
        partialChunks = partial + ".chunks"
        guard !FileManager.default.fileExists(atPath: path) else { throw OperatorError("\(path) already exists; choose a new file") }
        guard !FileManager.default.fileExists(atPath: chunks) else { throw OperatorError("\(chunks) already exists; choose a new file") }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw OperatorError("no directory \(directory) for \(path)")
        }
    }

    /// Runs `body` with the temporary path to write, then makes it the backup; removes it if anything fails.
    func write<T>(_ body: (String) async throws -> T) async throws -> T {
        do {
            let value = try await body(partial)
            try publish()
            return value
        } catch {
            for suffix in ["", "-wal", "-shm", "-journal"] { unlink(partial + suffix) }
            try? FileManager.default.removeItem(atPath: partialChunks)
            throw error
        }
    }

    /// Throws when `problems` (what `check` found in `what`) is not empty, in one line naming the first.
    func refuse(_ problems: [String], of what: String) throws {
        guard let first = problems.first else { return }
        throw OperatorError(
            "\(what) fails its check (\(problems.count) problem\(problems.count == 1 ? "" : "s"), the first: \(first)); "
                + "\(path) not written; 'notesyncd check' lists them")
    }

    private func publish() throws {
        try Self.flush(partial)
        if FileManager.default.fileExists(atPath: partialChunks) {
            guard rename(partialChunks, chunks) == 0 else {
                throw OperatorError("cannot name the backup's chunks \(chunks): \(String(cString: strerror(errno)))")
            }
            try Self.flush(directory)
        }
        guard link(partial, path) == 0 else {
            let code = errno
            if code == EEXIST { throw OperatorError("\(path) already exists; choose a new file") }
            throw OperatorError("cannot name the backup \(path): \(String(cString: strerror(code)))")
        }
        unlink(partial)
        try Self.flush(directory)
    }

    /// Flushes a file's (or a directory's entries') data to disk.
    static func flush(_ path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw OperatorError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw OperatorError("cannot flush \(path): \(String(cString: strerror(errno)))") }
    }
}

/// Runs `pg_dump` for a `postgres://` URL, the password passed in `PGPASSWORD` rather than on the command line, and
/// `pg_restore` to read its archive back.
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
        try run("pg_dump", ["--format=custom", "--no-owner", "--file", file, "--dbname", target], environment: environment)
    }

    /// Reads the whole archive (every table's data) as a restore would, into nothing: a truncated or unreadable
    /// dump fails here.
    static func verify(archive file: String) throws {
        try run("pg_restore", ["--file", "/dev/null", file], environment: ProcessInfo.processInfo.environment)
    }

    /// Runs a PostgreSQL client program from the `PATH`; throws its first stderr line when it fails.
    private static func run(_ program: String, _ arguments: [String], environment: [String: String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [program] + arguments
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw OperatorError("cannot run \(program) (install postgresql-client): \(error)")
        }
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: message, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            throw OperatorError("\(program) failed (status \(process.terminationStatus)): \(text)")
        }
    }
}
