import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import NotesClient
import Synchronization
import Testing

/// SplitMix64: a tiny seeded generator so every test run is the same. Failures print the seed.
struct SplitMix64: RandomNumberGenerator, Sendable {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// 2026-11-22T00:00:00Z, where test clocks start.
let testEpoch: Int64 = 1_795_305_600_000

/// A quiet logger for the in-process server.
let quietLogger: Logger = {
    var logger = Logger(label: "notes-client-tests")
    logger.logLevel = .critical
    return logger
}()

/// A real sync server in process: the server library's `SyncAPI` over an SQLite store in a temporary directory.
struct TestServer: Sendable {
    let api: SyncAPI
    let clock: ManualFlakeClock
    let store: SQLiteNoteStore

    init(limits: SyncLimits = SyncLimits()) throws {
        store = try SQLiteNoteStore.temporary()
        clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let generator = try FlakeGenerator(instance: 1000, clock: clock)
        let service = SyncService(
            store: store, limits: limits, bcryptCost: 4, clock: clock, mintID: { try generator.next() },
            randomBytes: .using(SplitMix64(seed: 7)), logger: quietLogger)
        api = SyncAPI(service: service, logger: quietLogger)
    }

    var transport: InProcessTransport { InProcessTransport(api: api) }

    /// The URL clients are told (the in-process transport ignores it).
    static let url = "http://notes.test"
}

/// Sends requests straight into the server library.
struct InProcessTransport: SyncTransport {
    let api: SyncAPI
    func send(_ request: WireRequest) async throws -> WireResponse {
        await api.handle(request)
    }
}

/// What a ``ScriptedTransport`` does with one request.
enum Fault: Sendable {
    /// Fail without sending (connection refused).
    case refuse
    /// Send, let the server commit, then lose the answer (connection reset).
    case dropAnswer
    /// Answer this instead of asking the server.
    case answer(WireResponse)
    /// Ask the server, then answer this instead of its answer.
    case replace(WireResponse)
}

/// Wraps a transport and injects faults chosen per request; records every request.
final class ScriptedTransport: SyncTransport {
    private let base: any SyncTransport
    private let plan: Mutex<@Sendable (WireRequest, Int) -> Fault?>
    private let log = Mutex<[WireRequest]>([])

    init(_ base: any SyncTransport, plan: @escaping @Sendable (WireRequest, Int) -> Fault? = { _, _ in nil }) {
        self.base = base
        self.plan = Mutex(plan)
    }

    /// Replaces the plan: `plan(request, index)` where `index` counts requests from 0.
    func setPlan(_ plan: @escaping @Sendable (WireRequest, Int) -> Fault?) {
        self.plan.withLock { $0 = plan }
    }

    var requests: [WireRequest] { log.withLock { $0 } }

    func send(_ request: WireRequest) async throws -> WireResponse {
        let index = log.withLock { log in
            log.append(request)
            return log.count - 1
        }
        let fault = plan.withLock { $0 }(request, index)
        switch fault {
        case nil: return try await base.send(request)
        case .refuse: throw TransportError("connection refused (scripted)")
        case .dropAnswer:
            _ = try await base.send(request)
            throw TransportError("connection reset (scripted)")
        case .answer(let response): return response
        case .replace(let response):
            _ = try await base.send(request)
            return response
        }
    }
}

/// A device: a client with its own clock and seeded randomness, talking to a server through a transport.
func makeDevice(
    _ transport: any SyncTransport, seed: UInt64, home: URL? = nil, clock: ManualFlakeClock? = nil,
    retry: RetryPolicy = RetryPolicy(maxAttempts: 3)
) throws -> NotesClient {
    let environment = NotesEnvironment(
        clock: clock ?? ManualFlakeClock(unixMilliseconds: testEpoch + Int64(seed % 1000) * 7),
        random: SplitMix64(seed: seed), transport: NotesEnvironment.fixed(transport), sleep: { _ in }, retry: retry,
        deviceName: "device-\(seed)")
    if let home { return try NotesClient.open(home: home, environment: environment) }
    return try NotesClient.inMemory(environment: environment)
}

/// A fresh temporary directory, removed when `body` returns.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notes-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

extension NotesClient {
    /// Live notes' texts, sorted.
    func texts() throws -> [String] { try notes().map(\.text).sorted() }

    /// Syncs and fails the test when the sync fails.
    @discardableResult
    func syncOK(sourceLocation: SourceLocation = #_sourceLocation) async throws -> SyncReport {
        do {
            return try await sync()
        } catch {
            Issue.record("sync failed: \(error)", sourceLocation: sourceLocation)
            throw error
        }
    }
}

/// Signs `client` up (or in, when the account exists) and expects the first sync to succeed.
@discardableResult
func signUp(_ client: NotesClient, _ username: String, password: String = "correct horse battery") async throws -> SyncReport {
    let report = try await client.signUp(server: TestServer.url, username: username, password: password)
    return try report.sync.get()
}

@discardableResult
func signIn(_ client: NotesClient, _ username: String, password: String = "correct horse battery") async throws -> SignInReport {
    let report = try await client.signIn(server: TestServer.url, username: username, password: password)
    _ = try report.sync.get()
    return report
}

/// What the server holds for an account, seen by a brand-new device that signs in and syncs.
func serverTexts(_ server: TestServer, _ username: String, seed: UInt64 = 999_999) async throws -> [String] {
    let viewer = try makeDevice(server.transport, seed: seed)
    try await signIn(viewer, username)
    let notes = try viewer.notes()
    let serverIDs = Set(notes.compactMap(\.serverID))
    #expect(serverIDs.count == notes.count, "every note has its own server ID")
    return notes.map(\.text).sorted()
}
