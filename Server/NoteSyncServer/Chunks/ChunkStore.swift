import Crypto
import MiniFlake
import NIOCore
import NoteSyncProtocol

/// Where a server keeps the chunks of attachments (issue 33): per account, each stored once under its content
/// address (``ContentHash``, the SHA-256 of its bytes as stored), with a row `(account, hash, size, created_at,
/// referenced_at)` in the `chunks` table of both stores.
///
/// - ``SQLiteNoteStore`` keeps the bytes in files under the data directory (`chunks/<account>/<ab>/<hash>`), each
///   written to a temporary name, fsynced, renamed into place and its directory fsynced before its row commits.
/// - ``PostgresNoteStore`` keeps them in the database (`chunk_data`, one `bytea` per chunk), so that every daemon
///   behind one address serves every chunk.
///
/// Chunks are per account: every method is scoped by account ID, an account never learns whether another has a
/// chunk (no deduplication across accounts), and within an account a chunk is stored once, whatever refers to it.
/// A store treats chunks as opaque bytes. Both stores pass one conformance suite (`ChunkStoreConformance`).
public protocol ChunkStore: Sendable {
    /// Which of `hashes` the account has no chunk for, in the order given, each once. The chunks it has are
    /// referenced again at `now` (their grace period before garbage collection starts over: a client that learns a
    /// chunk is there will refer to it rather than send it).
    func missingChunks(accountID: FlakeID, among hashes: [ContentHash], now: Int64) async throws -> [ContentHash]

    /// The size of the account's chunk `hash`, nil when it has none.
    func chunkSize(accountID: FlakeID, hash: ContentHash) async throws -> Int?

    /// Receives a chunk's bytes from `body` as they arrive and stores them under `hash` for the account, durably
    /// before it returns ``ChunkWrite/created(size:)``; ``ChunkWrite/existed(size:)`` when the account already had
    /// it (nothing is rewritten). Nothing is stored when it throws.
    ///
    /// The bytes are hashed as they arrive (``ChunkReceiver``). The account's `chunk_bytes` running total grows by
    /// the chunk's size in the transaction that stores its row, only if its stored bytes (``AccountUsage/storedBytes``)
    /// stay within `byteLimit`.
    ///
    /// - Throws: ``ChunkStoreError`` (too large, empty, hash mismatch, over the quota, body unreadable),
    ///   ``NoteStoreError/accountNotFound``, or a backend error.
    func storeChunk(
        accountID: FlakeID, hash: ContentHash, body: some AsyncSequence<ByteBuffer, any Error>, byteLimit: Int64, now: Int64
    ) async throws -> ChunkWrite

    /// The account's chunk `hash`, opened for reading, nil when it has none.
    func readChunk(accountID: FlakeID, hash: ContentHash) async throws -> ChunkContent?

    /// Deletes the chunks no note refers to and none has referenced since `cutoff` (Unix milliseconds), at most
    /// `batch` per round until none is left, and returns what went. A chunk `references` reports referenced has its
    /// `referenced_at` set to `now`; a chunk whose `referenced_at` moved past `cutoff` while the round ran (a
    /// `missing` answer, a note that started referring to it) is kept.
    func collectChunks(references: any ChunkReferences, unreferencedSince cutoff: Int64, now: Int64, batch: Int) async throws -> CollectedChunks

    /// The chunks' own invariants, one human line per problem: every row's bytes present with its size; each
    /// account's `chunk_bytes` equal to the sum of its chunks' sizes; with ``ChunkVerification/all`` every chunk's
    /// bytes hash to its address (a sample of ``ChunkVerification/sampleSize`` with `.sample`); SQLite also lists
    /// chunk files no row names.
    func checkChunks(_ verification: ChunkVerification) async throws -> [String]

    /// How many chunks the store holds and their bytes.
    func chunkStatistics() async throws -> ChunkStatistics
}

/// What ``ChunkStore/storeChunk(accountID:hash:body:byteLimit:now:)`` did.
public enum ChunkWrite: Sendable, Equatable {
    /// Stored now (durably), `size` bytes.
    case created(size: Int)
    /// The account had it already; nothing was written.
    case existed(size: Int)

    public var size: Int {
        switch self {
        case .created(let size), .existed(let size): size
        }
    }
}

/// Why a chunk was not stored (the service answers each with its stable code).
public enum ChunkStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// More than ``ChunkRules/maxChunkBytes`` arrived (413 `chunk_too_large`).
    case tooLarge
    /// No byte arrived (a chunk holds at least one; 400 `empty_chunk`).
    case empty
    /// The bytes hash to `actual`, not to the address they were sent under (400 `chunk_hash_mismatch`).
    case hashMismatch(actual: ContentHash)
    /// Storing `size` more bytes would take the account to `wouldStore`, over `limit` (413 `quota_exceeded`).
    case quotaExceeded(wouldStore: Int64, limit: Int64)
    /// The body could not be read to its end (the client went).
    case bodyUnreadable(String)

    public var description: String {
        switch self {
        case .tooLarge: "the chunk is larger than \(ChunkRules.maxChunkBytes) bytes"
        case .empty: "the chunk is empty"
        case .hashMismatch(let actual): "the chunk's bytes hash to \(actual)"
        case .quotaExceeded(let wouldStore, let limit): "the account would store \(wouldStore) bytes, over its limit of \(limit)"
        case .bodyUnreadable(let reason): "the body could not be read: \(reason)"
        }
    }
}

/// A chunk opened for reading: its size, and its bytes read piecewise (a file 64 KiB at a time, or the one buffer
/// the database returned). Read it once.
public struct ChunkContent: Sendable {
    public let size: Int
    let pieces: @Sendable (_ body: (ByteBuffer) async throws -> Void) async throws -> Void

    init(size: Int, pieces: @escaping @Sendable (_ body: (ByteBuffer) async throws -> Void) async throws -> Void) {
        self.size = size
        self.pieces = pieces
    }

    /// Hands each piece of the chunk to `body`, in order.
    public func read(_ body: (ByteBuffer) async throws -> Void) async throws {
        try await pieces(body)
    }

    /// The whole chunk in one buffer (in process, tests).
    public func collect() async throws -> ByteBuffer {
        var whole = ByteBuffer()
        whole.reserveCapacity(size)
        try await read { piece in
            var piece = piece
            whole.writeBuffer(&piece)
        }
        return whole
    }
}

/// What one collection removed.
public struct CollectedChunks: Sendable, Equatable {
    public var chunks: Int = 0
    public var bytes: Int64 = 0
}

/// How much of the chunks' bytes `notesyncd check` hashes.
public enum ChunkVerification: String, Sendable, CaseIterable {
    /// Presence and size of every chunk, and the hash of ``sampleSize`` chosen at random.
    case sample
    /// Presence, size and hash of every chunk (reads every byte).
    case all

    /// How many chunks `.sample` hashes.
    public static let sampleSize = 100
}

/// The store's chunks, for `notesyncd stats`.
public struct ChunkStatistics: Sendable, Equatable, Codable {
    public var chunks: Int
    public var bytes: Int64
}

/// Which chunks notes refer to: the garbage collector asks it before deleting (``ChunkStore/collectChunks(references:unreferencedSince:now:batch:)``).
///
/// Every ``NoteStore`` answers it from the chunk references its notes and kept versions hold (``StoredNote/chunkRefs``:
/// a plaintext note's manifests' chunks, an encrypted note's pushed `chunkRefs`), live notes, tombstones (a restore
/// brings their attachments back) and history versions alike; ``NoChunkReferences`` says no chunk is referenced (a
/// test's collector). Contract for an
/// implementation: a write that starts referring to a chunk sets the chunk's `referenced_at` to its time in the same
/// transaction (the collector re-checks it before deleting), so that no chunk goes between this answer and the
/// delete.
public protocol ChunkReferences: Sendable {
    /// Of the account's `hashes`, the ones a note of the account refers to.
    func referencedChunks(accountID: FlakeID, among hashes: [ContentHash]) async throws -> Set<ContentHash>
}

/// No note refers to any chunk (every chunk is collected once its grace period has passed).
public struct NoChunkReferences: ChunkReferences {
    public init() {}
    public func referencedChunks(accountID: FlakeID, among hashes: [ContentHash]) async throws -> Set<ContentHash> { [] }
}

/// Receives a chunk body: enforces ``ChunkRules/maxChunkBytes`` as the bytes arrive, hashes them (SHA-256,
/// incrementally) and hands each piece to the store's sink, so that no store holds a body twice nor trusts its
/// address.
enum ChunkReceiver {
    /// Reads `body` to its end, passing each piece to `sink`; returns the size once the bytes hash to `expected`.
    ///
    /// - Throws: ``ChunkStoreError/tooLarge`` as soon as more than the limit arrived, ``ChunkStoreError/empty``,
    ///   ``ChunkStoreError/hashMismatch(actual:)``, ``ChunkStoreError/bodyUnreadable(_:)``, or what `sink` throws.
    static func receive(
        _ body: some AsyncSequence<ByteBuffer, any Error>, expected: ContentHash, limit: Int = ChunkRules.maxChunkBytes,
        into sink: (ByteBuffer) async throws -> Void
    ) async throws -> Int {
        var hasher = SHA256()
        var size = 0
        var iterator = body.makeAsyncIterator()
        while true {
            let next: ByteBuffer?
            do {
                next = try await iterator.next()
            } catch {
                throw ChunkStoreError.bodyUnreadable("\(error)")
            }
            guard let piece = next else { break }
            size += piece.readableBytes
            guard size <= limit else { throw ChunkStoreError.tooLarge }
            piece.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            try await sink(piece)
        }
        guard size > 0 else { throw ChunkStoreError.empty }
        let actual = ContentHash(digest: hasher.finalize())
        guard actual == expected else { throw ChunkStoreError.hashMismatch(actual: actual) }
        return size
    }

    /// The SHA-256 of `bytes` (a stored chunk checked by `notesyncd check`).
    static func hash(_ bytes: some Sequence<ByteBuffer>) -> ContentHash {
        var hasher = SHA256()
        for piece in bytes { piece.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) } }
        return ContentHash(digest: hasher.finalize())
    }
}

/// The SQL both stores run on the `chunks` table (standard SQL that SQLite and PostgreSQL read alike).
enum ChunkQueries {
    /// What the byte limit counts, from the account's running totals (`accounts` columns): ``AccountUsage/storedBytes``
    /// in SQL, the notes' texts, the replay texts, the history's texts and the chunks.
    static let storedBytes = "text_bytes + replay_text_bytes + history_bytes + chunk_bytes"

    /// Each account's `chunk_bytes` against the sum of its chunks' sizes: one line per account that disagrees.
    static let runningTotal = """
        SELECT 'account ' || a.id || ': ' || a.chunk_bytes || ' chunk bytes counted, ' || COALESCE(t.b, 0) || ' stored'
        FROM accounts a LEFT JOIN (SELECT account_id, SUM(size) AS b FROM chunks GROUP BY account_id) t ON t.account_id = a.id
        WHERE a.chunk_bytes <> COALESCE(t.b, 0) LIMIT 20
        """

    /// The chunk references of one account's notes and kept versions (its ID bound twice): one `chunk_refs` text per
    /// row that refers to a chunk (``ChunkRefsColumn``).
    static let accountReferences = """
        SELECT chunk_refs FROM notes WHERE account_id = $1 AND chunk_refs <> ''
        UNION ALL SELECT chunk_refs FROM note_versions WHERE account_id = $1 AND chunk_refs <> ''
        """

    /// Every note and kept version that refers to a chunk: what it is (`note 12`, `version 3 of note 12`), its
    /// account, its `chunk_refs`.
    static let allReferences = """
        SELECT 'note ' || server_id, account_id, chunk_refs FROM notes WHERE chunk_refs <> ''
        UNION ALL SELECT 'version ' || version || ' of note ' || server_id, account_id, chunk_refs FROM note_versions
        WHERE chunk_refs <> ''
        """

    /// Of `references` (``allReferences``' rows), one line per note or version that refers to a chunk its account does
    /// not store (`stored` holds `account/hash` keys), at most `limit`.
    static func absentChunks(_ references: [(what: String, account: Int64, refs: String)], stored: Set<String>, limit: Int = 1000) -> [String] {
        var problems: [String] = []
        for (what, account, refs) in references {
            for hash in ChunkRefsColumn.hashes(refs) where !stored.contains("\(account)/\(hash.hex)") {
                guard problems.count < limit else { return problems }
                problems.append("\(what) of account \(account) refers to chunk \(hash), which the account does not store")
            }
        }
        return problems
    }

    /// Of `hashes`, those the `chunk_refs` texts name.
    static func referenced(_ hashes: [ContentHash], by texts: some Sequence<String>) -> Set<ContentHash> {
        let wanted = Set(hashes)
        var referenced = Set<ContentHash>()
        for text in texts {
            for hash in ChunkRefsColumn.hashes(text) where wanted.contains(hash) { referenced.insert(hash) }
        }
        return referenced
    }
}
