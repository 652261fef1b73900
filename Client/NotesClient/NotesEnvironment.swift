import Foundation
import NoteCrypto
import MiniFlake

/// Everything the client takes from the outside world, injected so tests and the simulation control it.
public struct NotesEnvironment: Sendable {
    /// The wall clock: note timestamps and MiniFlake IDs.
    public var clock: any FlakeClock
    /// Randomness: the installation origin and flake instance (once per installation) and retry jitter.
    public var random: any RandomNumberGenerator & Sendable
    /// Makes the transport for a server URL (called at each sign-in, sign-up, sync and sign-out).
    public var transport: @Sendable (URL) -> any SyncTransport
    /// Waits between retries. The default really sleeps; tests and the simulation pass one that returns at once.
    public var sleep: @Sendable (Duration) async -> Void
    /// How often and how long to retry transport failures and 5xx answers.
    public var retry: RetryPolicy
    /// The device name sent at sign-in (the account owner sees it in their session list).
    public var deviceName: String
    /// The MiniFlake instance number a new installation takes; nil (the default) picks one at random in
    /// `0..<1024` from ``random``. Ignored when the installation already exists. Tests and the simulation set it
    /// to make two devices mint the same client ID.
    public var flakeInstance: Int?
    /// How new notes' client IDs are minted: ``IDScheme/miniflake`` (the default) or, for compatibility with other
    /// apps' clients and for comparison, ``IDScheme/cdcounter`` or ``IDScheme/timestamp`` (a CDCounter per opened
    /// client, i.e. per run of the app; the note's creation time). Whatever the scheme, an installation never
    /// repeats a client ID: a value the scheme repeats is raised above the last one (see Docs/MINIFLAKE.md). Edit
    /// IDs are always MiniFlake.
    public var clientIDScheme: IDScheme
    /// Whether the store counts the statements it runs (``NotesClient/storeActivity()``): for the tests that hold
    /// the sign-in's budgets (issue 30). Off by default: counting costs a callback per statement.
    public var countsStoreActivity = false
    /// The most bytes of attachment chunks the device keeps in its chunk cache (`chunks/` in the data directory) after
    /// a transfer: the chunks used least recently go first. 1 GiB by default.
    public var chunkCacheLimit: Int64 = ChunkCache.defaultLimit
    /// Where a client in memory (``NotesClient/inMemory(environment:)``) keeps its chunk cache; nil: a directory of
    /// the temporary directory named for its origin. The simulation gives each device of each run its own, since a
    /// seed makes the same origins every time it runs. A client with a data directory ignores it.
    public var chunkCacheDirectory: URL?
    /// The Argon2id cost a new encrypted account's password is hashed with (sign-up): ``KDFCost/production``.
    public var kdfCost: KDFCost = .production
    /// Which costs a sign-in accepts from a server's prelogin answer: ``KDFPolicy/enforceMinimum`` (a server cannot
    /// downgrade or exhaust them); tests and the simulation allow ``KDFCost/insecureForTesting`` explicitly.
    public var kdfPolicy: KDFPolicy = .enforceMinimum

    public init(
        clock: any FlakeClock = SystemFlakeClock.precise,
        random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        transport: @escaping @Sendable (URL) -> any SyncTransport = { URLSessionTransport(baseURL: $0) },
        sleep: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) },
        retry: RetryPolicy = .default,
        deviceName: String = NotesEnvironment.hostName(),
        flakeInstance: Int? = nil,
        clientIDScheme: IDScheme = .miniflake
    ) {
        self.clock = clock
        self.random = random
        self.transport = transport
        self.sleep = sleep
        self.retry = retry
        self.deviceName = deviceName
        self.flakeInstance = flakeInstance
        self.clientIDScheme = clientIDScheme
    }

    /// The real world: system clock, system randomness, HTTP, real sleeps, this host's name.
    public static var live: NotesEnvironment { NotesEnvironment() }

    /// The same transport for every server URL (in-process servers, fakes).
    public static func fixed(_ transport: any SyncTransport) -> @Sendable (URL) -> any SyncTransport {
        { _ in transport }
    }

    /// This machine's host name, cut to the protocol's device-name limit.
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "unknown" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "unknown" : String(name.prefix(100))
    }
}

/// Retries with exponential backoff and full jitter: attempt `n` (from 1) waits a random time in
/// `0...min(maxDelay, initialDelay * 2^(n-1))` before attempt `n + 1`.
public struct RetryPolicy: Sendable, Equatable {
    /// Tries in all, at least 1.
    public var maxAttempts: Int
    public var initialDelay: Duration
    public var maxDelay: Duration

    public init(maxAttempts: Int = 4, initialDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(4)) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    public static let `default` = RetryPolicy()
    /// One try, no retry.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The longest wait before attempt `attempt + 1`.
    func ceiling(after attempt: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, attempt) {
            delay *= 2
            if delay >= maxDelay { return maxDelay }
        }
        return min(delay, maxDelay)
    }
}
