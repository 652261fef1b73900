import Crypto
import Foundation
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import Synchronization
import Testing
import TestSupport

@testable import NotesClient

/// Attachments' chunks in process (issue 33, phase 1): the chunker, uploads that send only what the server lacks
/// and resume, downloads that check every byte, and the errors a caller sees.
@Suite("Attachments")
struct AttachmentTests {
    /// `count` seeded bytes.
    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var random = SplitMix64(seed: seed)
        return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
    }

    static func file(_ directory: URL, _ name: String, _ data: Data) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try data.write(to: url)
        return url
    }

    static let mib = 1 << 20

    @Test(arguments: [0, 1, mib - 1, mib, mib + 1, 5 * mib / 2])
    func theChunkerSplitsAFileIntoAddressedChunks(_ size: Int) async throws {
        try await withTemporaryDirectory("chunker") { directory in
            let data = Self.bytes(size, seed: UInt64(size))
            var chunker = try Chunker(file: try Self.file(directory, "f", data))
            var chunks: [(ContentHash, Data)] = []
            while let chunk = try chunker.next() { chunks.append(chunk) }
            let (total, sha256) = chunker.finish()
            #expect(total == Int64(size))
            #expect(sha256 == ContentHash(digest: SHA256.hash(data: data)))
            #expect(chunks.count == ChunkRules.chunkCount(size: Int64(size)))
            for (index, (hash, bytes)) in chunks.enumerated() {
                let expected = data[(index * Self.mib)..<min(data.count, (index + 1) * Self.mib)]
                #expect(bytes == expected)
                #expect(hash == ContentHash(digest: SHA256.hash(data: expected)))
            }
        }
    }

    /// Alice on a server (in process, behind a recording transport), with her device's data in `directory`.
    static func alice(_ directory: URL, quota: AccountQuota = .default) async throws -> (InProcessServer, FaultInjectingTransport, NotesClient) {
        let server = try InProcessServer(
            store: try SQLiteNoteStore.temporary(), instance: 1000, quota: quota, tokenSeed: 7, logger: quietLogger)
        let transport = FaultInjectingTransport(server.transport)
        let client = try makeDevice(transport, seed: 1, home: directory.appendingPathComponent("alice"))
        try await signUp(client, "alice")
        return (server, transport, client)
    }

    static func puts(_ transport: FaultInjectingTransport) -> Int { transport.requests.filter { $0.method == .put }.count }
    static func gets(_ transport: FaultInjectingTransport) -> Int {
        transport.requests.filter { $0.method == .get && $0.path.hasPrefix("/v1/chunks/") }.count
    }

    @Test func anUploadSendsOnlyWhatTheServerLacksAndADownloadChecksEveryByte() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (server, transport, alice) = try await Self.alice(directory)
            let data = Self.bytes(3 * Self.mib + 4321, seed: 1)
            let source = try Self.file(directory, "scan.pdf", data)

            let first = try await alice.uploadAttachment(file: source)
            #expect(first.manifest.name == "scan.pdf" && first.manifest.mediaType == "application/pdf")
            #expect(first.manifest.size == Int64(data.count) && first.manifest.chunks.count == 4)
            #expect(first.manifest.sha256 == ContentHash(digest: SHA256.hash(data: data)))
            #expect(first.chunksTransferred == 4 && first.bytesTransferred == Int64(data.count) && first.chunksSkipped == 0)
            #expect(Self.puts(transport) == 4)
            #expect(alice.hasAttachment(first.manifest))

            // The same file again, or under another name (a second note): nothing is sent.
            let again = try await alice.uploadAttachment(file: source, name: "copy.pdf")
            #expect(again.chunksTransferred == 0 && again.chunksSkipped == 4)
            #expect(again.manifest.chunks == first.manifest.chunks && again.manifest.name == "copy.pdf")
            #expect(Self.puts(transport) == 4)

            // A second device downloads it, once; its cache then serves it.
            let otherTransport = FaultInjectingTransport(server.transport)
            let laptop = try makeDevice(otherTransport, seed: 2, home: directory.appendingPathComponent("laptop"))
            try await signIn(laptop, "alice")
            #expect(!laptop.hasAttachment(first.manifest))
            let saved = directory.appendingPathComponent("saved.pdf")
            let download = try await laptop.downloadAttachment(first.manifest, to: saved)
            #expect(try Data(contentsOf: saved) == data)
            #expect(download.chunksTransferred == 4 && download.chunksSkipped == 0)
            let again2 = try await laptop.downloadAttachment(first.manifest, to: directory.appendingPathComponent("again.pdf"))
            #expect(again2.chunksTransferred == 0 && again2.chunksSkipped == 4)
            #expect(Self.gets(otherTransport) == 4)
            #expect(laptop.hasAttachment(first.manifest))

            // The server counts them in the account's bytes.
            let account = try #require(try alice.account())
            let usage = try #require(try await server.services.accounts.store.usage(accountID: account.accountID))
            #expect(usage.chunkBytes == Int64(data.count))
        }
    }

    /// An upload cut after two chunks (the connection refused from then on, retries exhausted) sends only the
    /// remaining chunks when called again; an answer lost after the server stored a chunk costs that one chunk again.
    @Test func anInterruptedUploadResumesWithoutSendingStoredChunksAgain() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (_, transport, alice) = try await Self.alice(directory)
            let source = try Self.file(directory, "video.mp4", Self.bytes(6 * Self.mib, seed: 2))
            let stored = Atomic(0)
            transport.setPlan { request, _ in
                guard request.method == .put else { return nil }
                return stored.add(1, ordering: .relaxed).newValue > 2 ? .refuse : nil
            }
            await #expect(throws: NotesError.self) { try await alice.uploadAttachment(file: source) }
            let beforeResume = Self.puts(transport)
            transport.setPlan { _, _ in nil }
            let resumed = try await alice.uploadAttachment(file: source)
            #expect(resumed.chunksTransferred == 4 && resumed.chunksSkipped == 2, "only the four chunks the server lacks")
            #expect(Self.puts(transport) - beforeResume == 4)

            // A lost answer: the server stored the chunk; the retry sends that one chunk again (200, not stored twice).
            let other = try Self.file(directory, "other.bin", Self.bytes(3 * Self.mib, seed: 3))
            let dropped = Atomic(false)
            transport.setPlan { request, _ in
                request.method == .put && !dropped.exchange(true, ordering: .relaxed) ? .dropAnswer : nil
            }
            let before = Self.puts(transport)
            let upload = try await alice.uploadAttachment(file: other)
            #expect(upload.chunksTransferred == 3)
            #expect(Self.puts(transport) - before == 4, "three chunks and the one whose answer was lost")
        }
    }

    /// An upload keeps ``ChunkUploader/inFlight`` (two) chunk PUTs in flight, never more: the first PUT is held until
    /// a second one arrives, which a one-at-a-time upload never sends (the hold then gives up after 20 s and the test
    /// fails on the count rather than hanging).
    @Test func anUploadKeepsTwoChunksInFlight() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (server, _, _) = try await Self.alice(directory)
            let probe = InFlightProbe(server.transport)
            let phone = try makeDevice(probe, seed: 5, home: directory.appendingPathComponent("phone"))
            try await signIn(phone, "alice")
            let source = try Self.file(directory, "film.bin", Self.bytes(6 * Self.mib, seed: 9))
            let upload = try await phone.uploadAttachment(file: source)
            #expect(upload.chunksTransferred == 6)
            #expect(probe.most == ChunkUploader.inFlight, "two PUTs at once, never more")
            #expect(!probe.gaveUp, "the second PUT was sent while the first was still unanswered")
        }
    }

    /// An upload whose task is cancelled stops at once: the request that failed because of it is not retried (each
    /// retry would fail at once too; before, the retry policy's every attempt was spent on it).
    @Test func aCancelledUploadIsNotRetried() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (server, _, _) = try await Self.alice(directory)
            let transport = FaultInjectingTransport(server.transport)
            let phone = try makeDevice(transport, seed: 4, home: directory.appendingPathComponent("phone"), retry: RetryPolicy(maxAttempts: 10))
            try await signIn(phone, "alice")
            let source = try Self.file(directory, "video.mp4", Self.bytes(4 * Self.mib, seed: 8))
            let running = Mutex<Task<AttachmentTransfer, any Error>?>(nil)
            let puts = Atomic(0)
            transport.setPlan { request, _ in
                guard request.method == .put else { return nil }
                // The second PUT fails as the user cancels the upload.
                guard puts.add(1, ordering: .relaxed).newValue >= 2 else { return nil }
                running.withLock { $0 }?.cancel()
                return .refuse
            }
            let started = AsyncStream<Void>.makeStream()
            let upload = Task<AttachmentTransfer, any Error> {
                for await _ in started.stream {}
                return try await phone.uploadAttachment(file: source)
            }
            running.withLock { $0 = upload }
            started.continuation.finish()
            await #expect(throws: NotesError.self) { _ = try await upload.value }
            // Two PUTs are in flight at once, so a third may have started before the cancellation; none is sent twice.
            let sent = transport.requests.filter { $0.method == .put }.map(\.path)
            #expect(sent.count >= 2 && sent.count <= 1 + ChunkUploader.inFlight)
            #expect(Set(sent).count == sent.count, "the failed PUT was not sent again")
        }
    }

    @Test func aDownloadRefusesBytesThatDoNotMatchAndSavesNothing() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (_, transport, alice) = try await Self.alice(directory)
            let data = Self.bytes(Self.mib + 10, seed: 4)
            let manifest = try await alice.uploadAttachment(file: try Self.file(directory, "a.bin", data)).manifest
            // A fresh device (empty cache) whose server answers a chunk with other bytes.
            let laptop = try makeDevice(transport, seed: 2, home: directory.appendingPathComponent("laptop"))
            try await signIn(laptop, "alice")
            transport.setPlan { request, _ in
                request.method == .get && request.path.hasPrefix("/v1/chunks/")
                    ? .replace(WireResponse(status: 200, body: Data(repeating: 7, count: 10))) : nil
            }
            let saved = directory.appendingPathComponent("saved.bin")
            await #expect { try await laptop.downloadAttachment(manifest, to: saved) } throws: {
                ($0 as? NotesError)?.code == .attachmentCorrupt
            }
            #expect(!FileManager.default.fileExists(atPath: saved.path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).allSatisfy { !$0.contains("partial") })
            // A manifest whose checksum is wrong: every chunk is right, the whole is not.
            transport.setPlan { _, _ in nil }
            var forged = manifest
            forged.sha256 = manifest.chunks[0]
            await #expect { try await laptop.downloadAttachment(forged, to: saved) } throws: {
                ($0 as? NotesError)?.code == .attachmentCorrupt
            }
            #expect(!FileManager.default.fileExists(atPath: saved.path))
            _ = try await laptop.downloadAttachment(manifest, to: saved)
            #expect(try Data(contentsOf: saved) == data)
        }
    }

    @Test func anotherAccountsChunksCannotBeDownloaded() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (server, _, alice) = try await Self.alice(directory)
            let manifest = try await alice.uploadAttachment(file: try Self.file(directory, "a.bin", Self.bytes(1000, seed: 5))).manifest
            let bob = try makeDevice(server.transport, seed: 3, home: directory.appendingPathComponent("bob"))
            try await signUp(bob, "bob")
            await #expect { try await bob.downloadAttachment(manifest, to: directory.appendingPathComponent("x")) } throws: {
                let error = $0 as? NotesError
                return error?.code == .attachmentCorrupt && error?.api?.code == .chunkNotFound
            }
        }
    }

    @Test func unreadableFilesAndTheQuotaAreClearErrors() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let (_, _, alice) = try await Self.alice(directory, quota: AccountQuota(maxNotes: 10, maxTextBytes: 2 * Int64(Self.mib)))
            await #expect { try await alice.uploadAttachment(file: directory.appendingPathComponent("nope")) } throws: {
                ($0 as? NotesError)?.code == .fileAccess
            }
            await #expect { try await alice.uploadAttachment(file: directory) } throws: { ($0 as? NotesError)?.code == .fileAccess }
            let big = try Self.file(directory, "big.bin", Self.bytes(3 * Self.mib, seed: 6))
            await #expect { try await alice.uploadAttachment(file: big) } throws: {
                let error = $0 as? NotesError
                return error?.api?.code == .quotaExceeded && error?.httpStatus == 413
            }
            await #expect { try await alice.uploadAttachment(file: big, name: "a/b") } throws: { ($0 as? NotesError)?.code == .invalidInput }
        }
    }

    /// The chunk cache keeps at most its limit after a transfer, the chunks used least recently going first, and drops
    /// what a killed transfer left in its incoming directory an hour ago; a pruned chunk is fetched again when needed.
    @Test func theChunkCacheIsPrunedToItsLimitAfterEachTransfer() async throws {
        try await withTemporaryDirectory("attachments") { directory in
            let server = try InProcessServer(store: try SQLiteNoteStore.temporary(), instance: 1000, tokenSeed: 7, logger: quietLogger)
            let transport = FaultInjectingTransport(server.transport)
            let clock = ManualFlakeClock(unixMilliseconds: 1_800_000_000_000)
            var environment = NotesEnvironment(
                clock: clock, random: SplitMix64(seed: 1), transport: NotesEnvironment.fixed(transport), sleep: { _ in },
                retry: RetryPolicy(maxAttempts: 3), deviceName: "device-1")
            environment.chunkCacheLimit = 4 * Int64(Self.mib)
            let alice = try NotesClient.open(home: directory.appendingPathComponent("alice"), environment: environment)
            try await signUp(alice, "alice")
            let cache = alice.chunkCache
            func cachedBytes() -> Int64 {
                let files = FileManager.default.enumerator(at: cache.root, includingPropertiesForKeys: [.fileSizeKey])?.allObjects as? [URL] ?? []
                return files.filter { $0.pathComponents.count == cache.root.pathComponents.count + 2 && !$0.path.contains(".incoming") }
                    .reduce(0) { $0 + Int64((try? $1.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
            }

            let first = try await alice.uploadAttachment(file: try Self.file(directory, "a.bin", Self.bytes(3 * Self.mib, seed: 7))).manifest
            #expect(alice.hasAttachment(first) && cachedBytes() == 3 * Int64(Self.mib))
            // Its chunks were used long ago; a killed transfer left two files being written, one over an hour ago.
            for hash in first.chunks {
                try FileManager.default.setAttributes(
                    [.modificationDate: Date(timeIntervalSince1970: 1_000_000_000)], ofItemAtPath: cache.url(hash).path)
            }
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let stale = cache.incoming.appendingPathComponent("stale")
            let recent = cache.incoming.appendingPathComponent("recent")
            for (file, age) in [(stale, 7200.0), (recent, 60.0)] {
                try Data([1]).write(to: file)
                try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: file.path)
            }

            // Six chunks do not fit in four MiB: the two used least recently (the first file's) go.
            let second = try await alice.uploadAttachment(file: try Self.file(directory, "b.bin", Self.bytes(3 * Self.mib, seed: 8))).manifest
            #expect(cachedBytes() == 4 * Int64(Self.mib))
            #expect(alice.hasAttachment(second) && !alice.hasAttachment(first))
            #expect(first.chunks.filter { cache.contains($0, size: Self.mib) }.count == 1)
            #expect(!FileManager.default.fileExists(atPath: stale.path) && FileManager.default.fileExists(atPath: recent.path))

            // Saving the first file again fetches only what was pruned, then the cache is back under its limit.
            let gets = Self.gets(transport)
            let saved = directory.appendingPathComponent("a-again.bin")
            let download = try await alice.downloadAttachment(first, to: saved)
            #expect(download.chunksTransferred == 2 && Self.gets(transport) - gets == 2)
            #expect(try Data(contentsOf: saved) == Self.bytes(3 * Self.mib, seed: 7))
            #expect(cachedBytes() <= 4 * Int64(Self.mib) && alice.hasAttachment(first))
        }
    }
}

/// Counts the chunk PUTs in flight at once through it; holds the first PUT until a second one is in flight (or 20 s
/// pass: ``gaveUp``).
private final class InFlightProbe: SyncTransport {
    private struct State {
        var running = 0
        var most = 0
        var waiting: CheckedContinuation<Void, Never>?
        var heldFirst = false
        var gaveUp = false
    }

    private let base: any SyncTransport
    private let state = Mutex(State())

    init(_ base: any SyncTransport) { self.base = base }

    var most: Int { state.withLock { $0.most } }
    var gaveUp: Bool { state.withLock { $0.gaveUp } }

    func send(_ request: WireRequest) async throws -> WireResponse { try await base.send(request) }

    func upload(_ request: WireRequest, file: URL) async throws -> WireResponse {
        let hold = state.withLock { state -> Bool in
            state.running += 1
            state.most = max(state.most, state.running)
            if state.running >= 2, let waiting = state.waiting {
                state.waiting = nil
                waiting.resume()
            }
            defer { state.heldFirst = true }
            return !state.heldFirst
        }
        if hold {
            limitHold()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard state.running < 2 else { return true }
                    state.waiting = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        defer { state.withLock { $0.running -= 1 } }
        return try await base.upload(request, file: file)
    }

    /// Starts the 20-s limit on the hold (called once, by the test's first PUT).
    func limitHold() {
        Task { [self] in
            try? await Task.sleep(for: .seconds(20))
            let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiting = state.waiting else { return nil }
                state.waiting = nil
                state.gaveUp = true
                return waiting
            }
            waiting?.resume()
        }
    }
}
