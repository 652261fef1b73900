import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol

/// What every service works with: the store, the server's clock, its ID source, its log and its waiting pulls.
public struct ServiceContext: Sendable {
    /// The store.
    public var store: any NoteStore
    /// Server time (sessions, note timestamps, the sign-in throttle).
    public var clock: any FlakeClock
    /// Mints account, session and note IDs (the daemon's `FlakeGenerator`).
    public var mintID: @Sendable () throws -> FlakeID
    public var logger: Logger
    /// Holds waiting pulls and is signalled after each push that changed notes and each sign-out (nil: pulls never
    /// wait).
    public var changeFeed: ChangeFeed?

    public init(
        store: any NoteStore, clock: any FlakeClock, mintID: @escaping @Sendable () throws -> FlakeID, logger: Logger,
        changeFeed: ChangeFeed? = nil
    ) {
        self.store = store
        self.clock = clock
        self.mintID = mintID
        self.logger = logger
        self.changeFeed = changeFeed
    }
}

/// How the services behave: the limits, the quota, who may sign up, how passwords are hashed. Every service reads
/// the part it needs. The defaults suit tests and the simulation; the daemon sets each from its options
/// (``ServerConfiguration``).
public struct ServiceConfiguration: Sendable {
    /// The limits the server enforces and `GET /v1/info` serves.
    public var limits: SyncLimits
    /// The per-account limits pushes enforce and `GET /v1/account` reports.
    public var quota: AccountQuota
    /// How passwords are hashed and verified: bcrypt (``PasswordHashing/bcrypt(cost:)``; cost 12 by default, tests
    /// use 4). Something cheaper only for callers that never store real passwords, such as the simulation.
    public var passwords: PasswordHashing
    /// Failed sign-in (and sign-up with an invite) bookkeeping: in memory by default; ``PostgresSignInThrottle`` for
    /// daemons sharing a PostgreSQL database.
    public var throttle: any SignInThrottling
    /// The source of session-token bytes (``RandomBytes/system`` in production).
    public var randomBytes: RandomBytes
    /// Who may sign up. Open by default here; the daemon's own default is ``SignUpPolicy/closed``
    /// (``ServerConfiguration/signUp``).
    public var signUpPolicy: SignUpPolicy
    /// Days a session may go unused before it expires; nil or 0: never (the default here; the daemon's default is
    /// 180, ``ServerConfiguration/sessionIdleDays``).
    public var sessionIdleDays: Int?
    /// The server's version string, served by `GET /v1/info`.
    public var serverVersion: String
    /// The history's retention (pruned by the daemon's prune service) and page limits, served by `GET /v1/info`.
    public var history: HistoryLimits

    public init(
        limits: SyncLimits = .default, quota: AccountQuota = .default, passwords: PasswordHashing = .bcrypt(cost: 12),
        throttle: any SignInThrottling = SignInThrottle(), randomBytes: RandomBytes = .system, signUpPolicy: SignUpPolicy = .open,
        sessionIdleDays: Int? = nil, serverVersion: String = NotesyncdVersion.current, history: HistoryLimits = .default
    ) {
        self.history = history
        self.limits = limits
        self.quota = quota
        self.passwords = passwords
        self.throttle = throttle
        self.randomBytes = randomBytes
        self.signUpPolicy = signUpPolicy
        self.sessionIdleDays = sessionIdleDays
        self.serverVersion = serverVersion
    }
}

/// The server's rules over a ``NoteStore``, by concern: accounts and sign-up (``AccountService``), sessions and
/// devices (``SessionService``), sync (``SyncService``), attachments' chunks (``ChunkService``). ``SyncAPI`` answers every endpoint with them.
///
/// Transport-neutral: the services take decoded requests and return response values, throwing ``SyncError`` for
/// every client mistake (other errors are server faults). The clock, the ID source and the random source are
/// injected (``ServiceContext``, ``ServiceConfiguration``).
///
/// Classes, not structs: every async frame of a request that holds a service (a waiting pull keeps a whole chain of
/// them alive) then holds one reference instead of a copy of all its fields (see PERFORMANCE.md, live sync).
public final class ServerServices: Sendable {
    public let accounts: AccountService
    public let sessions: SessionService
    public let sync: SyncService
    /// Attachments' chunks (``ChunkService``).
    public let chunks: ChunkService
    /// End-to-end encrypted accounts: prelogin and keys.
    public let encryption: EncryptionService

    /// The services over one context and configuration (they share its throttle, so a username's sign-ins and
    /// password checks count together).
    public init(_ context: ServiceContext, configuration: ServiceConfiguration = ServiceConfiguration()) {
        accounts = AccountService(context, configuration: configuration)
        sessions = SessionService(context, configuration: configuration)
        sync = SyncService(context, configuration: configuration)
        chunks = ChunkService(context, configuration: configuration)
        encryption = EncryptionService(context, configuration: configuration)
    }
}

/// Who sent a request, for the log lines operators watch (failed sign-ins and lockouts).
public struct Peer: Sendable, Equatable {
    /// The connected peer's IP address (the proxy's, behind a reverse proxy); nil in process.
    public var address: String?
    /// The request id the answer carries in `X-Request-Id`.
    public var requestID: String?

    public init(address: String? = nil, requestID: String? = nil) {
        self.address = address
        self.requestID = requestID
    }
}

/// The daemon's version, served by `GET /v1/info`: the release's (``FlakeNotesVersion``), which `notes` shows too.
public enum NotesyncdVersion {
    public static let current = FlakeNotesVersion.current
}
