import Crypto
import Foundation
import NoteCrypto
import NoteSyncProtocol

extension ChunkCache {
    /// `manifest`'s file as an encrypted account of `keys` stores it: the manifest itself when its chunks are already
    /// sealed for that account (``ChunkSealing/isSealed(_:for:)``), else a new manifest whose chunks are staged here,
    /// sealed exactly as ``stage(file:name:mediaType:sealing:)`` seals an attached file for that account (the key of
    /// the current generation derived from the file's SHA-256, the same chunk size, addresses and manifest form), from
    /// the plaintext this cache holds: the chunks as they are (a plaintext manifest) or opened with the manifest's key
    /// (sealed for another account). What a note's attachments go through when they enter an encrypted account by a
    /// carry at sign-in or a copy, so that their chunks never go up in the clear. Reads one chunk at a time.
    ///
    /// - Returns: Nil when this cache does not hold every chunk of `manifest` intact (a chunk missing, damaged, not
    ///   opening with its key, or the whole not matching the manifest's SHA-256 and size): the file cannot be sealed
    ///   from here, and the caller leaves the attachment out.
    /// - Throws: `data_directory` (the cache cannot be written), `attachment_corrupt` (a malformed key).
    func resealed(_ manifest: AttachmentManifest, for keys: AccountKeyRing) throws(NotesError) -> AttachmentManifest? {
        if ChunkSealing.isSealed(manifest, for: keys) { return manifest }
        guard holds(manifest) else { return nil }
        let opening = try ChunkSealing(manifest: manifest)
        let chunkSize = ChunkRules.chunkSize
        let sealing = ChunkSealing(
            key: AttachmentKey.derive(fileSHA256: manifest.sha256.bytes, chunkSize: chunkSize, accountKey: keys.current),
            fileSHA256: manifest.sha256)
        var whole = SHA256()
        var size: Int64 = 0
        var pending = Data()
        var hashes: [ContentHash] = []
        func keep(_ plaintext: Data) throws(NotesError) {
            let sealed = sealing.seal(plaintext, index: hashes.count)
            let hash = ContentHash(digest: SHA256.hash(data: sealed))
            if contains(hash, size: sealed.count) { touch(hash) } else { try store(sealed, as: hash) }
            hashes.append(hash)
        }
        for (index, hash) in manifest.chunks.enumerated() {
            guard let stored = verifiedBytes(hash), stored.count == manifest.storedSize(ofChunk: index) else { return nil }
            touch(hash)
            guard let plaintext = opening.map({ try? $0.open(stored, index: index, name: manifest.name) }) ?? stored else { return nil }
            whole.update(data: plaintext)
            size += Int64(plaintext.count)
            // The source's chunk size may differ from this client's: the file is cut again at ``ChunkRules/chunkSize``.
            pending.append(plaintext)
            while pending.count >= chunkSize {
                try keep(pending.prefix(chunkSize))
                pending = Data(pending.dropFirst(chunkSize))
            }
        }
        if !pending.isEmpty { try keep(pending) }
        guard ContentHash(digest: whole.finalize()) == manifest.sha256, size == manifest.size else { return nil }
        var sealed = manifest
        sealed.chunkSize = chunkSize
        sealed.chunks = hashes
        sealed.key = sealing.manifestKey
        return sealed
    }
}

extension ChunkSealing {
    /// Whether `manifest`'s chunks are sealed for the account of `keys`: its key is the one that account derives for
    /// the file under a generation the ring holds (as ``ChunkSealing/forFile(_:chunkSize:keys:)`` derives it). A
    /// plaintext manifest, and one sealed for another account (or a generation this device lacks), are not.
    static func isSealed(_ manifest: AttachmentManifest, for keys: AccountKeyRing) -> Bool {
        guard let text = manifest.key, let key = try? AttachmentKey(text: text) else { return false }
        return keys.generations.contains { generation in
            keys.key(generation: generation).map {
                AttachmentKey.derive(fileSHA256: manifest.sha256.bytes, chunkSize: manifest.chunkSize, accountKey: $0) == key
            } ?? false
        }
    }
}

/// The attachments of notes entering an encrypted account (a carry at sign-in, a copy), sealed for it
/// (``ChunkCache/resealed(_:for:)``): those known beforehand are staged when it is made, before the store's write
/// transaction that moves the notes (a file is read and written whole, which a transaction should not wait on); one
/// met only in the transaction (a note changed meanwhile) is staged then.
struct AttachmentResealer: Sendable {
    let cache: ChunkCache
    let keys: AccountKeyRing
    /// Each manifest staged ahead, with what it became (nil: it cannot be sealed from this device's cache).
    private var staged: [AttachmentManifest: AttachmentManifest?] = [:]

    /// Stages `manifests` for the account of `keys`.
    ///
    /// - Throws: Those of ``ChunkCache/resealed(_:for:)``.
    init(cache: ChunkCache, keys: AccountKeyRing, staging manifests: some Sequence<AttachmentManifest>) throws(NotesError) {
        self.cache = cache
        self.keys = keys
        for manifest in manifests where staged[manifest] == nil {
            staged[manifest] = .some(try cache.resealed(manifest, for: keys))
        }
    }

    /// `manifest` sealed for the account, nil when this device cannot seal it (its file is not whole in the cache).
    func callAsFunction(_ manifest: AttachmentManifest) throws(NotesError) -> AttachmentManifest? {
        if let known = staged[manifest] { return known }
        return try cache.resealed(manifest, for: keys)
    }
}
