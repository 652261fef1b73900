import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import Synchronization
import Testing

@testable import NoteSyncServer

/// SplitMix64 (Steele, Lea & Flood): a tiny seeded generator for property tests. Failures print the seed.
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

/// Seeds for property tests: `NOTESYNC_SEED=<n>` replays one seed, else `count` seeds from a fixed base.
func propertySeeds(_ count: Int, base: UInt64 = 0x5EED) -> [UInt64] {
    if let text = ProcessInfo.processInfo.environment["NOTESYNC_SEED"], let seed = UInt64(text) { return [seed] }
    return (0..<UInt64(count)).map { base &+ $0 }
}

/// A quiet logger for tests (errors still show).
let testLogger: Logger = {
    var logger = Logger(label: "notesyncd-test")
    logger.logLevel = .error
    return logger
}()

/// A test clock start: 2026-11-22T00:00:00Z.
let testEpoch: Int64 = 1_795_305_600_000

func id(_ value: Int64) -> FlakeID { try! FlakeID(validating: value) }

/// A deterministic ID source for planner tests: 1_000_001, 1_000_002, ...
final class CountingMinter: Sendable {
    private let next = Mutex<Int64>(1_000_000)
    func mint() -> FlakeID { id(next.withLock { $0 += 1; return $0 }) }
    var minted: Int64 { next.withLock { $0 } - 1_000_000 }
}

/// Store factories the conformance suite and the other tests run against.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqliteTemporary
    case sqliteInMemory

    var testDescription: String { rawValue }

    func make() throws -> any NoteStore {
        switch self {
        case .sqliteTemporary: try SQLiteNoteStore.temporary()
        case .sqliteInMemory: try SQLiteNoteStore.inMemory()
        }
    }
}

/// A whole server in process: store, manual clock, seeded token source, service and API.
struct TestServer: Sendable {
    let store: any NoteStore
    let clock: ManualFlakeClock
    let generator: FlakeGenerator<ManualFlakeClock>
    let service: SyncService
    let api: SyncAPI

    static func make(
        limits: SyncLimits = SyncLimits(), store: (any NoteStore)? = nil, seed: UInt64 = 42,
        throttle: SignInThrottle = SignInThrottle()
    ) throws -> TestServer {
        let store = try store ?? SQLiteNoteStore.inMemory()
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let generator = try FlakeGenerator(instance: 7, clock: clock)
        let service = SyncService(
            store: store, limits: limits, bcryptCost: 4, clock: clock, mintID: { try generator.next() },
            randomBytes: .using(SplitMix64(seed: seed)), throttle: throttle, logger: testLogger
        )
        return TestServer(store: store, clock: clock, generator: generator, service: service, api: SyncAPI(service: service, logger: testLogger))
    }

    var client: APIClient { APIClient(api: api) }
}

/// Sends protocol requests, in process (``SyncAPI/handle(_:contentType:)``) or over HTTP, with typed helpers.
struct APIClient: Sendable {
    /// Sends one request with an optional Content-Type.
    let send: @Sendable (WireRequest, String?) async throws -> WireResponse

    init(api: SyncAPI) {
        send = { request, contentType in await api.handle(request, contentType: contentType) }
    }

    init(send: @escaping @Sendable (WireRequest, String?) async throws -> WireResponse) {
        self.send = send
    }

    func call(
        _ endpoint: Endpoint, token: String? = nil, query: [(String, String)] = [], body: Data? = nil,
        contentType: String? = nil
    ) async throws -> WireResponse {
        try await send(WireRequest(endpoint, query: query, bearerToken: token, body: body), contentType)
    }

    func call(_ endpoint: Endpoint, token: String? = nil, json: some Encodable) async throws -> WireResponse {
        try await call(endpoint, token: token, body: try WireJSON.encoder().encode(json), contentType: "application/json")
    }

    func call(_ endpoint: Endpoint, token: String? = nil, rawJSON: String) async throws -> WireResponse {
        try await call(endpoint, token: token, body: Data(rawJSON.utf8), contentType: "application/json")
    }

    func decode<T: Decodable>(_ type: T.Type, _ response: WireResponse, sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
        guard response.isSuccess else {
            Issue.record("expected success, got \(response.status): \(String(decoding: response.body, as: UTF8.self))", sourceLocation: sourceLocation)
            throw APIErrorBody(code: .internalError, message: "unexpected status \(response.status)")
        }
        return try WireJSON.decoder().decode(type, from: response.body)
    }

    @discardableResult
    func signUp(_ username: String, _ password: String = "correct horse") async throws -> AccountResponse {
        try decode(AccountResponse.self, try await call(.signUp, json: SignUpRequest(username: username, password: password)))
    }

    func signIn(_ username: String, _ password: String = "correct horse", device: String? = "test", origin: FlakeID? = nil) async throws -> SignInResponse {
        try decode(
            SignInResponse.self,
            try await call(.signIn, json: SignInRequest(username: username, password: password, deviceName: device, origin: origin))
        )
    }

    /// Signs up and in; returns the token.
    func account(_ username: String) async throws -> SignInResponse {
        try await signUp(username)
        return try await signIn(username)
    }

    func push(_ token: String, _ changes: [NoteChange]) async throws -> [ChangeResult] {
        try decode(PushResponse.self, try await call(.push, token: token, json: PushRequest(changes: changes))).results
    }

    func pull(_ token: String, since: SyncCursor? = nil, limit: Int? = nil) async throws -> PullResponse {
        var query: [(String, String)] = []
        if let since { query.append((PullQuery.since, since.text)) }
        if let limit { query.append((PullQuery.limit, String(limit))) }
        return try decode(PullResponse.self, try await call(.pull, token: token, query: query))
    }

    /// Every note of the account, paging from the start.
    func pullAll(_ token: String, pageSize: Int = 1000) async throws -> [NoteRecord] {
        var cursor = SyncCursor.start
        var notes: [NoteRecord] = []
        while true {
            let page = try await pull(token, since: cursor, limit: pageSize)
            notes += page.changes
            cursor = page.cursor
            if !page.hasMore { return notes }
        }
    }
}

/// Builds changes tersely.
func change(
    _ clientID: Int64, origin: Int64 = 77, server: FlakeID? = nil, edit: Int64, text: String, deleted: Bool = false,
    baseVersion: Int64? = nil, baseText: String? = nil
) -> NoteChange {
    NoteChange(
        clientID: id(clientID), origin: id(origin), serverID: server, editID: id(edit), text: text, deleted: deleted,
        baseVersion: baseVersion, baseText: baseText
    )
}

extension WireResponse {
    /// The error code of a failed response (nil for success or a body that is not an error).
    var errorCode: APIErrorCode? { errorBody()?.code }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Notes by server ID, for before/after comparisons.
func byServerID(_ notes: [NoteRecord]) -> [FlakeID: NoteRecord] {
    Dictionary(notes.map { ($0.serverID, $0) }, uniquingKeysWith: { _, last in last })
}

/// A mutex in a class, so concurrent closures can share it.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T { try mutex.withLock { try body(&$0) } }
}
