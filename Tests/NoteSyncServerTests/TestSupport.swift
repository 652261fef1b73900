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
