import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// A quiet logger for tests (errors still show).
let testLogger = Logger.quiet("notesyncd-test")

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

/// The server tests' in-process server (see ``InProcessServer``): instance 7, an in-memory SQLite store unless one
/// is given, tokens seeded by `seed`.
typealias TestServer = InProcessServer

extension InProcessServer {
    static func make(
        limits: SyncLimits = SyncLimits(), store: (any NoteStore)? = nil, seed: UInt64 = 42,
        throttle: any SignInThrottling = SignInThrottle()
    ) throws -> InProcessServer {
        try InProcessServer(store: store, limits: limits, tokenSeed: seed, throttle: throttle, logger: testLogger)
    }

    var client: APIClient { APIClient(api: api) }
}

/// A store that hands every call to `inner`: a test's store implements only the calls it changes (a fault, a commit
/// slipped in between two calls) and forwards the rest.
protocol ForwardingNoteStore: NoteStore {
    var inner: any NoteStore { get }
}

extension ForwardingNoteStore {
    var backendName: String { inner.backendName }
    func createAccount(_ account: AccountRecord) async throws { try await inner.createAccount(account) }
    func referencedChunks(accountID: FlakeID, among hashes: [ContentHash]) async throws -> Set<ContentHash> {
        try await inner.referencedChunks(accountID: accountID, among: hashes)
    }
    func account(byUsername username: String) async throws -> AccountRecord? { try await inner.account(byUsername: username) }
    func account(byID id: FlakeID) async throws -> AccountRecord? { try await inner.account(byID: id) }
    func createSession(_ session: SessionRecord) async throws { try await inner.createSession(session) }
    func session(byTokenHash tokenHash: String) async throws -> SessionRecord? { try await inner.session(byTokenHash: tokenHash) }
    func deleteSession(id: FlakeID, accountID: FlakeID) async throws -> Bool { try await inner.deleteSession(id: id, accountID: accountID) }
    func sessions(accountID: FlakeID, limit: Int) async throws -> [SessionRecord] { try await inner.sessions(accountID: accountID, limit: limit) }
    func deleteSessions(accountID: FlakeID, except: FlakeID?) async throws -> Int { try await inner.deleteSessions(accountID: accountID, except: except) }
    func markSessionSeen(id: FlakeID, accountID: FlakeID, at time: Int64, ifBefore: Int64) async throws {
        try await inner.markSessionSeen(id: id, accountID: accountID, at: time, ifBefore: ifBefore)
    }
    func changePassword(accountID: FlakeID, passwordHash: String, keepingSession: FlakeID?) async throws -> Int {
        try await inner.changePassword(accountID: accountID, passwordHash: passwordHash, keepingSession: keepingSession)
    }
    func deleteAccount(id: FlakeID) async throws -> Bool { try await inner.deleteAccount(id: id) }
    func usage(accountID: FlakeID) async throws -> AccountUsage? { try await inner.usage(accountID: accountID) }
    func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult] {
        try await inner.push(accountID: accountID, changes: changes, context: context)
    }
    func pull(accountID: FlakeID, after sequence: Int64, limit: Int, maxBytes: Int) async throws -> PullPage {
        try await inner.pull(accountID: accountID, after: sequence, limit: limit, maxBytes: maxBytes)
    }
    func currentChangeSequence(accountID: FlakeID) async throws -> Int64 { try await inner.currentChangeSequence(accountID: accountID) }
    func largestIssuedID() async throws -> FlakeID? { try await inner.largestIssuedID() }
    func versions(accountID: FlakeID, query: HistoryPlanner.Query) async throws -> VersionPage? {
        try await inner.versions(accountID: accountID, query: query)
    }
    func pruneHistory(savedBefore cutoff: Int64) async throws -> Int { try await inner.pruneHistory(savedBefore: cutoff) }
    func pruneAppliedEdits(createdBefore cutoff: Int64) async throws -> Int { try await inner.pruneAppliedEdits(createdBefore: cutoff) }
    func ping() async throws { try await inner.ping() }
    func close() async throws { try await inner.close() }
}
