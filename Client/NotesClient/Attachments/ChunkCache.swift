import Crypto
import Foundation
import NoteSyncProtocol

/// The chunks this device has, content-addressed under the data directory: `chunks/<ab>/<hash>` (`ab` the hash's
/// first two digits), and `chunks/.incoming/` for files being written or downloaded.
///
/// Every file is written whole under a temporary name and renamed into place, so a chunk file is either absent or
/// complete as written. Files are not fsynced: a cache file a crash damaged is caught when it is used (the server
/// refuses an upload whose bytes do not hash to the address, and assembly hashes every chunk it reads), then removed
/// and fetched or written again. One cache serves every account of the device (their chunks are this device's data
/// either way).
struct ChunkCache: Sendable {
    let root: URL

    var incoming: URL { root.appendingPathComponent(".incoming", isDirectory: true) }

    /// Where chunk `hash` lives.
    func url(_ hash: ContentHash) -> URL {
        root.appendingPathComponent(String(hash.hex.prefix(2)), isDirectory: true).appendingPathComponent(hash.hex)
    }

    /// Whether the cache holds chunk `hash` with `size` bytes.
    func contains(_ hash: ContentHash, size: Int) -> Bool {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url(hash).path) else { return false }
        return (attributes[.size] as? NSNumber)?.intValue == size
    }

    /// A new path in ``incoming`` to write or download to (the directory is made).
    func temporaryFile() throws(NotesError) -> URL {
        try makeDirectory(incoming)
        return incoming.appendingPathComponent(UUID().uuidString)
    }

    /// Stores `bytes` as chunk `hash` (written to a temporary name, then renamed into place).
    func store(_ bytes: Data, as hash: ContentHash) throws(NotesError) {
        let temporary = try temporaryFile()
        do {
            try bytes.write(to: temporary)
        } catch {
            throw NotesError(.dataDirectory, "Cannot write to the chunk cache \(root.path): \(Chunker.reason(error)).")
        }
        try adopt(temporary, as: hash)
    }

    /// Moves the complete file at `file` (in ``incoming``) into place as chunk `hash`.
    func adopt(_ file: URL, as hash: ContentHash) throws(NotesError) {
        let destination = url(hash)
        try makeDirectory(destination.deletingLastPathComponent())
        guard rename(file.path, destination.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: file)
            throw NotesError(.dataDirectory, "Cannot write to the chunk cache \(root.path): \(reason).")
        }
    }

    /// Removes chunk `hash` (found damaged).
    func remove(_ hash: ContentHash) {
        try? FileManager.default.removeItem(at: url(hash))
    }

    /// Chunk `hash`'s bytes when they hash to it; nil (and the file removed) when absent or damaged.
    func verifiedBytes(_ hash: ContentHash) -> Data? {
        guard let bytes = try? Data(contentsOf: url(hash)) else { return nil }
        guard ContentHash(digest: SHA256.hash(data: bytes)) == hash else {
            remove(hash)
            return nil
        }
        return bytes
    }

    private func makeDirectory(_ directory: URL) throws(NotesError) {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw NotesError(.dataDirectory, "Cannot create the chunk cache \(directory.path): \(Chunker.reason(error)).")
        }
    }
}
