import Crypto
import Foundation
import NoteSyncProtocol
import Synchronization

/// What an attachment upload or download did.
public struct AttachmentTransfer: Sendable, Equatable {
    /// The attachment.
    public var manifest: AttachmentManifest
    /// Chunks sent to the server (upload) or fetched from it (download) by this call.
    public var chunksTransferred = 0
    /// Their bytes.
    public var bytesTransferred: Int64 = 0
    /// Chunks the other side had already (the server for an upload, this device's cache for a download): not sent.
    public var chunksSkipped = 0
}

/// Progress of a transfer, reported after each chunk sent or fetched.
public struct AttachmentProgress: Sendable, Equatable {
    /// Chunks sent or fetched so far by this call.
    public var chunksTransferred: Int
    public var bytesTransferred: Int64
}

/// Counts of one stage of a transfer.
struct TransferCounts: Sendable {
    var chunks = 0
    var bytes: Int64 = 0
    var skipped = 0

    static func + (a: TransferCounts, b: TransferCounts) -> TransferCounts {
        TransferCounts(chunks: a.chunks + b.chunks, bytes: a.bytes + b.bytes, skipped: a.skipped + b.skipped)
    }
}

/// Sends a file's chunks: the chunker reads and hashes the file into the cache, a batch at a time, while the previous
/// batch is sent: `POST /v1/chunks/missing`, then `PUT` of each missing chunk from its cache file, ``inFlight`` at a
/// time.
///
/// Resuming is asking again: after a kill, a dropped connection or a daemon restart, the same call hashes the file
/// again (the cache keeps what it wrote) and the server's `missing` answer leaves out every chunk it stored, so only
/// the chunks that were in flight (at most ``inFlight``) and not yet stored are sent again. A chunk the account has
/// already (the same file on another note) is never sent.
struct ChunkUploader: Sendable {
    let connection: ServerConnection
    let cache: ChunkCache
    /// Chunks asked about in one `missing` request (and hashed ahead of the one being sent).
    var batchSize = 64
    /// Chunk PUTs sent at once: 2. The server acknowledges a chunk only once it is durable (an fsync of the file, its
    /// directory and the row's commit), so one PUT at a time leaves the connection idle for each fsync; a second one
    /// on its own connection overlaps it (Docs/PERFORMANCE.md, "attachments, two chunks in flight").
    static let inFlight = 2
    let progress: (@Sendable (AttachmentProgress) -> Void)?

    /// Uploads `file`, its chunks sealed with `sealing` (an encrypted account's, ``ChunkSealing/forFile(_:chunkSize:keys:)``)
    /// or as they are (nil).
    ///
    /// - Throws: `file_access` also when a sealed file changed since it was hashed for its key.
    func upload(file: URL, name: String, mediaType: String, sealing: ChunkSealing? = nil) async throws(NotesError) -> AttachmentTransfer {
        var chunker = try Chunker(file: file, sealing: sealing)
        var hashes: [ContentHash] = []
        let reporter = ProgressReporter(progress)
        let counts: TransferCounts
        do {
            counts = try await withThrowingTaskGroup(of: TransferCounts.self) { group in
                var total = TransferCounts()
                var sending = false
                var batch: [(ContentHash, Int)] = []
                while true {
                    let next = try chunker.next()
                    if let chunk = next {
                        if cache.contains(chunk.hash, size: chunk.bytes.count) {
                            cache.touch(chunk.hash)
                        } else {
                            try cache.store(chunk.bytes, as: chunk.hash)
                        }
                        hashes.append(chunk.hash)
                        batch.append((chunk.hash, chunk.bytes.count))
                    }
                    guard batch.count == batchSize || (next == nil && !batch.isEmpty) else {
                        if next == nil { break }
                        continue
                    }
                    // One batch is sent while the next is hashed.
                    if sending, let done = try await group.next() { total = total + done }
                    let ready = batch
                    batch = []
                    group.addTask { try await send(ready, reporter: reporter) }
                    sending = true
                    if next == nil { break }
                }
                while let done = try await group.next() { total = total + done }
                return total
            }
        } catch let error as NotesError {
            throw error
        } catch is CancellationError {
            throw NotesError(.serverUnreachable, "The upload was cancelled; attach the file again to resume.")
        } catch {
            throw NotesError(.serverUnreachable, "The upload failed: \(error).")
        }
        let (size, sha256) = chunker.finish()
        if let sealing, sealing.fileSHA256 != sha256 {
            // Its key was derived from other content: chunks sealed under it would not dedupe, and its manifest lie.
            throw NotesError(.fileAccess, "\(file.path) changed while it was being attached; attach it again.")
        }
        let manifest = AttachmentManifest(
            name: name, size: size, mediaType: mediaType, chunkSize: ChunkRules.chunkSize, chunks: hashes, sha256: sha256,
            key: sealing?.manifestKey)
        return AttachmentTransfer(
            manifest: manifest, chunksTransferred: counts.chunks, bytesTransferred: counts.bytes, chunksSkipped: counts.skipped)
    }

    /// Asks which of `batch` the server lacks and sends those, ``inFlight`` at a time.
    private func send(_ batch: [(ContentHash, Int)], reporter: ProgressReporter) async throws(NotesError) -> TransferCounts {
        let sizes = Dictionary(batch, uniquingKeysWith: { a, _ in a })
        let answer = try await connection.call(
            .missingChunks, MissingChunksResponse.self, body: encodeBody(MissingChunksRequest(hashes: batch.map(\.0))))
        var missing: [(ContentHash, Int)] = []
        for hash in answer.missing {
            guard let size = sizes[hash] else {
                throw NotesError.badResponse("the server reported missing a chunk that was not asked about (\(hash))")
            }
            missing.append((hash, size))
        }
        var counts = try await putAll(missing, reporter: reporter)
        counts.skipped = batch.count - missing.count
        return counts
    }

    /// Sends `chunks` (address and size) from their cache files, ``inFlight`` at a time.
    func putAll(_ chunks: [(ContentHash, Int)], reporter: ProgressReporter) async throws(NotesError) -> TransferCounts {
        var counts = TransferCounts()
        do {
            try await withThrowingTaskGroup(of: Int.self) { group in
                var pending = chunks.makeIterator()
                for _ in 0..<Self.inFlight {
                    guard let (hash, size) = pending.next() else { break }
                    group.addTask { try await put(hash, size: size, reporter: reporter) }
                }
                while let size = try await group.next() {
                    counts.chunks += 1
                    counts.bytes += Int64(size)
                    if let (hash, size) = pending.next() {
                        group.addTask { try await put(hash, size: size, reporter: reporter) }
                    }
                }
            }
        } catch let error as NotesError {
            throw error
        } catch {
            throw NotesError(.serverUnreachable, "The upload failed: \(error).")
        }
        return counts
    }

    /// Sends chunk `hash` from its cache file; returns its size.
    func put(_ hash: ContentHash, size: Int, reporter: ProgressReporter) async throws(NotesError) -> Int {
        try Task.checkCancellation(orThrow: NotesError(.serverUnreachable, "The upload was cancelled; attach the file again to resume."))
        let request = WireRequest(.putChunk, hash: hash, bearerToken: connection.token)
        let file = cache.url(hash)
        do {
            _ = try await connection.exchange(request, for: .putChunk) { try await connection.transport.upload($0, file: file) }
        } catch where error.api?.code == .chunkHashMismatch {
            cache.remove(hash)
            throw NotesError(
                .attachmentCorrupt, "The cached chunk \(hash) was damaged on this device; it was removed. Attach the file again.",
                api: error.api, httpStatus: error.httpStatus)
        }
        reporter.add(bytes: Int64(size))
        return size
    }
}

/// Fetches an attachment's chunks this device lacks into the cache (`GET /v1/chunks/{hash}`, each downloaded into a
/// file and checked against its address before it joins the cache), then assembles the file from the cache in order,
/// checking every chunk again and the whole file's SHA-256 and size. Resuming is calling again: what the cache has is
/// not fetched again. An encrypted account's chunks (a manifest with a `key`) stay sealed in the cache and are opened
/// one at a time as the file is assembled; the whole file's SHA-256 is then the plaintext's.
struct ChunkDownloader: Sendable {
    /// Nil while signed out: an attachment whose chunks are all in the cache is assembled without a server.
    let connection: ServerConnection?
    let cache: ChunkCache
    let progress: (@Sendable (AttachmentProgress) -> Void)?

    /// Fetches what the cache lacks, then writes the file to `sink` in order.
    func download(_ manifest: AttachmentManifest, into sink: (Data) throws(NotesError) -> Void) async throws(NotesError) -> AttachmentTransfer {
        do {
            try manifest.validate()
        } catch {
            throw NotesError(.attachmentCorrupt, "The attachment's manifest is malformed: \(error.message)", api: error)
        }
        // Sealed chunks (a manifest with a key, an encrypted account's) are opened as they are assembled.
        let sealing = try ChunkSealing(manifest: manifest)
        let reporter = ProgressReporter(progress)
        var counts = TransferCounts()
        for (index, hash) in manifest.chunks.enumerated() where !cache.contains(hash, size: manifest.storedSize(ofChunk: index)) {
            counts = counts + (try await fetch(hash, size: manifest.storedSize(ofChunk: index), reporter: reporter))
        }
        counts.skipped = manifest.chunks.count - counts.chunks
        var whole = SHA256()
        var size: Int64 = 0
        for (index, hash) in manifest.chunks.enumerated() {
            var bytes = cache.verifiedBytes(hash)
            if bytes == nil {
                // Damaged in the cache since it was checked: fetched once more.
                counts = counts + (try await fetch(hash, size: manifest.storedSize(ofChunk: index), reporter: reporter))
                bytes = cache.verifiedBytes(hash)
            }
            guard var bytes, bytes.count == manifest.storedSize(ofChunk: index) else {
                throw NotesError(.attachmentCorrupt, "Chunk \(index + 1) of \(manifest.name) (\(hash)) is not the size its manifest says.")
            }
            cache.touch(hash)
            if let sealing { bytes = try sealing.open(bytes, index: index, name: manifest.name) }
            whole.update(data: bytes)
            size += Int64(bytes.count)
            try sink(bytes)
        }
        let sha256 = ContentHash(digest: whole.finalize())
        guard sha256 == manifest.sha256, size == manifest.size else {
            throw NotesError(
                .attachmentCorrupt,
                "\(manifest.name) assembled from its chunks hashes to \(sha256) (\(size) bytes), not to its manifest's \(manifest.sha256) (\(manifest.size) bytes).")
        }
        return AttachmentTransfer(manifest: manifest, chunksTransferred: counts.chunks, bytesTransferred: counts.bytes, chunksSkipped: counts.skipped)
    }

    /// Downloads chunk `hash` into the cache, checked.
    private func fetch(_ hash: ContentHash, size: Int, reporter: ProgressReporter) async throws(NotesError) -> TransferCounts {
        guard let connection else {
            throw NotesError(.notSignedIn, "Chunk \(hash) is not on this device and fetching it needs an account; sign in with `notes login`.")
        }
        let temporary = try cache.temporaryFile()
        let request = WireRequest(.getChunk, hash: hash, bearerToken: connection.token)
        do {
            _ = try await connection.exchange(request, for: .getChunk) { try await connection.transport.download($0, to: temporary) }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            if error.api?.code == .chunkNotFound {
                throw NotesError(
                    .attachmentCorrupt, "The server has no chunk \(hash) for this account; the attachment cannot be downloaded.",
                    api: error.api, httpStatus: error.httpStatus)
            }
            throw error
        }
        let bytes = (try? Data(contentsOf: temporary)) ?? Data()
        guard bytes.count == size, ContentHash(digest: SHA256.hash(data: bytes)) == hash else {
            try? FileManager.default.removeItem(at: temporary)
            throw NotesError(.attachmentCorrupt, "The server sent other bytes for chunk \(hash) (\(bytes.count) bytes); nothing was saved.")
        }
        try cache.adopt(temporary, as: hash)
        reporter.add(bytes: Int64(size))
        return TransferCounts(chunks: 1, bytes: Int64(size))
    }
}

/// Counts what a transfer moved and reports it.
final class ProgressReporter: Sendable {
    private let progress: (@Sendable (AttachmentProgress) -> Void)?
    private let state = Mutex(AttachmentProgress(chunksTransferred: 0, bytesTransferred: 0))

    init(_ progress: (@Sendable (AttachmentProgress) -> Void)?) { self.progress = progress }

    func add(bytes: Int64) {
        let now = state.withLock { state in
            state.chunksTransferred += 1
            state.bytesTransferred += bytes
            return state
        }
        progress?(now)
    }
}

extension Task where Success == Never, Failure == Never {
    /// Throws `error` when the current task is cancelled.
    static func checkCancellation(orThrow error: NotesError) throws(NotesError) {
        if Task.isCancelled { throw error }
    }
}
