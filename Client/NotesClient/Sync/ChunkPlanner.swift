import NoteSyncProtocol

/// Decides what a push batch needs of the chunk store before it is sent, and what becomes of a change whose
/// attachments refer to a chunk neither side has. Pure: a function of values.
///
/// In the sync engine, before each push batch:
/// 1. The chunks the batch's changes refer to (``chunks(of:)``: every chunk of every attachment a change sends, in
///    the clear or, for an encrypted account, inside its envelope with the addresses as `chunkRefs`; each once) are
///    asked about with `POST /v1/chunks/missing`, ``ChunkRules/maxMissingHashes`` at a time.
/// 2. The missing ones this device's chunk cache holds are sent (`PUT /v1/chunks/{hash}`, two at a time); the missing
///    ones it lacks are absent (``split(missing:inCache:)``).
/// 3. A change referring to an absent chunk is sent without the attachments whose bytes are absent (a sealed one is
///    sealed again without them)
///    (``droppingAbsent(_:absent:)``): their bytes are on neither side (the account that stored them was deleted, or
///    the cache emptied by hand), so no device could ever save them, and refusing the change would hold the note's
///    text and every later edit of it off the server for good (the simulation's seed 13: a note carried from a
///    deleted account into a new one never converged). The push's answer settles the note without them, and the sync
///    reports how many were dropped (``SyncReport/attachmentsDropped``). The same holds for a note carried from a
///    deleted plaintext account into an encrypted one (the simulation's seed 8). ``refusals(_:absent:)`` names what
///    is left to refuse (nothing, once the absent attachments are dropped).
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

    /// The chunks of `entries`' attachments stored in the clear (manifests without a key). For an encrypted account,
    /// the server may hold them only from before its conversion (Docs/SECURITY.md, "Converting an account"): the
    /// uploader never sends one it lacks (``refusingUnsealed(_:withheld:)``). Attachments entering an encrypted
    /// account by a carry or a copy are sealed for it first (``ChunkCache/resealed(_:for:)``), so this is a backstop.
    static func clearChunks(of entries: [OutboxEntry]) -> Set<ContentHash> {
        Set(entries.flatMap { entry in (entry.tagsAndFlags?.attachments ?? []).filter { $0.key == nil }.flatMap(\.chunks) })
    }

    /// The changes among `entries` that refer to a `withheld` chunk (an encrypted account's chunk in the clear that
    /// the server lacks), each refused with `not_encrypted` naming its first such attachment: refused, not sent
    /// without it, so that nothing is lost; it waits for an edit (detaching the file and attaching it again seals it).
    static func refusingUnsealed(_ entries: [OutboxEntry], withheld: Set<ContentHash>) -> [OutboxPlanner.Refused] {
        guard !withheld.isEmpty else { return [] }
        return entries.compactMap { entry in
            guard let manifest = entry.tagsAndFlags?.attachments.first(where: { $0.chunks.contains(where: withheld.contains) }) else {
                return nil
            }
            let message =
                "The attachment \(manifest.name) is not encrypted, and its chunks would go to the server of this end-to-end "
                + "encrypted account in the clear: not sent (detach it and attach the file again, which encrypts it)."
            return OutboxPlanner.Refused(entry: entry, error: APIErrorBody(code: .notEncrypted, message: message))
        }
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

    /// `entries` with every change's attachments that refer to an `absent` chunk left out (the note's snapshot as
    /// sent: the answer settles the note without them), and how many were left out. A sealed change left so must be
    /// sealed again (its envelope holds the manifests).
    static func droppingAbsent(_ entries: [OutboxEntry], absent: Set<ContentHash>) -> (entries: [OutboxEntry], dropped: Int) {
        guard !absent.isEmpty else { return (entries, 0) }
        var dropped = 0
        let kept = entries.map { entry in
            guard var state = entry.tagsAndFlags else { return entry }
            let available = state.attachments.filter { !$0.chunks.contains(where: absent.contains) }
            guard available.count != state.attachments.count else { return entry }
            dropped += state.attachments.count - available.count
            state.attachments = available
            var entry = entry
            entry.tagsAndFlags = state
            return entry
        }
        return (kept, dropped)
    }

    /// The code of a change referring to a chunk the account does not have.
    static let unknownChunk = APIErrorCode.unknownChunk
}
