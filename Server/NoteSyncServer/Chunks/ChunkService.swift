import Foundation
import Logging
import MiniFlake
import NIOCore
import NoteSyncProtocol

/// The chunk endpoints over a ``ChunkStore``: `POST /v1/chunks/missing`, `PUT /v1/chunks/{hash}` (the body taken as
/// it arrives) and `GET /v1/chunks/{hash}` (the chunk answered as it is read), and the garbage collection the prune
/// service runs. Every request is checked here (hash form, size, quota) before the store sees it; every refusal is a
/// ``SyncError`` with its stable code.
public final class ChunkService: Sendable {
    /// Nil when the store keeps no chunks (the endpoints then answer 500 `internal`: a server fault, not a client's).
    public let store: (any ChunkStore)?
    /// The same store, for the account's running totals.
    let accounts: any NoteStore
    /// The byte limit chunks count in (``AccountQuota/maxTextBytes``).
    public let quota: AccountQuota
    let clock: any FlakeClock
    let logger: Logger

    public init(_ context: ServiceContext, configuration: ServiceConfiguration) {
        store = context.store as? any ChunkStore
        accounts = context.store
        quota = configuration.quota
        clock = context.clock
        logger = context.logger
    }

    private func requireStore() throws -> any ChunkStore {
        guard let store else { throw SyncError(.internalError, "This server's store keeps no chunks.") }
        return store
    }

    /// `POST /v1/chunks/missing`: which of the hashes the account lacks.
    ///
    /// - Throws: `batch_too_large` past ``ChunkRules/maxMissingHashes`` hashes.
    public func missing(_ request: MissingChunksRequest, session: SessionRecord) async throws -> MissingChunksResponse {
        guard request.hashes.count <= ChunkRules.maxMissingHashes else {
            throw SyncError(
                .batchTooLarge,
                "A missing-chunks request names at most \(ChunkRules.maxMissingHashes) hashes; this one names \(request.hashes.count).",
                field: MissingChunksRequest.CodingKeys.hashes.stringValue)
        }
        let missing = try await requireStore().missingChunks(
            accountID: session.accountID, among: request.hashes, now: clock.unixMilliseconds())
        return MissingChunksResponse(missing: missing)
    }

    /// The hash a chunk path names.
    ///
    /// - Throws: `invalid_hash`.
    public static func hash(fromPath value: String) throws -> ContentHash {
        guard let hash = ContentHash(value) else {
            throw SyncError(.invalidHash, "The chunk address in the path must be \(ContentHashError.rule).", field: Endpoint.putChunk.pathParameter)
        }
        return hash
    }

    /// `PUT /v1/chunks/{hash}`: stores the body under `hash` for the session's account, durably before it returns
    /// ``ChunkWrite/created(size:)`` (201); ``ChunkWrite/existed(size:)`` (200) when the account had it.
    ///
    /// A declared `contentLength` over ``ChunkRules/maxChunkBytes``, or one the account's byte limit cannot take, is
    /// refused before a byte is read; otherwise the limit is checked as the bytes arrive and again when the row is
    /// written.
    ///
    /// - Throws: `invalid_hash`, `chunk_too_large`, `empty_chunk`, `chunk_hash_mismatch`,
    ///   `quota_exceeded`, `unauthorized` (the account is gone), `invalid_json` when the body cannot be read.
    public func put(
        hash text: String, contentLength: Int?, body: some AsyncSequence<ByteBuffer, any Error>, session: SessionRecord
    ) async throws -> (hash: ContentHash, write: ChunkWrite) {
        let hash = try Self.hash(fromPath: text)
        let store = try requireStore()
        if let contentLength {
            guard contentLength <= ChunkRules.maxChunkBytes else { throw Self.refusal(ChunkStoreError.tooLarge) }
            guard contentLength > 0 else { throw Self.refusal(ChunkStoreError.empty) }
        }
        do {
            if let contentLength, try await store.chunkSize(accountID: session.accountID, hash: hash) == nil,
                let usage = try await accounts.usage(accountID: session.accountID)
            {
                let wouldStore = usage.storedBytes + Int64(contentLength)
                guard wouldStore <= quota.maxTextBytes else {
                    throw ChunkStoreError.quotaExceeded(wouldStore: wouldStore, limit: quota.maxTextBytes)
                }
            }
            let write = try await store.storeChunk(
                accountID: session.accountID, hash: hash, body: body, byteLimit: quota.maxTextBytes, now: clock.unixMilliseconds())
            if case .created(let size) = write {
                logger.debug("chunk stored", metadata: ["account_id": "\(session.accountID)", "hash": "\(hash)", "size": "\(size)"])
            }
            return (hash, write)
        } catch let error as ChunkStoreError {
            throw Self.refusal(error)
        } catch NoteStoreError.accountNotFound {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
    }

    /// The protocol error for a chunk the store refused.
    static func refusal(_ error: ChunkStoreError) -> SyncError {
        switch error {
        case .tooLarge:
            SyncError(.chunkTooLarge, "A chunk is at most \(ChunkRules.maxChunkBytes) bytes; nothing was stored.")
        case .empty:
            SyncError(.emptyChunk, "A chunk holds at least one byte; this one is empty. Nothing was stored.")
        case .hashMismatch(let actual):
            SyncError(
                .chunkHashMismatch, "The chunk's bytes hash to \(actual), not to the address they were sent under; nothing was stored.")
        case .quotaExceeded(let wouldStore, let limit):
            SyncError(
                .quotaExceeded,
                "The account would store \(wouldStore) bytes (its notes, the texts kept to answer replays and its attachments), over its limit of \(limit); nothing was stored.")
        case .bodyUnreadable(let reason):
            SyncError(.invalidJSON, "The chunk's body could not be read to its end; nothing was stored.", underlying: ChunkStoreError.bodyUnreadable(reason))
        }
    }

    /// `GET /v1/chunks/{hash}`: the account's chunk, opened for reading.
    ///
    /// - Throws: `invalid_hash`, `chunk_not_found` (whether or not another account has it).
    public func get(hash text: String, session: SessionRecord) async throws -> ChunkContent {
        let hash = try Self.hash(fromPath: text)
        guard let content = try await requireStore().readChunk(accountID: session.accountID, hash: hash) else {
            throw SyncError(.chunkNotFound, "This account has no chunk \(hash).")
        }
        return content
    }

    /// Deletes the chunks no note has referred to for `graceDays` (see ``ChunkStore/collectChunks(references:unreferencedSince:now:batch:)``).
    public func collect(references: any ChunkReferences, graceDays: Int) async throws -> CollectedChunks {
        let now = clock.unixMilliseconds()
        let collected = try await requireStore().collectChunks(
            references: references, unreferencedSince: now - Int64(graceDays) * 86_400_000, now: now, batch: 1000)
        if collected.chunks > 0 {
            logger.info("chunks collected", metadata: ["chunks": "\(collected.chunks)", "bytes": "\(collected.bytes)"])
        }
        return collected
    }
}
