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
///
/// The cache is bounded: after each upload and download that succeeds, ``prune(now:)`` brings it down to ``limit``
/// bytes, the chunks least recently written or used going first (a file's modification time, set again when a
/// transfer uses a chunk the cache had), and removes files a killed transfer left in ``incoming``. A pruned chunk
/// costs nothing but its transfer: an upload hashes its file into the cache again, a download fetches it again.
struct ChunkCache: Sendable {
    let root: URL
    /// The most bytes of chunks the cache keeps after a transfer (``NotesEnvironment/chunkCacheLimit``).
    var limit: Int64 = ChunkCache.defaultLimit

    /// 1 GiB.
    static let defaultLimit: Int64 = 1 << 30
    /// How old a file in ``incoming`` must be for a prune to take it for the leftover of a killed transfer (a live
    /// one writes it within seconds).
    static let incomingLifetime: TimeInterval = 3600

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

    /// Whether the cache holds every chunk of `manifest` (sealed or not), so that it saves without the server.
    func holds(_ manifest: AttachmentManifest) -> Bool {
        manifest.chunks.indices.allSatisfy { contains(manifest.chunks[$0], size: manifest.storedSize(ofChunk: $0)) }
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

    /// Marks chunk `hash` as used now (its modification time), so that a prune keeps it over less recent ones.
    func touch(_ hash: ContentHash) {
        _ = utimes(url(hash).path, nil)
    }

    /// Brings the cache down to ``limit`` bytes, removing the chunks least recently written or used first (never one
    /// of `keeping`: the chunks of attachments not synced yet, which the server may not have), and removes the files in
    /// ``incoming`` older than ``incomingLifetime`` at `now`. Best effort: a file that cannot be
    /// removed stays. A chunk another transfer is using when it goes costs that transfer a fetch (a download) or an
    /// error (an upload; calling again resumes it).
    /// - Returns: The chunks removed and their bytes.
    @discardableResult
    func prune(now: Date, keeping: Set<ContentHash> = []) -> (chunks: Int, bytes: Int64) {
        let manager = FileManager.default
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey, .isRegularFileKey]
        func files(in directory: URL) -> [(url: URL, size: Int64, modified: Date)] {
            let urls = (try? manager.contentsOfDirectory(at: directory, includingPropertiesForKeys: keys)) ?? []
            return urls.compactMap { url in
                guard let values = try? url.resourceValues(forKeys: Set(keys)), values.isRegularFile == true else { return nil }
                return (url, Int64(values.fileSize ?? 0), values.contentModificationDate ?? .distantPast)
            }
        }
        for file in files(in: incoming) where now.timeIntervalSince(file.modified) > Self.incomingLifetime {
            try? manager.removeItem(at: file.url)
        }
        let prefixes = ((try? manager.contentsOfDirectory(atPath: root.path)) ?? []).filter { $0.count == 2 }
        var chunks = prefixes.flatMap { files(in: root.appendingPathComponent($0, isDirectory: true)) }
        var total = chunks.reduce(0) { $0 + $1.size }
        guard total > limit else { return (0, 0) }
        chunks.sort { ($0.modified, $0.url.lastPathComponent) < ($1.modified, $1.url.lastPathComponent) }
        var removed = (chunks: 0, bytes: Int64(0))
        let kept = Set(keeping.map(\.hex))
        for chunk in chunks where total > limit && !kept.contains(chunk.url.lastPathComponent) {
            guard (try? manager.removeItem(at: chunk.url)) != nil else { continue }
            total -= chunk.size
            removed.chunks += 1
            removed.bytes += chunk.size
        }
        return removed
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
