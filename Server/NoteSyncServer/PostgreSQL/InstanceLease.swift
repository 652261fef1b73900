import Foundation
import Logging
import MiniFlake
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// A MiniFlake instance number leased from the PostgreSQL database, and the ID generator that mints with it.
///
/// Daemons sharing one database must never mint with the same instance number at the same time, so each leases
/// one from the `instance_leases` table instead of being configured by hand:
/// - **Acquire** takes the lowest number with no lease or an expired one (under a transaction-level advisory lock, so
///   two daemons starting together never take the same number), and seeds the generator after the largest ID stored
///   in the database, so that even a clock set back never repeats an ID a previous holder of the number stored.
/// - **Renew** (every `ttl / 3`, by ``InstanceLeaseService``) pushes the expiry to the database's `now() + ttl`.
/// - **Release** on clean shutdown deletes the row: the number is free at once. A crashed daemon's number stays
///   taken until its lease expires.
/// - **Fencing**: the generator refuses to mint (``NoteStoreError/unavailable(_:)``, answered 503) once the lease
///   may have expired: `90% of ttl` after the last successful renewal was *sent*, on the monotonic clock. The
///   database counts the expiry from when it *received* the renewal, so the daemon stops minting before another
///   daemon can take its number. If the renewal finds the number taken, the daemon leases a new one.
///
/// Server IDs are also primary keys, so even a violated lease could not store two notes under one ID (the push
/// would fail instead).
public final class InstanceLease: Sendable {
    /// The lease's length.
    public let ttl: Duration
    /// Identifies this daemon process in `instance_leases.holder` (host, process ID and a random part).
    public let holder: String
    private let database: PostgresDatabase
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var instance: Int?
        var maker: FlakeMaker<SystemFlakeClock>?
        /// No minting at or after this instant.
        var deadline: ContinuousClock.Instant = .now
        var released = false
    }

    /// A lease in `database` (migrated), not yet acquired.
    ///
    /// - Parameter ttl: At least one second.
    public init(database: PostgresDatabase, ttl: Duration, logger: Logger) {
        precondition(ttl >= .seconds(1), "an instance lease lasts at least a second")
        self.database = database
        self.ttl = ttl
        self.logger = logger
        let host = ProcessInfo.processInfo.hostName
        self.holder = "\(host):\(getpid()):\(String(UInt64.random(in: .min ... .max), radix: 16))"
    }

    /// The leased instance number, nil before ``acquire()`` and after ``release()``.
    public var instance: Int? { state.withLock { $0.released ? nil : $0.instance } }

    /// The next server ID. Throws ``NoteStoreError/unavailable(_:)`` when no lease is held or it may have expired.
    public func next() throws -> FlakeID {
        let now = ContinuousClock.now
        return try state.withLock { state in
            guard !state.released, state.maker != nil, now < state.deadline else {
                throw NoteStoreError.unavailable("this daemon holds no valid instance lease")
            }
            return try state.maker!.next()
        }
    }

    /// Leases the lowest free instance number and starts the generator with it.
    ///
    /// - Returns: The instance number.
    /// - Throws: ``NoteStoreError/unavailable(_:)`` when all 1024 numbers are leased, or a database error.
    @discardableResult
    public func acquire() async throws -> Int {
        let sentAt = ContinuousClock.now
        let instance = try await leaseFreeNumber()
        // Every stored ID, whoever minted it: a new holder of a number never repeats a stored one.
        let highWaterMark = try await database.largestStoredID()
        let maker = try FlakeMaker(instance: instance, clock: SystemFlakeClock.coarse, after: highWaterMark)
        state.withLock { state in
            state.instance = instance
            state.maker = maker
            state.deadline = sentAt + ttl * 0.9
            state.released = false
        }
        logger.info(
            "instance lease acquired",
            metadata: [
                "instance": "\(instance)", "holder": "\(holder)", "ttl_ms": "\(Self.milliseconds(ttl))",
                "high_water_mark": "\(highWaterMark.map { "\($0)" } ?? "none")",
            ]
        )
        return instance
    }

    /// Extends the lease. When another daemon took the number (this one was cut off longer than the lease), leases
    /// a new number. Does nothing before ``acquire()`` or after ``release()``.
    public func renew() async throws {
        guard let instance = state.withLock({ $0.released ? nil : $0.instance }) else { return }
        let sentAt = ContinuousClock.now
        let renewed = try await extendLease(instance)
        if renewed {
            state.withLock { state in
                if state.instance == instance, !state.released { state.deadline = sentAt + ttl * 0.9 }
            }
        } else {
            logger.error("instance lease lost to another daemon; leasing a new number", metadata: ["instance": "\(instance)"])
            state.withLock { $0.maker = nil }
            try await acquire()
        }
    }

    /// Stops minting and frees the number at once. Safe to call twice.
    public func release() async {
        let instance: Int? = state.withLock { state in
            defer {
                state.released = true
                state.maker = nil
            }
            return state.released ? nil : state.instance
        }
        guard let instance else { return }
        do {
            try await deleteLease(instance)
            logger.info("instance lease released", metadata: ["instance": "\(instance)"])
        } catch {
            logger.warning(
                "releasing the instance lease failed; it expires on its own",
                metadata: ["instance": "\(instance)", "error": "\(error)"]
            )
        }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    // MARK: - SQL

    /// Inserts (or takes over an expired) lease on the lowest free number, for ``ttl`` from the database's `now()`,
    /// under a transaction-level advisory lock, and returns the number.
    private func leaseFreeNumber() async throws -> Int {
        let ttlMilliseconds = Self.milliseconds(ttl)
        return try await database.transaction { connection in
            try await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.notesyncd.instance_leases'))", logger: logger
            )
            var free: Int?
            for try await number in try await connection.query(
                """
                SELECT n FROM generate_series(0, 1023) AS n
                WHERE NOT EXISTS (SELECT 1 FROM instance_leases l WHERE l.instance = n AND l.expires_at > now())
                ORDER BY n LIMIT 1
                """,
                logger: logger
            ).decode(Int.self) {
                free = number
            }
            guard let free else { throw NoteStoreError.unavailable("all 1024 instance numbers are leased") }
            try await connection.execute(
                """
                INSERT INTO instance_leases (instance, holder, acquired_at, renewed_at, expires_at)
                VALUES (\(free), \(holder), now(), now(), now() + \(ttlMilliseconds) * interval '1 millisecond')
                ON CONFLICT (instance) DO UPDATE
                SET holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at,
                    expires_at = EXCLUDED.expires_at
                """,
                logger: logger
            )
            return free
        }
    }

    /// Pushes this holder's lease on `instance` to ``ttl`` from the database's `now()`; false when the number is no
    /// longer this holder's.
    private func extendLease(_ instance: Int) async throws -> Bool {
        try await database.transaction { connection in
            var count = 0
            for try await _ in try await connection.query(
                """
                UPDATE instance_leases
                SET renewed_at = now(), expires_at = now() + \(Self.milliseconds(ttl)) * interval '1 millisecond'
                WHERE instance = \(instance) AND holder = \(holder)
                RETURNING instance
                """,
                logger: logger
            ).decode(Int.self) {
                count += 1
            }
            return count == 1
        }
    }

    /// Deletes this holder's lease on `instance`, if it still holds it.
    private func deleteLease(_ instance: Int) async throws {
        try await database.transaction { connection in
            try await connection.execute(
                "DELETE FROM instance_leases WHERE instance = \(instance) AND holder = \(holder)", logger: logger
            )
        }
    }
}

/// Renews an ``InstanceLease`` every `ttl / 3` while the daemon runs and releases it on graceful shutdown (after
/// the HTTP server has drained: services stop in reverse order, and this one is registered before the server).
struct InstanceLeaseService: Service {
    let lease: InstanceLease
    let logger: Logger

    func run() async throws {
        let interval = lease.ttl / 3
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    break  // graceful shutdown
                }
                do {
                    try await lease.renew()
                } catch {
                    logger.warning("renewing the instance lease failed; retrying", metadata: ["error": "\(error)"])
                }
            }
        }
        await lease.release()
    }
}
