import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NoteSyncServer

/// Issue 32's proof that the server never holds an encrypted account's plaintext: every word an encrypted account's
/// notes are made of (each line's token, each tag) is a canary word, and the server's store is scanned for them.
public enum Canary {
    /// How every canary word begins: ten lowercase letters that no plaintext account's word (`t12`, `g7`), no fixed
    /// string of the system and no ciphertext holds (a given position of random base64 text spells them with
    /// probability 64⁻¹⁰, about 10⁻¹⁸). Scanning for it finds every canary word at once.
    public static let marker = "qzcanaryxv"

    /// The canary word of a schedule's token or tag: the marker, then the token, case kept (a tag added as `g7` on
    /// one device and `G7` on another is still one tag: `qzcanaryxvg7` and `qzcanaryxvG7` share their key).
    public static func word(_ token: String) -> String { marker + token }

    /// `text` with every canary word back to its token (`qzcanaryxvt12` → `t12`), for names in reports.
    public static func unmarked(_ text: String) -> String { text.replacingOccurrences(of: marker, with: "") }

    /// Whether `text` holds a canary word.
    public static func isIn(_ text: String) -> Bool { text.contains(marker) }
}

/// A canary word found in a file of the server's store.
public struct CanaryHit: Sendable, Equatable, CustomStringConvertible {
    /// The file's name (not its directory: the store's directory is a temporary one).
    public var file: String
    /// Where the word begins, in bytes from the start of the file.
    public var offset: Int
    /// The word as found: the marker and the letters and digits after it (at most 40 bytes in all).
    public var word: String

    public var description: String { "'\(word)' in \(file) at byte \(offset)" }
}

/// The scan of a server's store for canary words (see ``Canary``).
public enum StoreScan {
    /// What a scan read and found.
    public struct Result: Sendable, Equatable {
        public var hits: [CanaryHit] = []
        /// The bytes read, over every file.
        public var bytes = 0
    }

    /// The files an SQLite store at `path` writes: the database, its write-ahead log and the log's index (`-shm`,
    /// which holds no row but is read anyway: it is part of what a copy of the directory holds).
    public static func sqliteFiles(of path: String) -> [String] { [path, path + "-wal", path + "-shm"] }

    /// Everything a daemon's SQLite store at `path` holds now: ``sqliteFiles(of:)`` and every file under its chunk
    /// directory (`chunks/` beside the database: attachment chunks, issue 33, and the bodies being received in
    /// `chunks/.incoming/`), listed when called, since chunks come and go as the run goes on.
    public static func sqliteStoreFiles(of path: String) -> [String] {
        let chunks = URL(fileURLWithPath: path).deletingLastPathComponent()
            .appendingPathComponent(SQLiteNoteStore.chunkDirectoryName, isDirectory: true)
        return sqliteFiles(of: path) + files(under: chunks)
    }

    /// The regular files under `directory`, recursively (hidden ones too), sorted; none when it does not exist.
    ///
    /// Read with `readdir`, whose entries say their type: Foundation's enumerator made a URL and read its resource
    /// values for every entry, 2 % of a whole run's CPU (the scan runs after every server restart).
    static func files(under directory: URL) -> [String] {
        var found: [String] = []
        var pending = [directory.path]
        while let path = pending.popLast() {
            guard let stream = opendir(path) else { continue }
            defer { closedir(stream) }
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name == "." || name == ".." { continue }
                let child = path + "/" + name
                var type = Int32(entry.pointee.d_type)
                if type == Int32(DT_UNKNOWN) {  // the file system does not say: ask
                    var isDirectory: ObjCBool = false
                    guard FileManager.default.fileExists(atPath: child, isDirectory: &isDirectory) else { continue }
                    type = isDirectory.boolValue ? Int32(DT_DIR) : Int32(DT_REG)
                }
                if type == Int32(DT_DIR) {
                    pending.append(child)
                } else if type == Int32(DT_REG) {
                    found.append(child)
                }
            }
        }
        return found.sorted()
    }

    /// Reads each file whole (a missing one is skipped: the WAL is gone after a checkpoint on close) and finds every
    /// occurrence of ``Canary/marker``, at most `limit` hits in all.
    public static func scan(files: [String], limit: Int = 20) throws -> Result {
        var result = Result()
        let marker = Array(Canary.marker.utf8)
        for path in files {
            guard FileManager.default.fileExists(atPath: path) else { continue }
            // Mapped, not copied: the scan runs between steps, while nothing writes the store.
            let data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
            result.bytes += data.count
            let name = URL(fileURLWithPath: path).lastPathComponent
            for offset in occurrences(of: marker, in: data) {
                guard result.hits.count < limit else { return result }
                let word = data[data.startIndex + offset..<data.startIndex + min(data.count, offset + 40)]
                    .prefix { byte in (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) }
                result.hits.append(CanaryHit(file: name, offset: offset, word: String(decoding: word, as: UTF8.self)))
            }
        }
        return result
    }

    /// Dumps the tables of the PostgreSQL database at `url` (`pg_dump --data-only`: every row of every table as
    /// text, bytea as hex) into a temporary file and scans it as ``scan(files:limit:)`` does; the hits name the file
    /// `pg_dump of <database>`. Rows a delete or an update left behind in the table files until VACUUM are not in a
    /// dump (SECURITY.md says what that means for backups and the disk).
    public static func scanPostgres(_ url: String, limit: Int = 20) throws -> Result {
        let dump = FileManager.default.temporaryDirectory.appendingPathComponent("notes-sim-dump-\(UUID().uuidString).sql")
        defer { try? FileManager.default.removeItem(at: dump) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["pg_dump", "--data-only", "--no-owner", "--no-privileges", "--file", dump.path, "--dbname", url]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw StoreScanError("pg_dump failed (status \(process.terminationStatus)): \(String(decoding: message, as: UTF8.self))")
        }
        return try scanDump(dump.path, name: "pg_dump of " + (URL(string: url)?.lastPathComponent ?? "the database"), limit: limit)
    }

    /// Scans a `pg_dump` of the database at `path` (hits named `name`): as ``scan(files:limit:)`` does, and for the
    /// marker spelled in hexadecimal, which is how a dump writes `bytea` (attachment chunks in `chunk_data`, issue 33:
    /// `\x` then two lowercase digits a byte); such a hit's word is decoded back from its digits.
    static func scanDump(_ path: String, name: String, limit: Int = 20) throws -> Result {
        var result = try scan(files: [path], limit: limit)
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let hexMarker = Array(Canary.marker.utf8.map { String(format: "%02x", $0) }.joined().utf8)
        for offset in occurrences(of: hexMarker, in: data) where result.hits.count < limit {
            let digits = data[data.startIndex + offset..<data.startIndex + min(data.count, offset + 80)]
            var word: [UInt8] = []
            var pairs = digits.makeIterator()
            while let high = pairs.next(), let low = pairs.next(), let byte = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16),
                (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
            {
                word.append(byte)
            }
            result.hits.append(CanaryHit(file: path, offset: offset, word: String(decoding: word, as: UTF8.self)))
        }
        for index in result.hits.indices { result.hits[index].file = name }
        return result
    }

    /// The offsets at which `needle` begins in `data`, in order (occurrences do not overlap: the marker cannot).
    static func occurrences(of needle: [UInt8], in data: Data) -> [Int] {
        guard let first = needle.first, data.count >= needle.count else { return [] }
        var found: [Int] = []
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            let bytes = buffer.bindMemory(to: UInt8.self)
            var index = 0
            let last = bytes.count - needle.count
            while index <= last {
                // memchr for the first byte, then compare the rest: the marker's first byte is rare in a store.
                guard let hit = memchr(bytes.baseAddress! + index, Int32(first), last - index + 1) else { break }
                let at = bytes.baseAddress!.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                if memcmp(bytes.baseAddress! + at, needle, needle.count) == 0 {
                    found.append(at)
                    index = at + needle.count
                } else {
                    index = at + 1
                }
            }
        }
        return found
    }
}

/// An encrypted account's keys as the simulation holds them: it signs the account up itself (as `notes signup`
/// does, at ``KDFCost/insecureForTesting`` under ``KDFPolicy/allowInsecureForTesting``), so its auditor can open what
/// the server serves of the account, as a device of it would, and check it against the devices.
struct SimAccountKeys {
    var ring: AccountKeyRing
    /// The password's AuthKey in its wire form: the auditor's and the devices' credential.
    var serverPassword: String

    /// Generation 1 of a new account `accountID` and the sign-up's key material (the recovery key is made and
    /// dropped: the simulation never recovers).
    static func generate(accountID: FlakeID, password: String) throws -> (SimAccountKeys, EncryptionSetup) {
        let parameters = KDFParameters.generate(cost: .insecureForTesting)
        let derived = try PasswordKDF.deriveKeys(password: password, parameters: parameters, policy: .allowInsecureForTesting)
        let key = AccountKey.generate(account: accountID)
        let recovery = RecoveryKey.generate()
        let setup = EncryptionSetup(
            accountID: accountID,
            kdf: KDFInfo(
                salt: parameters.saltText, opsLimit: Int64(parameters.cost.opsLimit), memLimit: Int64(parameters.cost.memLimitBytes)),
            wrappedKey: key.wrapped(by: derived.wrapKey).text, recoveryWrappedKey: key.wrapped(by: recovery).text,
            recoveryPublicKey: recovery.publicKey.text, passwordPublicKey: derived.passwordKeyPair.publicKey.text)
        return (SimAccountKeys(ring: AccountKeyRing(key), serverPassword: derived.authKey.serverPassword), setup)
    }

    /// Why a text the server holds of this account is not what a device wrote, or nil: it must be a note envelope
    /// (a delete's may be empty) that opens for exactly its note and edit.
    enum Problem: Error {
        /// Not an envelope at all: the server holds it in the clear.
        case inTheClear
        /// An envelope that does not open for the note and edit it is served as.
        case doesNotOpen(String)
    }

    /// The payload of `text`, which the server serves as edit `editID` of note (`clientID`, `origin`).
    func open(_ text: String, editID: FlakeID?, clientID: FlakeID, origin: FlakeID) throws(Problem) -> NotePayload {
        let envelope: NoteEnvelope
        do { envelope = try NoteEnvelope(text: text) } catch { throw .inTheClear }
        guard let editID else { throw .doesNotOpen("the server does not say which edit wrote it") }
        do {
            let context = NoteEnvelope.Context(account: ring.account, clientID: clientID, origin: origin, editID: editID)
            return try NotePayload(decoding: NoteEnvelope.open(envelope, expecting: context, keys: ring).plaintext)
        } catch {
            throw .doesNotOpen(error.description)
        }
    }
}

/// A store that could not be read for the scan.
public struct StoreScanError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
