import NoteSyncProtocol

/// Decides what a push batch needs of the chunk store before it is sent, and what becomes of a change whose
/// attachments refer to a chunk neither side has. Pure: a function of values.
///
/// In the sync engine, before each push batch:
/// 1. The chunks the batch's changes refer to (``chunks(of:)``: every chunk of every attachment a change sends, in
///    the clear or, for an encrypted account, inside its envelope with the addresses as `chunkRefs`; each once) are asked about with `POST /v1/chunks/missing`, ``ChunkRules/maxMissingHashes`` at a time.
/// 2. The missing ones this device's chunk cache holds are sent (`PUT /v1/chunks/{hash}`, two at a time); the missing
///    ones it lacks are absent (``split(missing:inCache:)``).
/// 3. A change referring to an absent chunk is refused here, before the batch is sent, with `unknown_chunk` naming the
///    attachment and the chunk (``refusals(_:absent:)``); the server would refuse it the same way. The note keeps
///    its attachments and its error, and, like a note over the quota, every sync tries it again
///    (``OutboxPlanner/retriedAtEverySync``): the chunk may reach the cache again (the file attached again elsewhere
///    and synced, or saved here), or the attachment be detached.
///
/// A change the server answers `rejected` with `unknown_chunk` anyway (a chunk collected between the `missing` answer
/// and the push) is recorded the same way, and the next sync uploads what the cache holds and tries again.
enum ChunkPlanner {
    /// The chunks the changes of `entries` refer to, each once, in the order first met: a plaintext change's
    /// attachments' chunks, a sealed change's (an encrypted account's) `chunkRefs`, which are the same addresses (the
    /// sealed chunks' of the manifests in its envelope).
    static func chunks(of entries: [OutboxEntry]) -> [ContentHash] {
        var seen = Set<ContentHash>()
        var chunks: [ContentHash] = []
        for entry in entries {
            for manifest in entry.tagsAndFlags?.attachments ?? [] {
                for hash in manifest.chunks where seen.insert(hash).inserted { chunks.append(hash) }
            }
        }
        return chunks
    }

    /// `hashes` in requests of at most ``ChunkRules/maxMissingHashes``.
    static func missingRequests(_ hashes: [ContentHash]) -> [[ContentHash]] {
        stride(from: 0, to: hashes.count, by: ChunkRules.maxMissingHashes).map {
            Array(hashes[$0..<min($0 + ChunkRules.maxMissingHashes, hashes.count)])
        }
    }

    /// The server's missing chunks split into those to send from the cache and those absent from both sides.
    static func split(missing: [ContentHash], inCache: (ContentHash) -> Bool) -> (upload: [ContentHash], absent: Set<ContentHash>) {
        var upload: [ContentHash] = []
        var absent = Set<ContentHash>()
        for hash in missing {
            if inCache(hash) { upload.append(hash) } else { absent.insert(hash) }
        }
        return (upload, absent)
    }

    /// The changes among `entries` that refer to an `absent` chunk, each refused with `unknown_chunk` naming its first
    /// such attachment and chunk.
    static func refusals(_ entries: [OutboxEntry], absent: Set<ContentHash>) -> [OutboxPlanner.Refused] {
        guard !absent.isEmpty else { return [] }
        return entries.compactMap { entry in
            for manifest in entry.tagsAndFlags?.attachments ?? [] {
                if let hash = manifest.chunks.first(where: absent.contains) {
                    let message =
                        "The attachment \(manifest.name) refers to chunk \(hash), which neither this device nor the server has; "
                        + "every sync tries again (attach the file again, or detach it)."
                    return OutboxPlanner.Refused(entry: entry, error: APIErrorBody(code: unknownChunk, message: message))
                }
            }
            return nil
        }
    }

    /// The code of a change referring to a chunk the account does not have.
    static let unknownChunk = APIErrorCode.unknownChunk
}
