import Foundation
import NoteSyncProtocol

extension ChunkCache {
    /// Reads `file` once, a chunk at a time (never whole in memory), into the cache and returns its manifest: what
    /// attaching a file to a note does, without a server. A chunk the cache holds already (the same file attached
    /// before, or another that shares it) is only marked used. The chunks are sent at the next sync, before the push
    /// that refers to them (``ChunkUploader/uploadCached(_:)``).
    ///
    /// - Throws: `file_access` (the file cannot be read), `data_directory` (the cache cannot be written).
    func stage(file: URL, name: String, mediaType: String) throws(NotesError) -> AttachmentManifest {
        var chunker = try Chunker(file: file)
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
        return AttachmentManifest(name: name, size: size, mediaType: mediaType, chunkSize: chunker.chunkSize, chunks: hashes, sha256: sha256)
    }
}
