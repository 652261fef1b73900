import Foundation
import NoteSyncProtocol

extension ChunkUploader {
    /// Makes `hashes` present on the server before a push refers to them (``ChunkPlanner``): asks which the account
    /// lacks (`POST /v1/chunks/missing`, at most ``ChunkRules/maxMissingHashes`` at a time) and sends those the cache
    /// holds from their cache files, ``inFlight`` at a time. Interrupted, calling again sends only what the server
    /// still lacks.
    ///
    /// A missing chunk of `withholding` is never sent: an encrypted account's chunks in the clear (``ChunkPlanner/
    /// clearChunks(of:)``), which the server may keep only from before the account's conversion.
    ///
    /// - Returns: What was sent, the missing chunks the cache lacks (absent from both sides), and the missing chunks
    ///   of `withholding` it did not send.
    func uploadCached(_ hashes: [ContentHash], withholding: Set<ContentHash> = []) async throws(NotesError)
        -> (sent: TransferCounts, absent: Set<ContentHash>, withheld: Set<ContentHash>)
    {
        let reporter = ProgressReporter(progress)
        var sent = TransferCounts()
        var absent = Set<ContentHash>()
        var withheld = Set<ContentHash>()
        for request in ChunkPlanner.missingRequests(hashes) {
            let answer = try await connection.call(
                .missingChunks, MissingChunksResponse.self, body: encodeBody(MissingChunksRequest(hashes: request)))
            var split = ChunkPlanner.split(missing: answer.missing) { hash in cachedSize(hash) != nil }
            withheld.formUnion(split.upload.filter(withholding.contains))
            split.upload.removeAll(where: withholding.contains)
            absent.formUnion(split.absent)
            sent.skipped += request.count - answer.missing.count
            let uploads = split.upload.compactMap { hash in cachedSize(hash).map { (hash, $0) } }
            let counts = try await putAll(uploads, reporter: reporter)
            sent.chunks += counts.chunks
            sent.bytes += counts.bytes
        }
        return (sent, absent, withheld)
    }

    /// The size of chunk `hash`'s cache file; nil when the cache lacks it.
    private func cachedSize(_ hash: ContentHash) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: cache.url(hash).path)[.size] as? NSNumber)?.intValue
    }
}
