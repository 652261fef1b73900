import Logging
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import Synchronization

/// A whole sync server in this process: the server library's ``SyncAPI`` over a store, with a manual clock, a
/// seeded token source and an ID generator of its own. Requests reach it through ``transport``, which calls the same
/// dispatcher the daemon's HTTP router calls, without sockets.
///
/// The client tests, the server tests and the simulation all build their servers here.
public final class InProcessServer: Sendable {
    public let store: any NoteStore
    public let clock: ManualFlakeClock
    /// The MiniFlake instance number of the server IDs it mints.
    public let instance: Int
    public let limits: SyncLimits
    /// Requests sent here reach the current ``api`` (a ``restart()`` replaces it).
    public let transport: InProcessTransport
    private let parts: Mutex<Parts>
    private let makeServices: @Sendable (_ mintID: @escaping @Sendable () throws -> FlakeID) -> ServerServices
    private let logger: Logger

    private struct Parts {
        var services: ServerServices
        var api: SyncAPI
    }

    /// A server over `store` (default: a fresh in-memory SQLite store).
    ///
    /// - Parameters:
    ///   - instance: The generator's instance number.
    ///   - after: The largest ID the store already holds, if any: the generator starts after it.
    ///   - quota: The per-account limits.
    ///   - bcryptCost: The bcrypt cost of new password hashes (4, the minimum, keeps tests fast).
    ///   - passwords: Replaces bcrypt (the simulation's stand-in); nil for bcrypt.
    ///   - tokenSeed: Seeds the session-token bytes, so tokens repeat from run to run.
    ///   - changeFeed: Holds waiting pulls (`wait=`); nil answers every pull at once.
    ///   - sessionIdleDays: Days a session may go unused before it expires (nil: never).
    public init(
        store: (any NoteStore)? = nil, clock: ManualFlakeClock = ManualFlakeClock(unixMilliseconds: testEpoch),
        instance: Int = 7, after: FlakeID? = nil, limits: SyncLimits = SyncLimits(), quota: AccountQuota = .default, bcryptCost: Int = 4,
        passwords: PasswordHashing? = nil, tokenSeed: UInt64 = 42, throttle: any SignInThrottling = SignInThrottle(),
        logger: Logger = .quiet("in-process-server"), changeFeed: ChangeFeed? = nil, sessionIdleDays: Int? = nil
    ) throws {
        let store = try store ?? SQLiteNoteStore.inMemory()
        self.store = store
        self.clock = clock
        self.instance = instance
        self.limits = limits
        self.logger = logger
        // One token source for the server's whole life: a restart continues its sequence, never repeats a token.
        let randomBytes = RandomBytes.using(SplitMix64(seed: tokenSeed))
        let configuration = ServiceConfiguration(
            limits: limits, quota: quota, passwords: passwords ?? .bcrypt(cost: bcryptCost), throttle: throttle, randomBytes: randomBytes,
            sessionIdleDays: sessionIdleDays)
        makeServices = { mintID in
            ServerServices(ServiceContext(store: store, clock: clock, mintID: mintID, logger: logger, changeFeed: changeFeed), configuration: configuration)
        }
        let generator = try FlakeGenerator(instance: instance, clock: clock, after: after)
        let services = makeServices({ try generator.next() })
        let api = SyncAPI(services: services, logger: logger)
        parts = Mutex(Parts(services: services, api: api))
        transport = InProcessTransport(api: api)
    }

    /// The rules behind the current dispatcher.
    public var services: ServerServices { parts.withLock { $0.services } }
    /// The current dispatcher.
    public var api: SyncAPI { parts.withLock { $0.api } }

    /// Restarts the server as a daemon restarts: a new service and dispatcher over the same store, whose ID
    /// generator starts after the largest ID the store holds (so a restart never reissues one).
    public func restart() async throws {
        let generator = try FlakeGenerator(instance: instance, clock: clock, after: try await store.largestIssuedID())
        let services = makeServices({ try generator.next() })
        let api = SyncAPI(services: services, logger: logger)
        parts.withLock { $0 = Parts(services: services, api: api) }
        transport.replace(with: api)
    }

    /// Closes the store.
    public func shutdown() async { try? await store.close() }
}
