import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Synchronization
import Testing
import TestSupport

/// Attachments' chunks (issue 33, phase 1) against the real `notesyncd`, the client library over URLSession: an
/// upload killed halfway resumes without sending what the server stored, a download resumes across a daemon restart,
/// another account sees nothing, and the operator's `check`, `stats` and `backup` cover the chunk files.
@Suite("attachments, end to end", .serialized, .enabled(if: Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)"))
struct AttachmentsEndToEndTests {
    static let mib = 1 << 20

    /// A client with its data in `home`, over URLSession, retrying for up to about ten seconds (a daemon restart).
    static func device(_ home: URL, transport: CountingChunkTransport) throws -> NotesClient {
        let environment = NotesEnvironment(
            transport: NotesEnvironment.fixed(transport),
            retry: RetryPolicy(maxAttempts: 40, initialDelay: .milliseconds(100), maxDelay: .milliseconds(250)), deviceName: "e2e")
        return try NotesClient.open(home: home, environment: environment)
    }

    @Test func aKilledUploadAndARestartedDaemonResumeWhereTheyStopped() async throws {
        let directory = try NotesE2E.temporaryDirectory("attachments")
        defer { try? FileManager.default.removeItem(at: directory) }
        let dataDirectory = directory.appendingPathComponent("data").path
        let log = directory.appendingPathComponent("notesyncd.log")
        let daemon = Mutex(try await DaemonProcess.startOnRestartablePort(["--data-dir", dataDirectory], log: log))
        let port = daemon.withLock { $0.port }
        let url = "http://127.0.0.1:\(port)"
        var random = SplitMix64(seed: 33)
        let data = Data((0..<(12 * Self.mib + 777)).map { _ in UInt8.random(in: 0...255, using: &random) })
        let source = directory.appendingPathComponent("film.mov")
        try data.write(to: source)

        // 1. Alice's upload is killed (its task cancelled, the request in flight cut) once six chunks are stored.
        let aliceTransport = CountingChunkTransport(URLSessionTransport(baseURL: try #require(URL(string: url))))
        let alice = try Self.device(directory.appendingPathComponent("alice"), transport: aliceTransport)
        _ = try await alice.signUp(server: url, username: "alice", password: NotesE2E.password).sync.get()
        let running = RunningTask()
        let upload = Task<AttachmentTransfer, any Error> {
            try await alice.uploadAttachment(file: source) { progress in
                // From another task, so that the next chunk is usually in flight when the cancellation lands.
                if progress.chunksTransferred == 6 { Task { running.cancel() } }
            }
        }
        running.set(upload)
        await #expect(throws: (any Error).self) { _ = try await upload.value }
        let firstPuts = aliceTransport.uploads
        #expect(firstPuts >= 6 && firstPuts < 13, "\(firstPuts)")
        // Run again, it sends only what the server lacks: at most one chunk more than the remaining half.
        let resumed = try await alice.uploadAttachment(file: source)
        #expect(resumed.manifest.chunks.count == 13)
        #expect(resumed.chunksTransferred + resumed.chunksSkipped == 13)
        #expect(resumed.chunksTransferred <= 13 - 6, "\(resumed.chunksTransferred) sent on resume")
        #expect(aliceTransport.uploads <= 13 + 1, "\(aliceTransport.uploads) PUTs in all for 13 chunks: at most the one in flight again")
        // The same file again (a second note): nothing is sent.
        let again = try await alice.uploadAttachment(file: source, name: "copy.mov")
        #expect(again.chunksTransferred == 0 && again.chunksSkipped == 13)

        // 2. Her laptop downloads it; the daemon is killed and restarted after four chunks, and the download goes on.
        let laptopTransport = CountingChunkTransport(URLSessionTransport(baseURL: try #require(URL(string: url))))
        let laptop = try Self.device(directory.appendingPathComponent("laptop"), transport: laptopTransport)
        _ = try await laptop.signIn(server: url, username: "alice", password: NotesE2E.password).sync.get()
        let restarted = Task<Void, any Error> { @Sendable in
            await laptopTransport.downloaded(4)
            let old = daemon.withLock { $0 }
            await old.kill9()
            let new = try await DaemonProcess.start(["--port", "\(port)", "--data-dir", dataDirectory], log: log)
            daemon.withLock { $0 = new }
        }
        let saved = directory.appendingPathComponent("saved.mov")
        let download = try await laptop.downloadAttachment(resumed.manifest, to: saved)
        try await restarted.value
        #expect(try Data(contentsOf: saved) == data)
        #expect(download.chunksTransferred == 13, "each chunk fetched once")
        #expect(laptopTransport.downloads - laptopTransport.failedDownloads == 13)

        // 3. Bob sees none of it.
        let bob = APIClient(transport: URLSessionTransport(baseURL: try #require(URL(string: url))))
        try await bob.signUp("bob", NotesE2E.password)
        let bobToken = try await bob.signIn("bob", NotesE2E.password).token
        let missing = try await bob.call(.missingChunks, token: bobToken, json: MissingChunksRequest(hashes: resumed.manifest.chunks))
        #expect(try bob.decode(MissingChunksResponse.self, missing).missing == resumed.manifest.chunks)
        let get = try await bob.send(WireRequest(.getChunk, hash: resumed.manifest.chunks[0], bearerToken: bobToken), nil)
        #expect(get.status == 404 && get.errorCode == .chunkNotFound)

        // 4. The operator: stats count them, check hashes them all, a backup carries them, a damaged file is found.
        let stats = try await OperatorsEndToEndTests.notesyncd(["--data-dir", dataDirectory, "stats", "--json"])
        #expect(stats.status == 0)
        #expect(stats.output.contains("\"chunks\":13") && stats.output.contains("\"chunkBytes\":\(data.count)"), "\(stats.output)")
        let check = try await OperatorsEndToEndTests.notesyncd(["--data-dir", dataDirectory, "check", "--chunks", "all"])
        #expect(check.status == 0 && check.output.contains("13 chunks"), "\(check.output)")
        let backup = directory.appendingPathComponent("backup.sqlite").path
        let backedUp = try await OperatorsEndToEndTests.notesyncd(["--data-dir", dataDirectory, "backup", backup])
        #expect(backedUp.status == 0 && backedUp.output.contains("13 chunks"), "\(backedUp.output)")
        let copied = try FileManager.default.subpathsOfDirectory(atPath: backup + ".chunks").filter { $0.split(separator: "/").count == 3 }
        #expect(copied.count == 13)
        let file = try #require(
            FileManager.default.subpathsOfDirectory(atPath: dataDirectory + "/chunks").first { $0.hasSuffix(resumed.manifest.chunks[3].hex) })
        let path = dataDirectory + "/chunks/" + file
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data([0, 1, 2, 3]))
        try handle.close()
        let damaged = try await OperatorsEndToEndTests.notesyncd(["--data-dir", dataDirectory, "check", "--chunks", "all"])
        #expect(damaged.status == 2 && damaged.output.contains(resumed.manifest.chunks[3].hex), "\(damaged.output)")
        await daemon.withLock { $0 }.kill9()
    }

    /// Hostile chunk requests over a real socket: each a 4xx with the protocol's JSON body, nothing stored.
    @Test func hostileChunkRequestsAreRefusedAndStoreNothing() async throws {
        let directory = try NotesE2E.temporaryDirectory("attachments-hostile")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await OperatorsEndToEndTests.start(["--data-dir", directory.appendingPathComponent("data").path], directory: directory)
        let transport = URLSessionTransport(baseURL: try #require(URL(string: daemon.url)))
        let api = APIClient(transport: transport)
        try await api.signUp("alice", NotesE2E.password)
        let token = try await api.signIn("alice", NotesE2E.password).token
        let bytes = Data(repeating: 42, count: 5000)
        // A well-formed address that these bytes do not hash to.
        let good = try #require(ContentHash("1a6bd7f0a8d46c7e4dcb0f3d8b1b0e6de3e7ab5ad81a3d13dbe4ab6ac2c62d47"))
        let file = directory.appendingPathComponent("chunk")
        func put(_ path: String, _ body: Data, token: String? = token) async throws -> WireResponse {
            try body.write(to: file)
            return try await transport.upload(WireRequest(method: .put, path: path, bearerToken: token), file: file)
        }
        let path = Endpoint.putChunk.path(hash: good)
        var refusals: [(String, WireResponse, Int, APIErrorCode)] = [
            ("bad hash", try await put("/v1/chunks/NOTAHASH", bytes), 400, .invalidHash),
            ("no token", try await put(path, bytes, token: nil), 401, .unauthorized),
            ("json body", try await transport.send(WireRequest(method: .put, path: path, bearerToken: token, body: bytes)), 415, .unsupportedMediaType),
            ("mismatch", try await put(path, bytes), 400, .chunkHashMismatch),
            ("too large", try await put(path, Data(count: ChunkRules.maxChunkBytes + 1)), 413, .chunkTooLarge),
            ("empty", try await put(path, Data()), 400, .emptyChunk),
        ]
        refusals.append(("get bad hash", try await transport.send(WireRequest(method: .get, path: "/v1/chunks/xyz", bearerToken: token)), 400, .invalidHash))
        refusals.append(("get unknown", try await transport.send(WireRequest(.getChunk, hash: good, bearerToken: token)), 404, .chunkNotFound))
        refusals.append(("get missing", try await transport.send(WireRequest(method: .get, path: "/v1/chunks/missing", bearerToken: token)), 405, .methodNotAllowed))
        let many = MissingChunksRequest(hashes: Array(repeating: good, count: ChunkRules.maxMissingHashes + 1))
        refusals.append(("too many", try await api.call(.missingChunks, token: token, json: many), 413, .batchTooLarge))
        refusals.append(("bad hash in body", try await api.call(.missingChunks, token: token, rawJSON: #"{"hashes":["00"]}"#), 400, .invalidHash))
        refusals.append(("garbage", try await api.call(.missingChunks, token: token, rawJSON: "{hashes"), 400, .invalidJSON))
        for (label, response, status, code) in refusals {
            #expect(response.status == status && response.errorCode == code, "\(label): \(response.status) \(response.text)")
        }
        let missing = try await api.call(.missingChunks, token: token, json: MissingChunksRequest(hashes: [good]))
        #expect(try api.decode(MissingChunksResponse.self, missing).missing == [good], "nothing was stored")
        await daemon.terminate()
    }
}

/// The task of an upload, for its own progress callback to cancel.
final class RunningTask: Sendable {
    private let task = Mutex<Task<AttachmentTransfer, any Error>?>(nil)
    func set(_ task: Task<AttachmentTransfer, any Error>) { self.task.withLock { $0 = task } }
    func cancel() { task.withLock { $0 }?.cancel() }
}

/// Counts the chunk transfers a transport carries (uploads, downloads and failed downloads), passing them on to the
/// real transport's streaming methods.

final class CountingChunkTransport: SyncTransport {
    private let base: any SyncTransport
    private let state = Mutex<(uploads: Int, downloads: Int, failedDownloads: Int, waiters: [(Int, CheckedContinuation<Void, Never>)])>(
        (0, 0, 0, []))

    init(_ base: any SyncTransport) { self.base = base }

    var uploads: Int { state.withLock { $0.uploads } }
    var downloads: Int { state.withLock { $0.downloads } }
    var failedDownloads: Int { state.withLock { $0.failedDownloads } }

    func send(_ request: WireRequest) async throws -> WireResponse { try await base.send(request) }

    func upload(_ request: WireRequest, file: URL) async throws -> WireResponse {
        state.withLock { $0.uploads += 1 }
        return try await base.upload(request, file: file)
    }

    func download(_ request: WireRequest, to destination: URL) async throws -> WireResponse {
        state.withLock { $0.downloads += 1 }
        do {
            let response = try await base.download(request, to: destination)
            if !response.isSuccess { state.withLock { $0.failedDownloads += 1 } }
            let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                let done = state.downloads - state.failedDownloads
                let ready = state.waiters.filter { $0.0 <= done }.map(\.1)
                state.waiters.removeAll { $0.0 <= done }
                return ready
            }
            for waiter in ready { waiter.resume() }
            return response
        } catch {
            state.withLock { $0.failedDownloads += 1 }
            throw error
        }
    }

    /// Returns once `count` downloads succeeded.
    func downloaded(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.downloads - state.failedDownloads >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}
