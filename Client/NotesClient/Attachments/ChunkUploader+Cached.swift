import Foundation
import NoteSyncProtocol

extension ChunkUploader {
    /// Makes `hashes` present on the server before a push refers to them (``ChunkPlanner``): asks which the account
    /// lacks (`POST /v1/chunks/missing`, at most ``ChunkRules/maxMissingHashes`` at a time) and sends those the cache
    /// holds from their cache files, ``inFlight`` at a time. Interrupted, calling again sends only what the server
    /// still lacks.
    ///
    /// - Returns: What was sent, and the missing chunks the cache lacks (absent from both sides).
    func uploadCached(_ hashes: [ContentHash]) async throws(NotesError) -> (sent: TransferCounts, absent: Set<ContentHash>) {
        let reporter = ProgressReporter(progress)
        var sent = TransferCounts()
        var absent = Set<ContentHash>()
        for request in ChunkPlanner.missingRequests(hashes) {
            let answer = try await connection.call(
                .missingChunks, MissingChunksResponse.self, body: encodeBody(MissingChunksRequest(hashes: request)))
            let split = ChunkPlanner.split(missing: answer.missing) { hash in cachedSize(hash) != nil }
            absent.formUnion(split.absent)
            sent.skipped += request.count - answer.missing.count
            let uploads = split.upload.compactMap { hash in cachedSize(hash).map { (hash, $0) } }
            let counts = try await putAll(uploads, reporter: reporter)
            sent.chunks += counts.chunks
            sent.bytes += counts.bytes
        }
        return (sent, absent)
    }

    /// The size of chunk `hash`'s cache file; nil when the cache lacks it.
    private func cachedSize(_ hash: ContentHash) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: cache.url(hash).path)[.size] as? NSNumber)?.intValue
    }
}
