import Crypto
import Foundation
import NoteCrypto
import NoteSyncProtocol

/// The transform between a file's chunks and what an encrypted account stores of them (issue 33): each chunk sealed
/// under the file's ``AttachmentKey`` (NoteCrypto's ``AttachmentCipher``) on the way to the cache and the server,
/// opened on the way out of the cache into the assembled file. A plaintext account's chunks go through untouched
/// (no sealing at all: ``Chunker`` and ``ChunkDownloader`` take an optional one).
///
/// The key is derived from the file's SHA-256, so a file is read twice when it is attached: once to hash it
/// (``forFile(_:chunkSize:keys:)``), once to chunk and seal it. Both reads stream (one chunk in memory at a time);
/// a file that changes between them is refused (``Chunker`` hashes it again on the way).
struct ChunkSealing: Sendable {
    let key: AttachmentKey
    /// The whole file's SHA-256 the key was derived from (checked again after the chunking read).
    let fileSHA256: ContentHash

    /// Hashes `file` (a streaming read) and derives its key under `keys`' current generation.
    ///
    /// - Throws: `file_access` when it cannot be read.
    static func forFile(_ file: URL, chunkSize: Int = ChunkRules.chunkSize, keys: AccountKeyRing) throws(NotesError) -> ChunkSealing {
        var reader = try Chunker(file: file, chunkSize: chunkSize)
        while try reader.next() != nil {}
        let sha256 = reader.finish().sha256
        return ChunkSealing(
            key: AttachmentKey.derive(fileSHA256: sha256.bytes, chunkSize: chunkSize, accountKey: keys.current), fileSHA256: sha256)
    }

    /// The key of a manifest's sealed chunks, nil when they are not sealed (no `key`).
    ///
    /// - Throws: `attachment_corrupt` when the manifest's key is not a key's text form.
    init?(manifest: AttachmentManifest) throws(NotesError) {
        guard let text = manifest.key else { return nil }
        do {
            key = try AttachmentKey(text: text)
        } catch {
            throw NotesError(.attachmentCorrupt, "The attachment \(manifest.name) has a malformed key: \(error.description)")
        }
        fileSHA256 = manifest.sha256
    }

    init(key: AttachmentKey, fileSHA256: ContentHash) {
        self.key = key
        self.fileSHA256 = fileSHA256
    }

    /// The key as the manifest carries it (`key`).
    var manifestKey: String { key.text }

    /// The stored form of plaintext chunk `index`.
    func seal(_ plaintext: Data, index: Int) -> Data {
        Data(plaintext.withUnsafeBytes { AttachmentCipher.seal($0, index: index, key: key) })
    }

    /// The plaintext of stored chunk `index` of the attachment `name`.
    ///
    /// - Throws: `attachment_corrupt` when it does not open (altered, at another place, another file's).
    func open(_ stored: Data, index: Int, name: String) throws(NotesError) -> Data {
        do {
            return Data(try AttachmentCipher.open([UInt8](stored), index: index, key: key))
        } catch {
            throw NotesError(.attachmentCorrupt, "Chunk \(index + 1) of \(name) does not decrypt with its key: \(error.description)")
        }
    }
}
