import Foundation
import NoteSyncProtocol

extension ChunkCache {
    /// Reads `file` once, a chunk at a time (never whole in memory), into the cache and returns its manifest: what
    /// attaching a file to a note does, without a server. A chunk the cache holds already (the same file attached
    /// before, or another that shares it) is only marked used. The chunks are sent at the next sync, before the push
    /// that refers to them (``ChunkUploader/uploadCached(_:withholding:)``).
    ///
    /// With a `sealing` (an encrypted account's, ``NotesClient/attachmentSealing(for:note:)``) the chunks are sealed on the
    /// way in and the manifest carries the file's key.
    ///
    /// - Throws: `file_access` (the file cannot be read, or a sealed file changed since it was hashed for its key),
    ///   `data_directory` (the cache cannot be written).
    func stage(file: URL, name: String, mediaType: String, sealing: ChunkSealing? = nil) throws(NotesError) -> AttachmentManifest {
        var chunker = try Chunker(file: file, sealing: sealing)
        var hashes: [ContentHash] = []
        while let chunk = try chunker.next() {
            if contains(chunk.hash, size: chunk.bytes.count) {
                touch(chunk.hash)
            } else {
                try store(chunk.bytes, as: chunk.hash)
            }
            hashes.append(chunk.hash)
        }
        let (size, sha256) = chunker.finish()
        if let sealing, sealing.fileSHA256 != sha256 {
            // Its key was derived from other content: chunks sealed under it would not dedupe, and its manifest lie.
            throw NotesError(.fileAccess, "\(file.path) changed while it was being attached; attach it again.")
        }
        return AttachmentManifest(
            name: name, size: size, mediaType: mediaType, chunkSize: chunker.chunkSize, chunks: hashes, sha256: sha256,
            key: sealing?.manifestKey)
    }
}
