import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

/// Attachments (issue 33), phase 1: files in and out of the signed-in account's chunk store, as library API for the
/// note-level commands of phase 2 (which will keep each ``AttachmentManifest`` on its note).
extension NotesClient {
    /// This device's chunks: `chunks/` in the data directory (a temporary directory for a client in memory).
    var chunkCache: ChunkCache { engine.chunkCache }

    static func chunkCache(home: URL?, origin: FlakeID, limit: Int64, directory: URL? = nil) -> ChunkCache {
        let root = home?.appendingPathComponent("chunks", isDirectory: true) ?? directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("notes-chunks-\(origin)", isDirectory: true)
        return ChunkCache(root: root, limit: limit)
    }

    /// How `file`'s chunks are stored for the signed-in account, or for the owner of `note` when one is given (a
    /// signed-out device still shows its account's notes, and takes attachments on them): sealed under the account's
    /// key when this device holds its keys (an encrypted account: the file is read once here to hash it, see
    /// ``ChunkSealing``), nil (as read) otherwise. Every path that chunks a file for an account passes it to
    /// ``Chunker``.
    ///
    /// - Throws: `file_access` when the file cannot be read.
    func attachmentSealing(for file: URL, note: LocalNote.ID? = nil) throws(NotesError) -> ChunkSealing? {
        let keys = try store.read { tx in
            let account = try note.map { id in try tx.owner(ofNote: id) } ?? tx.settings()?.account?.accountID
            return try account.flatMap { account in try tx.keyRing(of: account) }
        }
        return try keys.map { (keys) throws(NotesError) in try ChunkSealing.forFile(file, keys: keys) }
    }

    /// Prunes the chunk cache after a transfer that succeeded (``ChunkCache/prune(now:keeping:)``), keeping the
    /// chunks of attachments not synced yet (a note's attachments that differ from what was last synced of them).
    private func pruneChunkCache(_ cache: ChunkCache) {
        let unsynced = (try? store.read { tx in try tx.unsyncedAttachmentChunks() }) ?? []
        cache.prune(now: Date(timeIntervalSince1970: TimeInterval(now) / 1000), keeping: unsynced)
    }

    /// Uploads a file to the signed-in account as chunks and returns its manifest with what was sent.
    ///
    /// The file is read once, a chunk at a time (never whole in memory), into this device's chunk cache; only the
    /// chunks the server lacks are sent (`POST /v1/chunks/missing`, then `PUT /v1/chunks/{hash}` from the cache
    /// file), one at a time. Calling it again after an interruption (a killed process, a dropped connection, a
    /// daemon restart) resumes: the server's answer leaves out what it stored, so at most the chunk that was in flight
    /// is sent again; the same file uploaded twice sends nothing the second time.
    ///
    /// For an encrypted account (this device holds its keys) the file is read twice: once to hash it, which derives
    /// its key (``AttachmentKey``, under the current key generation), then to seal each chunk (``AttachmentCipher``)
    /// into the cache and the server. The manifest lists the sealed chunks' addresses and carries the key (`key`):
    /// it must travel inside the note's envelope only. The same file twice in one account and generation gives the
    /// same sealed chunks, so it still sends nothing the second time.
    ///
    /// - Parameters:
    ///   - name: The attachment's name; the file's own by default.
    ///   - mediaType: Its media type; guessed from the name's extension by default.
    ///   - progress: Called after each chunk sent.
    /// - Throws: `file_access` (the file cannot be read), `invalid_input` (a name or media type the manifest cannot
    ///   hold), `not_signed_in`, `signed_out_by_server`, `server_error` (`quota_exceeded` among others),
    ///   `server_unreachable`, `attachment_corrupt` (a cached chunk was damaged: it is removed; call again),
    ///   `data_directory` (the cache cannot be written).
    public func uploadAttachment(
        file: URL, name: String? = nil, mediaType: String? = nil, progress: (@Sendable (AttachmentProgress) -> Void)? = nil
    ) async throws(NotesError) -> AttachmentTransfer {
        let name = name ?? file.lastPathComponent
        let mediaType = mediaType ?? Chunker.mediaType(forName: name)
        guard AttachmentManifest.isAcceptableName(name) else {
            throw NotesError(
                .invalidInput, "An attachment's name is 1–\(AttachmentManifest.maxNameBytes) UTF-8 bytes, without '/' or control characters.")
        }
        guard AttachmentManifest.isAcceptableMediaType(mediaType) else {
            throw NotesError(.invalidInput, "A media type is type/subtype, such as image/png; '\(mediaType)' is not one.")
        }
        let cache = chunkCache
        let transfer = try await engine.withAccountConnection { (connection) throws(NotesError) in
            let sealing = try attachmentSealing(for: file)
            return try await ChunkUploader(connection: connection, cache: cache, progress: progress)
                .upload(file: file, name: name, mediaType: mediaType, sealing: sealing)
        }
        pruneChunkCache(cache)
        return transfer
    }

    /// Downloads an attachment of the signed-in account into `destination` (created or replaced, only once the
    /// whole file checked out: it is written beside it under a temporary name first).
    ///
    /// Chunks this device's cache has are not fetched; the others are fetched one at a time, each checked against
    /// its address before it joins the cache, so calling again after an interruption fetches only what is still
    /// missing. The file is assembled from the cache a chunk at a time, every chunk checked again and the whole
    /// file's SHA-256 and size against the manifest. A manifest with a `key` (an encrypted account's) has its chunks
    /// opened with it as they are assembled; one that does not open is `attachment_corrupt`.
    ///
    /// - Throws: `attachment_corrupt` (a malformed manifest, a chunk the server lacks or sends wrong, a file that
    ///   does not match its checksum), `file_access` (the destination cannot be written), `not_signed_in`,
    ///   `signed_out_by_server`, `server_error`, `server_unreachable`, `data_directory`.
    public func downloadAttachment(
        _ manifest: AttachmentManifest, to destination: URL, progress: (@Sendable (AttachmentProgress) -> Void)? = nil
    ) async throws(NotesError) -> AttachmentTransfer {
        let directory = destination.deletingLastPathComponent()
        let partial = directory.appendingPathComponent(".\(destination.lastPathComponent).partial-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: partial.path, contents: nil), let handle = try? FileHandle(forWritingTo: partial) else {
            throw NotesError(.fileAccess, "Cannot write \(destination.path): \(String(cString: strerror(errno))).")
        }
        do throws(NotesError) {
            let transfer = try await downloadAttachment(manifest, writingTo: handle, path: destination.path, progress: progress)
            try? handle.synchronize()
            try? handle.close()
            guard rename(partial.path, destination.path) == 0 else {
                throw NotesError(.fileAccess, "Cannot write \(destination.path): \(String(cString: strerror(errno))).")
            }
            return transfer
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(at: partial)
            throw error
        }
    }

    /// Downloads an attachment and writes it to `output` (standard output, say) as it is assembled. A chunk that
    /// does not check out stops it before it is written; the whole file's checksum can only be checked at its end,
    /// after its bytes were written (the error then says so).
    public func downloadAttachment(
        _ manifest: AttachmentManifest, to output: FileHandle, progress: (@Sendable (AttachmentProgress) -> Void)? = nil
    ) async throws(NotesError) -> AttachmentTransfer {
        try await downloadAttachment(manifest, writingTo: output, path: "the output", progress: progress)
    }

    private func downloadAttachment(
        _ manifest: AttachmentManifest, writingTo handle: FileHandle, path: String, progress: (@Sendable (AttachmentProgress) -> Void)?
    ) async throws(NotesError) -> AttachmentTransfer {
        let cache = chunkCache
        let download = { (connection: ServerConnection?) async throws(NotesError) -> AttachmentTransfer in
            try await ChunkDownloader(connection: connection, cache: cache, progress: progress).download(manifest) { (bytes) throws(NotesError) in
                do {
                    try handle.write(contentsOf: bytes)
                } catch {
                    throw NotesError(.fileAccess, "Cannot write \(path): \(Chunker.reason(error)).")
                }
            }
        }
        // Signed out, an attachment whose chunks are all here is still assembled (no request is made for them).
        let signedIn = try store.read { tx in try tx.settings()?.account != nil }
        let transfer = signedIn
            ? try await engine.withAccountConnection { (connection) throws(NotesError) in try await download(connection) }
            : try await download(nil)
        pruneChunkCache(cache)
        return transfer
    }

    /// Whether every chunk of the attachment is on this device (its cache), so that saving it needs no server. The
    /// cache keeps the chunks used last up to ``NotesEnvironment/chunkCacheLimit`` bytes: an attachment transferred
    /// long ago, or larger than the limit, may have left it.
    public func hasAttachment(_ manifest: AttachmentManifest) -> Bool {
        chunkCache.holds(manifest)
    }
}
