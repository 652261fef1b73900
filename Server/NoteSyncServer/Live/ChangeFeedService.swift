import Logging
import MiniFlake
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Runs a daemon's ``ChangeFeed``: ends waits whose deadline passed (every ``tick``); with PostgreSQL listens for
/// every daemon's commits (``PostgresChangeListener``); with SQLite watches for other processes' commits on the same
/// tick (``ExternalCommitWatch``: the operator's commands ending sessions). On graceful shutdown it closes the feed,
/// answering every waiter that is left with an empty page.
///
/// Registered after the HTTP server's dependencies and before nothing that needs it: the HTTP server itself answers
/// its waiters on its own graceful shutdown (the quiesce event reaches each connection's `WaitingPullHandler`, and a pull
/// waiting in a task waits under a graceful shutdown handler), so draining never waits for a long-poll.
public struct ChangeFeedService: Service {
    public let feed: ChangeFeed
    /// How often deadlines are checked: a wait ends at most this much after its deadline.
    public let tick: Duration
    /// Listens for other daemons' commits (PostgreSQL), or nil.
    public let listener: PostgresChangeListener?
    /// Watches for other processes' commits (SQLite), or nil.
    public let externalCommits: ExternalCommitWatch?
    let logger: Logger

    public init(
        feed: ChangeFeed, tick: Duration = .milliseconds(100), listener: PostgresChangeListener? = nil,
        externalCommits: ExternalCommitWatch? = nil, logger: Logger
    ) {
        self.feed = feed
        self.tick = tick
        self.listener = listener
        self.externalCommits = externalCommits
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                if let listener {
                    group.addTask { await listener.run() }
                }
                group.addTask {
                    while !Task.isCancelled {
                        do {
                            try await Task.sleep(for: tick)
                        } catch {
                            break
                        }
                        feed.expire(now: feed.now())
                        await externalCommits?.check()
                    }
                }
            }
        }
        feed.close()
        logger.info("change feed closed")
    }
}

/// Hears every daemon's commits on a PostgreSQL database: one pooled connection per daemon runs `LISTEN` on
/// ``channel``, and each notification (its payload is the account ID; ``PostgresNoteStore`` sends it with `NOTIFY`
/// inside the push transaction, so it is delivered only once the push committed) wakes that account's waiters.
///
/// When the connection drops it is re-established with backoff (0.1 s doubling to 5 s), and once `LISTEN` is active
/// again every waiter is woken to re-read (a notification sent while nobody listened is lost). The same happens when
/// it first starts, so a pull that began waiting before the listener ran misses nothing either.
public struct PostgresChangeListener: Sendable {
    /// The notification channel every daemon of a database shares.
    public static let channel = "flakenotes_changes"

    let database: PostgresDatabase
    let feed: ChangeFeed
    let logger: Logger
    /// Called each time `LISTEN` is in effect, with the listening connection's backend process ID (tests end it to
    /// check the reconnection).
    let onListening: (@Sendable (Int32) -> Void)?

    public init(database: PostgresDatabase, feed: ChangeFeed, logger: Logger, onListening: (@Sendable (Int32) -> Void)? = nil) {
        self.database = database
        self.feed = feed
        self.logger = logger
        self.onListening = onListening
    }

    /// Listens until cancelled.
    public func run() async {
        var backoff: Duration = .milliseconds(100)
        var failures = 0
        while !Task.isCancelled {
            do {
                try await database.client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        // LISTEN is in effect once a later statement on the connection has answered.
                        var backend: Int32 = 0
                        for try await pid in try await connection.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) {
                            backend = pid
                        }
                        if failures > 0 { logger.info("change listener reconnected", metadata: ["failures": "\(failures)"]) }
                        backoff = .milliseconds(100)
                        failures = 0
                        feed.signalAll()
                        onListening?(backend)
                        for try await notification in notifications {
                            if let raw = Int64(notification.payload), let account = try? FlakeID(validating: raw) {
                                feed.signal(account: account)
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { break }
                failures += 1
                logger.warning(
                    "change listener lost its PostgreSQL connection; reconnecting",
                    metadata: ["error": "\(error)", "retry_in": "\(backoff)"]
                )
            }
            // Whatever happened, notifications may have been missed: every waiter re-reads.
            feed.signalAll()
            do {
                try await Task.sleep(for: backoff)
            } catch {
                break
            }
            backoff = min(backoff * 2, .seconds(5))
        }
    }
}

/// Hears commits another process makes to the daemon's SQLite file, where no `NOTIFY` reaches the daemon: the
/// operator's `notesyncd sessions revoke`, `users disable`, `users delete` and `users reset-password` end sessions from
/// a process of their own. ``ChangeFeedService`` calls ``check()`` on every sweep (every 100 ms): while pulls wait, one
/// read of a number that moves only with another process's commits (``SQLiteNoteStore/externalCommitVersion()``),
/// nothing more while it stays; with no waiter, nothing. When it moved since the last read, every waiter is woken as
/// by a commit (``ChangeFeed/signalAll()``): each re-checks its session, a device signed out gets 401 within a sweep,
/// and the others re-read and wait again. A commit while nobody waited wakes the next waiters once for nothing; the
/// first read (no number to compare with) wakes the waiters too, so that no commit before it goes unheard.
public final class ExternalCommitWatch: Sendable {
    /// Reads the number (nil: no other process can commit, nothing to watch).
    let version: @Sendable () async throws -> Int64?
    let feed: ChangeFeed
    let logger: Logger
    private let last = Mutex<Int64?>(nil)

    public init(version: @escaping @Sendable () async throws -> Int64?, feed: ChangeFeed, logger: Logger) {
        self.version = version
        self.feed = feed
        self.logger = logger
    }

    /// The SQLite store's watch.
    public convenience init(store: SQLiteNoteStore, feed: ChangeFeed, logger: Logger) {
        self.init(version: { try await store.externalCommitVersion() }, feed: feed, logger: logger)
    }

    /// One read; when the number moved since the last one, wakes every waiter. Returns how many were woken. A failed
    /// read (the store closing, a busy database) is logged and tried again at the next sweep.
    @discardableResult
    public func check() async -> Int {
        guard feed.count > 0 else { return 0 }
        let current: Int64?
        do {
            current = try await version()
        } catch {
            logger.debug("could not read the database's commit counter", metadata: ["error": "\(error)"])
            return 0
        }
        guard let current else { return 0 }
        let previous = last.withLock { last in
            defer { last = current }
            return last
        }
        guard previous != current else { return 0 }
        if previous == nil { logger.debug("watching the database for other processes' commits") }
        let woken = feed.signalAll()
        if woken > 0 {
            logger.debug("another process committed to the database: waiting pulls re-check their sessions", metadata: ["woken": "\(woken)"])
        }
        return woken
    }
}
