import Foundation
import GRDB
import MiniFlake
import NIOCore
import NIOPosix
import NoteSyncProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The SQLite store's chunks: rows in `chunks`, bytes in files under the data directory.
///
/// Layout: `chunks/<account>/<ab>/<hash>`, `ab` being the hash's first two digits (256 directories per account, so
/// a terabyte of one account's chunks is about 4,000 files a directory), and `chunks/.incoming/` for bodies being
/// received. A directory per account keeps accounts apart on disk too: a chunk is never shared between accounts (its
/// write time would tell one account that another has it), and deleting an account removes one directory.
///
/// Durability, in this order, before a new chunk's 201:
/// 1. the body is written to `.incoming/<random>` as it arrives (hashed on the way) and fsynced;
/// 2. in the write transaction (which serializes every writer of the database): the row is looked up (present: the
///    file is dropped, 200), the account's byte limit checked, the file renamed to its place and its directory
///    fsynced (a new `<ab>` directory's parent too), then the row inserted and `chunk_bytes` raised; the commit is
///    synced (`synchronous = FULL`).
///
/// A crash leaves at most a file without a row (in `.incoming/`, or in place when the commit did not happen), never
/// a row without its file. The collector removes `.incoming/` files older than an hour; `notesyncd check` lists a
/// file in place that no row names.
extension SQLiteNoteStore: ChunkStore {
    /// Files being received.
    static let incomingDirectoryName = ".incoming"

    /// The account's directory.
    func chunkDirectory(accountID: FlakeID) -> URL {
        chunkDirectory.appendingPathComponent(String(accountID.rawValue), isDirectory: true)
    }

    /// Where the account's chunk `hash` lives.
    func chunkFile(accountID: FlakeID, hash: ContentHash) -> URL {
        chunkDirectory(accountID: accountID).appendingPathComponent(String(hash.hex.prefix(2)), isDirectory: true)
            .appendingPathComponent(hash.hex)
    }

    public func missingChunks(accountID: FlakeID, among hashes: [ContentHash], now: Int64) async throws -> [ContentHash] {
        let unique = Self.unique(hashes)
        guard !unique.isEmpty else { return [] }
        let present = try await read { db in
            try Set(
                String.fetchAll(
                    db, sql: "SELECT hash FROM chunks WHERE account_id = ? AND hash IN (\(Self.placeholders(unique.count)))",
                    arguments: StatementArguments([accountID.rawValue] + unique.map(\.hex))))
        }
        if !present.isEmpty {
            // Referenced again: the client will refer to these rather than send them.
            let touched = Array(present)
            try await write { db in
                try db.execute(
                    sql: "UPDATE chunks SET referenced_at = MAX(referenced_at, ?) WHERE account_id = ? AND hash IN (\(Self.placeholders(touched.count)))",
                    arguments: StatementArguments([now, accountID.rawValue] + touched))
            }
        }
        return unique.filter { !present.contains($0.hex) }
    }

    public func chunkSize(accountID: FlakeID, hash: ContentHash) async throws -> Int? {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT size FROM chunks WHERE account_id = ? AND hash = ?", arguments: [accountID.rawValue, hash.hex])
        }
    }

    public func storeChunk(
        accountID: FlakeID, hash: ContentHash, body: some AsyncSequence<ByteBuffer, any Error>, byteLimit: Int64, now: Int64
    ) async throws -> ChunkWrite {
        if let size = try await chunkSize(accountID: accountID, hash: hash) { return .existed(size: size) }
        let incoming = chunkDirectory.appendingPathComponent(Self.incomingDirectoryName, isDirectory: true)
        let temporary = incoming.appendingPathComponent(UUID().uuidString).path
        let file = try await Self.blocking {
            try ChunkFiles.makeDirectories(incoming.path)
            return try ChunkFiles.create(temporary)
        }
        let size: Int
        do {
            size = try await ChunkReceiver.receive(body, expected: hash) { piece in
                try await Self.blocking { try file.write(piece) }
            }
            try await Self.blocking { try file.sync() }
            file.close()
        } catch {
            file.close()
            unlink(temporary)
            throw error
        }
        let destination = chunkFile(accountID: accountID, hash: hash)
        let account = accountID.rawValue
        do {
            let outcome: ChunkWrite = try await write { db in
                if let stored = try Int.fetchOne(
                    db, sql: "SELECT size FROM chunks WHERE account_id = ? AND hash = ?", arguments: [account, hash.hex])
                {
                    unlink(temporary)
                    return .existed(size: stored)
                }
                guard let storedBytes = try Int64.fetchOne(
                    db, sql: "SELECT \(ChunkQueries.storedBytes) FROM accounts WHERE id = ?", arguments: [account])
                else { throw NoteStoreError.accountNotFound }
                guard storedBytes + Int64(size) <= byteLimit else {
                    throw ChunkStoreError.quotaExceeded(wouldStore: storedBytes + Int64(size), limit: byteLimit)
                }
                try ChunkFiles.place(temporary, at: destination, root: self.chunkDirectory)
                try db.execute(
                    sql: "INSERT INTO chunks (account_id, hash, size, created_at, referenced_at) VALUES (?, ?, ?, ?, ?)",
                    arguments: [account, hash.hex, size, now, now])
                try db.execute(sql: "UPDATE accounts SET chunk_bytes = chunk_bytes + ? WHERE id = ?", arguments: [size, account])
                return .created(size: size)
            }
            return outcome
        } catch {
            unlink(temporary)  // when it was not placed; a placed file without its row is harmless (check lists it)
            throw error
        }
    }

    public func readChunk(accountID: FlakeID, hash: ContentHash) async throws -> ChunkContent? {
        guard let size = try await chunkSize(accountID: accountID, hash: hash) else { return nil }
        let path = chunkFile(accountID: accountID, hash: hash).path
        // Opened now, so that a collection after this answer began cannot take the bytes away mid-answer.
        let file = try await Self.blocking { try ChunkFiles.open(path) }
        return ChunkContent(size: size) { body in
            defer { file.close() }
            while true {
                let piece = try await Self.blocking { try file.read(upTo: 64 << 10) }
                guard let piece else { return }
                try await body(piece)
            }
        }
    }

    public func collectChunks(references: any ChunkReferences, unreferencedSince cutoff: Int64, now: Int64, batch: Int) async throws
        -> CollectedChunks
    {
        var collected = CollectedChunks()
        var after: (Int64, String) = (0, "")
        while true {
            // The candidates in key order from where the last round stopped, so that kept ones are not read again.
            let from = after
            let candidates = try await read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT account_id, hash FROM chunks WHERE referenced_at < ? AND (account_id, hash) > (?, ?)
                        ORDER BY account_id, hash LIMIT ?
                        """, arguments: [cutoff, from.0, from.1, batch]
                ).map { (row: Row) -> (Int64, String) in (row[0], row[1]) }
            }
            guard let last = candidates.last else { break }
            after = last
            for (account, hashes) in Dictionary(grouping: candidates, by: { $0.0 }) {
                let accountID = try flake(account)
                let all = hashes.compactMap { ContentHash($0.1) }
                let referenced = try await references.referencedChunks(accountID: accountID, among: all)
                let garbage = all.filter { !referenced.contains($0) }
                let deleted = try await write { db -> [(String, Int64)] in
                    if !referenced.isEmpty {
                        try db.execute(
                            sql: "UPDATE chunks SET referenced_at = ? WHERE account_id = ? AND hash IN (\(Self.placeholders(referenced.count)))",
                            arguments: StatementArguments([now, account] + referenced.map(\.hex)))
                    }
                    guard !garbage.isEmpty else { return [] }
                    let rows = try Row.fetchAll(
                        db,
                        sql: """
                            DELETE FROM chunks WHERE account_id = ? AND referenced_at < ? AND hash IN (\(Self.placeholders(garbage.count)))
                            RETURNING hash, size
                            """, arguments: StatementArguments([account, cutoff] + garbage.map(\.hex)))
                    let freed = rows.reduce(Int64(0)) { $0 + ($1[1] as Int64) }
                    try db.execute(sql: "UPDATE accounts SET chunk_bytes = chunk_bytes - ? WHERE id = ?", arguments: [freed, account])
                    return rows.map { ($0[0], $0[1]) }
                }
                // After the commit: a crash here leaves files without rows, never rows without files.
                for (hex, size) in deleted {
                    if let hash = ContentHash(hex) { unlink(chunkFile(accountID: accountID, hash: hash).path) }
                    collected.chunks += 1
                    collected.bytes += size
                }
            }
            if candidates.count < batch { break }
        }
        try await Self.blocking { ChunkFiles.removeStale(in: self.chunkDirectory.appendingPathComponent(Self.incomingDirectoryName).path, olderThan: 3600) }
        return collected
    }

    public func referencedChunks(accountID: FlakeID, among hashes: [ContentHash]) async throws -> Set<ContentHash> {
        try await read { db in
            let texts = try String.fetchAll(
                db, sql: ChunkQueries.accountReferences.replacingOccurrences(of: "$1", with: "?1"), arguments: [accountID.rawValue])
            return ChunkQueries.referenced(hashes, by: texts)
        }
    }

    public func checkChunks(_ verification: ChunkVerification) async throws -> [String] {
        var problems = try await read { db in
            var problems = try String.fetchAll(db, sql: ChunkQueries.runningTotal).map { "chunk running total: \($0)" }
            let references = try Row.fetchAll(db, sql: ChunkQueries.allReferences).map { (row: Row) in
                (what: row[0] as String, account: row[1] as Int64, refs: row[2] as String)
            }
            if !references.isEmpty {
                let stored = Set(try Row.fetchAll(db, sql: "SELECT account_id, hash FROM chunks").map { "\($0[0] as Int64)/\($0[1] as String)" })
                problems += ChunkQueries.absentChunks(references, stored: stored)
            }
            return problems
        }
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT account_id, hash, size FROM chunks ORDER BY account_id, hash").map {
                (row: Row) -> (Int64, String, Int64) in (row[0], row[1], row[2])
            }
        }
        let sampled: Set<Int> =
            verification == .all
            ? Set(rows.indices) : Set(rows.indices.shuffled().prefix(ChunkVerification.sampleSize))
        var named = Set<String>()
        for (index, (account, hex, size)) in rows.enumerated() {
            guard let accountID = try? flake(account), let hash = ContentHash(hex) else {
                problems.append("chunk \(hex) of account \(account): not a valid account ID and SHA-256 hash")
                continue
            }
            let path = chunkFile(accountID: accountID, hash: hash).path
            named.insert(path)
            let problem = try await Self.blocking { () -> String? in
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                    let stored = (attributes[.size] as? NSNumber)?.int64Value
                else { return "its file \(path) is missing" }
                guard stored == size else { return "its file \(path) holds \(stored) bytes, not \(size)" }
                guard sampled.contains(index) else { return nil }
                let actual = try ChunkFiles.hash(path)
                return actual == hash ? nil : "its file \(path) hashes to \(actual)"
            }
            if let problem { problems.append("chunk \(hex) of account \(account): \(problem)") }
        }
        if problems.count < 1000 {
            let root = chunkDirectory.path
            for path in try await Self.blocking({ ChunkFiles.chunkFiles(under: root) }) where !named.contains(path) {
                problems.append("chunk file \(path) is named by no row (left by an interrupted upload or collection; it may be removed)")
            }
        }
        return problems
    }

    public func chunkStatistics() async throws -> ChunkStatistics {
        try await read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM chunks")!
            return ChunkStatistics(chunks: row[0], bytes: row[1])
        }
    }

    /// Removes the account's chunk files (after its rows went with the account).
    func removeChunkFiles(accountID: FlakeID) {
        try? FileManager.default.removeItem(at: chunkDirectory(accountID: accountID))
    }

    /// Copies the chunk files the database at `copy` names (a backup just taken) into `directory`, in this store's
    /// layout: hard links when `directory` is on the same file system (chunk files are never rewritten, only
    /// created and removed), else copies; each file and directory fsynced. A chunk collected since the copy was taken
    /// (its file gone) is removed from the copy with its bytes, as if collected before. Returns the chunks copied.
    func backupChunks(intoCopy copy: String, directory: String) async throws -> Int {
        // Made even when there is no chunk, so that a restore always has a directory to copy.
        try await Self.blocking { try ChunkFiles.makeDirectories(directory) }
        let database = try DatabaseQueue(path: copy)
        defer { try? database.close() }
        let rows = try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT account_id, hash, size FROM chunks").map { (row: Row) -> (Int64, String, Int64) in
                (row[0], row[1], row[2])
            }
        }
        let target = URL(fileURLWithPath: directory, isDirectory: true)
        var gone: [(Int64, String, Int64)] = []
        for (account, hex, size) in rows {
            guard let accountID = try? flake(account), let hash = ContentHash(hex) else { continue }
            let source = chunkFile(accountID: accountID, hash: hash)
            let relative = source.path.dropFirst(chunkDirectory.path.count)
            let destination = target.path + relative
            let copied = try await Self.blocking { try ChunkFiles.linkOrCopy(source.path, to: destination, root: directory) }
            if !copied { gone.append((account, hex, size)) }
        }
        if !gone.isEmpty {
            let collected = gone
            try await database.write { db in
                for (account, hex, size) in collected {
                    try db.execute(sql: "DELETE FROM chunks WHERE account_id = ? AND hash = ?", arguments: [account, hex])
                    try db.execute(sql: "UPDATE accounts SET chunk_bytes = chunk_bytes - ? WHERE id = ?", arguments: [size, account])
                }
            }
        }
        try await Self.blocking { try ChunkFiles.syncTree(directory) }
        return rows.count - gone.count
    }

    // MARK: - Helpers

    /// Runs blocking file work on NIO's thread pool, off the cooperative threads.
    static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }

    static func unique(_ hashes: [ContentHash]) -> [ContentHash] {
        var seen = Set<ContentHash>()
        return hashes.filter { seen.insert($0).inserted }
    }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}

/// A system call on a chunk file or directory failed: the call, the path and the system's reason.
struct ChunkFileError: Error, CustomStringConvertible {
    let description: String
}

/// The POSIX file work of the SQLite store's chunks: one open file, and the steps that make a file durable.
enum ChunkFiles {
    /// An open file descriptor, closed once.
    final class File: @unchecked Sendable {
        let descriptor: Int32
        let path: String
        private var closed = false

        init(descriptor: Int32, path: String) {
            self.descriptor = descriptor
            self.path = path
        }

        func write(_ buffer: ByteBuffer) throws {
            try buffer.withUnsafeReadableBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = systemWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw failure("write", path)
                    }
                    offset += written
                }
            }
        }

        /// The next piece of at most `limit` bytes, nil at the end.
        func read(upTo limit: Int) throws -> ByteBuffer? {
            var buffer = ByteBufferAllocator().buffer(capacity: limit)
            let count = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: limit) { bytes in
                while true {
                    let count = systemRead(descriptor, bytes.baseAddress!, limit)
                    if count < 0 && errno == EINTR { continue }
                    if count < 0 { throw failure("read", path) }
                    return count
                }
            }
            return count == 0 ? nil : buffer
        }

        func sync() throws {
            guard fsync(descriptor) == 0 else { throw failure("fsync", path) }
        }

        func close() {
            guard !closed else { return }
            closed = true
            _ = systemClose(descriptor)
        }

        deinit { close() }
    }

    static func failure(_ call: String, _ path: String) -> any Error {
        ChunkFileError(description: "\(call) \(path): \(String(cString: strerror(errno)))")
    }

    static func create(_ path: String) throws -> File {
        let descriptor = systemOpen(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("open", path) }
        return File(descriptor: descriptor, path: path)
    }

    static func open(_ path: String) throws -> File {
        let descriptor = systemOpen(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("open", path) }
        return File(descriptor: descriptor, path: path)
    }

    /// fsyncs a directory's entries.
    static func syncDirectory(_ path: String) throws {
        let descriptor = systemOpen(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("open", path) }
        defer { _ = systemClose(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("fsync", path) }
    }

    /// `mkdir -p` (mode 0700); each directory it makes has its parent fsynced, so that it survives a crash.
    static func makeDirectories(_ path: String) throws {
        var missing: [String] = []
        var current = path
        while !current.isEmpty, current != "/", access(current, F_OK) != 0 {
            missing.append(current)
            current = (current as NSString).deletingLastPathComponent
        }
        for directory in missing.reversed() {
            if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw failure("mkdir", directory) }
            try syncDirectory((directory as NSString).deletingLastPathComponent)
        }
    }

    /// Renames the complete, fsynced file at `temporary` to `destination` and fsyncs its directory (made first if
    /// needed, under `root`).
    static func place(_ temporary: String, at destination: URL, root: URL) throws {
        let directory = destination.deletingLastPathComponent().path
        try makeDirectories(directory)
        guard rename(temporary, destination.path) == 0 else { throw failure("rename", destination.path) }
        try syncDirectory(directory)
    }

    /// The SHA-256 of a file's bytes, read 64 KiB at a time.
    static func hash(_ path: String) throws -> ContentHash {
        let file = try open(path)
        defer { file.close() }
        var pieces: [ByteBuffer] = []
        while let piece = try file.read(upTo: 64 << 10) { pieces.append(piece) }
        return ChunkReceiver.hash(pieces)
    }

    /// Every chunk file under `root` (`<account>/<ab>/<hash>`), `.incoming` left out.
    static func chunkFiles(under root: String) -> [String] {
        let manager = FileManager.default
        var files: [String] = []
        for account in (try? manager.contentsOfDirectory(atPath: root)) ?? [] where account != SQLiteNoteStore.incomingDirectoryName {
            let accountPath = root + "/" + account
            for prefix in (try? manager.contentsOfDirectory(atPath: accountPath)) ?? [] {
                let prefixPath = accountPath + "/" + prefix
                for name in (try? manager.contentsOfDirectory(atPath: prefixPath)) ?? [] { files.append(prefixPath + "/" + name) }
            }
        }
        return files
    }

    /// Removes the files of `directory` last modified more than `age` seconds ago (bodies whose upload died).
    static func removeStale(in directory: String, olderThan age: Int) {
        let limit = Date(timeIntervalSinceNow: -Double(age))
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            let path = directory + "/" + name
            if let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date, modified < limit {
                unlink(path)
            }
        }
    }

    /// Makes `destination` (under `root`) a hard link to `source`, or a copy when they are on different file
    /// systems; false when `source` is gone.
    static func linkOrCopy(_ source: String, to destination: String, root: String) throws -> Bool {
        try makeDirectories((destination as NSString).deletingLastPathComponent)
        if link(source, destination) == 0 { return true }
        if errno == ENOENT { return false }
        guard errno == EXDEV || errno == EPERM else { throw failure("link", destination) }
        let input = try open(source)
        defer { input.close() }
        let output = try create(destination)
        defer { output.close() }
        while let piece = try input.read(upTo: 64 << 10) { try output.write(piece) }
        try output.sync()
        return true
    }

    /// fsyncs every file and directory under `root`, and `root` itself.
    static func syncTree(_ root: String) throws {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return }
        var directories = [root]
        while let relative = walker.nextObject() as? String {
            let path = root + "/" + relative
            guard let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType else { continue }
            if type == .typeDirectory {
                directories.append(path)
            } else {
                let file = try open(path)
                defer { file.close() }
                try file.sync()
            }
        }
        for directory in directories { try syncDirectory(directory) }
    }
}

// The system calls under the names `File` shadows with its own methods.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(descriptor, bytes, count) }
private func systemRead(_ descriptor: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int { read(descriptor, bytes, count) }
private func systemClose(_ descriptor: Int32) -> Int32 { close(descriptor) }
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 { open(path, flags, mode) }
