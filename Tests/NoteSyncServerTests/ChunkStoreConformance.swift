import Crypto
import Foundation
import MiniFlake
import NIOCore
import NoteSyncProtocol
import PostgresNIO
import Testing
import TestSupport

@testable import NoteSyncServer

/// The behaviour every ``ChunkStore`` must have, as named checks on a fresh store: run on SQLite (files, on disk and
/// in memory) by `ChunkStoreConformanceTests.sqlite` and on PostgreSQL (`chunk_data`) by `.postgres`.
enum ChunkStoreConformance {
    struct Check: Sendable {
        var name: String
        var body: @Sendable (any NoteStore & ChunkStore) async throws -> Void
    }

    /// `count` bytes from a seeded generator.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
    }

    static func address(_ bytes: [UInt8]) -> ContentHash { ContentHash(digest: SHA256.hash(data: bytes)) }

    /// A body arriving in pieces of `piece` bytes, failing after `failAfter` pieces when set (the client went).
    static func body(_ bytes: [UInt8], piece: Int = 64 << 10, failAfter: Int? = nil) -> AsyncThrowingStream<ByteBuffer, any Error> {
        AsyncThrowingStream { continuation in
            var index = 0
            var sent = 0
            while index < bytes.count {
                if let failAfter, sent == failAfter {
                    continuation.finish(throwing: CancellationError())
                    return
                }
                continuation.yield(ByteBuffer(bytes: bytes[index..<min(index + piece, bytes.count)]))
                index += piece
                sent += 1
            }
            continuation.finish()
        }
    }

    static func put(
        _ store: any ChunkStore, _ account: FlakeID, _ bytes: [UInt8], as hash: ContentHash? = nil, limit: Int64 = .max, now: Int64 = 1000
    ) async throws -> ChunkWrite {
        try await store.storeChunk(accountID: account, hash: hash ?? address(bytes), body: body(bytes), byteLimit: limit, now: now)
    }

    static func read(_ store: any ChunkStore, _ account: FlakeID, _ hash: ContentHash) async throws -> [UInt8]? {
        guard let content = try await store.readChunk(accountID: account, hash: hash) else { return nil }
        let buffer = try await content.collect()
        #expect(buffer.readableBytes == content.size)
        return Array(buffer.readableBytesView)
    }

    static func usage(_ store: any NoteStore, _ account: FlakeID) async throws -> Int64 {
        try #require(try await store.usage(accountID: account)).chunkBytes
    }

    /// Stand-in for phase 2's note references: a fixed set.
    struct References: ChunkReferences {
        let referenced: Set<ContentHash>
        func referencedChunks(accountID: FlakeID, among hashes: [ContentHash]) async throws -> Set<ContentHash> {
            referenced.intersection(hashes)
        }
    }

    /// Damages a stored chunk's bytes (same size) behind the store's back.
    static func damage(_ store: any ChunkStore, _ account: FlakeID, _ hash: ContentHash) async throws {
        if let sqlite = store as? SQLiteNoteStore {
            let path = sqlite.chunkFile(accountID: account, hash: hash).path
            var data = try Data(contentsOf: URL(fileURLWithPath: path))
            data[0] ^= 0xff
            try data.write(to: URL(fileURLWithPath: path))
        } else if let postgres = store as? PostgresNoteStore {
            try await postgres.database.client.execute(
                "UPDATE chunk_data SET data = set_byte(data, 0, get_byte(data, 0) # 255) WHERE account_id = \(account.rawValue) AND hash = \(hash.hex)",
                logger: TestPostgres.logger)
        }
    }

    /// Removes a stored chunk's bytes behind the store's back.
    static func lose(_ store: any ChunkStore, _ account: FlakeID, _ hash: ContentHash) async throws {
        if let sqlite = store as? SQLiteNoteStore {
            try FileManager.default.removeItem(at: sqlite.chunkFile(accountID: account, hash: hash))
        } else if let postgres = store as? PostgresNoteStore {
            try await postgres.database.client.execute("DELETE FROM chunk_data WHERE hash = \(hash.hex)", logger: TestPostgres.logger)
        }
    }

    static let checks: [Check] = attachmentChecks + [
        Check(name: "stored chunks are found and read back") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let chunks = [bytes(1 << 20, seed: 1), bytes(1, seed: 2), bytes(300_000, seed: 3)]
            for chunk in chunks { #expect(try await put(store, alice, chunk) == .created(size: chunk.count)) }
            let absent = address(bytes(10, seed: 4))
            let asked = chunks.map(address) + [absent, address(chunks[0]), absent]
            #expect(try await store.missingChunks(accountID: alice, among: asked, now: 2000) == [absent])
            #expect(try await store.missingChunks(accountID: alice, among: [], now: 2000) == [])
            for chunk in chunks {
                #expect(try await read(store, alice, address(chunk)) == chunk)
                #expect(try await store.chunkSize(accountID: alice, hash: address(chunk)) == chunk.count)
            }
            #expect(try await read(store, alice, absent) == nil)
            #expect(try await usage(store, alice) == Int64(chunks.map(\.count).reduce(0, +)))
            #expect(try await store.chunkStatistics() == ChunkStatistics(chunks: 3, bytes: Int64(chunks.map(\.count).reduce(0, +))))
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "a chunk is stored once") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let chunk = bytes(200_000, seed: 5)
            let writes = try await withThrowingTaskGroup(of: ChunkWrite.self) { group in
                for _ in 0..<4 { group.addTask { try await put(store, alice, chunk) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(writes.filter { $0 == .created(size: chunk.count) }.count == 1, "\(writes)")
            #expect(writes.filter { $0 == .existed(size: chunk.count) }.count == 3)
            #expect(try await put(store, alice, chunk) == .existed(size: chunk.count))
            #expect(try await usage(store, alice) == Int64(chunk.count))
            #expect(try await store.chunkStatistics().chunks == 1)
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "refused bodies store nothing") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let chunk = bytes(100_000, seed: 6)
            let other = address(bytes(100_000, seed: 7))
            await #expect(throws: ChunkStoreError.hashMismatch(actual: address(chunk))) { try await put(store, alice, chunk, as: other) }
            let tooLarge = bytes(ChunkRules.maxChunkBytes + 1, seed: 8)
            await #expect(throws: ChunkStoreError.tooLarge) { try await put(store, alice, tooLarge) }
            await #expect(throws: ChunkStoreError.empty) { try await put(store, alice, []) }
            await #expect(throws: ChunkStoreError.self) {
                try await store.storeChunk(
                    accountID: alice, hash: address(chunk), body: body(chunk, piece: 10_000, failAfter: 3), byteLimit: .max, now: 1)
            }
            #expect(try await store.missingChunks(accountID: alice, among: [address(chunk), other, address(tooLarge)], now: 1).count == 3)
            #expect(try await usage(store, alice) == 0)
            #expect(try await store.chunkStatistics() == ChunkStatistics(chunks: 0, bytes: 0))
            if let sqlite = store as? SQLiteNoteStore {
                let incoming = sqlite.chunkDirectory.appendingPathComponent(SQLiteNoteStore.incomingDirectoryName).path
                #expect(((try? FileManager.default.contentsOfDirectory(atPath: incoming)) ?? []).isEmpty, "no partial file is left")
                #expect(ChunkFiles.chunkFiles(under: sqlite.chunkDirectory.path).isEmpty)
            }
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "accounts never see each other's chunks") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let bob = try await NoteStoreConformance.makeAccount(store, "bob")
            let chunk = bytes(50_000, seed: 9)
            let hash = address(chunk)
            #expect(try await put(store, alice, chunk) == .created(size: chunk.count))
            #expect(try await store.missingChunks(accountID: bob, among: [hash], now: 2) == [hash])
            #expect(try await store.chunkSize(accountID: bob, hash: hash) == nil)
            #expect(try await read(store, bob, hash) == nil)
            // Bob's copy is his own: stored (and counted) again, not shared.
            #expect(try await put(store, bob, chunk) == .created(size: chunk.count))
            #expect(try await usage(store, alice) == Int64(chunk.count))
            #expect(try await usage(store, bob) == Int64(chunk.count))
            #expect(try await store.deleteAccount(id: alice))
            #expect(try await read(store, bob, hash) == chunk)
            #expect(try await store.chunkStatistics() == ChunkStatistics(chunks: 1, bytes: Int64(chunk.count)))
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "chunks count in the byte quota both ways") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let results = try await store.push(
                accountID: alice, changes: [change(1, edit: 2, text: String(repeating: "x", count: 1000))],
                context: NoteStoreConformance.context())
            #expect(results[0].status == .created)
            // The note's text counts twice (the note and its first version in the history), the chunk once.
            let chunk = bytes(3000, seed: 10)
            await #expect(throws: ChunkStoreError.quotaExceeded(wouldStore: 5000, limit: 4999)) {
                try await put(store, alice, chunk, limit: 4999)
            }
            #expect(try await store.missingChunks(accountID: alice, among: [address(chunk)], now: 1).count == 1)
            #expect(try await put(store, alice, chunk, limit: 5000) == .created(size: 3000))
            #expect(
                try await store.usage(accountID: alice)
                    == AccountUsage(noteCount: 1, textBytes: 1000, historyBytes: 1000, chunkBytes: 3000))
            // A push that would grow the account past the limit is refused: chunks count there too.
            var context = NoteStoreConformance.context()
            context.quota = AccountQuota(maxNotes: 10, maxTextBytes: 5015)
            let refused = try await store.push(accountID: alice, changes: [change(3, edit: 4, text: "0123456789")], context: context)
            #expect(refused[0].status == .rejected && refused[0].error?.code == .quotaExceeded)
            // An existing chunk is answered whatever the limit.
            #expect(try await put(store, alice, chunk, limit: 0) == .existed(size: 3000))
        },
        Check(name: "garbage collection keeps referenced and recent chunks") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let bob = try await NoteStoreConformance.makeAccount(store, "bob")
            let (old, referenced, recent, asked) = (bytes(1000, seed: 11), bytes(2000, seed: 12), bytes(3000, seed: 13), bytes(4000, seed: 14))
            for chunk in [old, referenced, asked] { _ = try await put(store, alice, chunk, now: 100) }
            _ = try await put(store, alice, recent, now: 5000)
            _ = try await put(store, bob, old, now: 100)
            // A `missing` answer that found it refers to it again (its client will refer to it rather than send it).
            #expect(try await store.missingChunks(accountID: alice, among: [address(asked)], now: 2000) == [])
            let references = References(referenced: [address(referenced)])
            let collected = try await store.collectChunks(references: references, unreferencedSince: 1000, now: 6000, batch: 1)
            #expect(collected == CollectedChunks(chunks: 2, bytes: 2000), "alice's and bob's old chunks")
            #expect(try await store.missingChunks(accountID: alice, among: [old, referenced, recent, asked].map(address), now: 6000)
                == [address(old)])
            #expect(try await store.missingChunks(accountID: bob, among: [address(old)], now: 6000) == [address(old)])
            #expect(try await usage(store, alice) == 9000)
            #expect(try await usage(store, bob) == 0)
            #expect(try await read(store, alice, address(referenced)) == referenced)
            // The `missing` answer at 6000 referred to all three again: a round with a cutoff before that keeps them ...
            let kept = try await store.collectChunks(references: References(referenced: []), unreferencedSince: 5500, now: 7000, batch: 10)
            #expect(kept == CollectedChunks())
            // ... and one after it collects all but the one a note refers to.
            let later = try await store.collectChunks(references: references, unreferencedSince: 6500, now: 7000, batch: 10)
            #expect(later == CollectedChunks(chunks: 2, bytes: 7000), "the recent and the asked one")
            #expect(try await usage(store, alice) == 2000)
            #expect(try await read(store, alice, address(referenced)) == referenced)
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "check finds lost and damaged chunks") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let (lost, damaged, fine) = (bytes(1000, seed: 15), bytes(2000, seed: 16), bytes(3000, seed: 17))
            for chunk in [lost, damaged, fine] { _ = try await put(store, alice, chunk) }
            try await lose(store, alice, address(lost))
            try await damage(store, alice, address(damaged))
            let all = try await store.checkChunks(.all)
            #expect(all.count == 2, "\(all)")
            #expect(all.contains { $0.contains(address(lost).hex) && $0.contains("missing") })
            #expect(all.contains { $0.contains(address(damaged).hex) && $0.contains("hash") })
            // A sample of 100 hashes all three: the same finding.
            #expect(try await store.checkChunks(.sample).count == 2)
        },
    ]
}

@Suite("Chunk store conformance")
struct ChunkStoreConformanceTests {
    @Test(arguments: StoreKind.allCases, ChunkStoreConformance.checks.map(\.name))
    func sqlite(_ kind: StoreKind, _ check: String) async throws {
        let store = try #require(try kind.make() as? SQLiteNoteStore)
        try await #require(ChunkStoreConformance.checks.first { $0.name == check }).body(store)
        try? await store.close()
    }

    @Test(.enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"), arguments: ChunkStoreConformance.checks.map(\.name))
    func postgres(_ check: String) async throws {
        let store = try await TestPostgres.store()
        try await #require(ChunkStoreConformance.checks.first { $0.name == check }).body(store)
        try? await store.close()
    }

    /// SQLite: a file no row names (an upload or a collection a crash cut short) is listed by check; the in-memory
    /// store's chunk directory goes with it.
    @Test func sqliteListsOrphanFilesAndCleansUp() async throws {
        let store = try SQLiteNoteStore.inMemory()
        let alice = try await NoteStoreConformance.makeAccount(store, "alice")
        let chunk = ChunkStoreConformance.bytes(100, seed: 18)
        _ = try await ChunkStoreConformance.put(store, alice, chunk)
        let orphan = store.chunkFile(accountID: alice, hash: ChunkStoreConformance.address([1, 2, 3]))
        try FileManager.default.createDirectory(at: orphan.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: orphan)
        let problems = try await store.checkChunks(.sample)
        #expect(problems.count == 1 && problems[0].contains("named by no row"), "\(problems)")
        let directory = store.chunkDirectory
        try await store.close()
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }
}
