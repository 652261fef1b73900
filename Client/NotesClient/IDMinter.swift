import GRDB
import MiniFlake
import Synchronization

/// A clock of any kind, so the minter is not generic.
struct AnyFlakeClock: FlakeClock {
    let base: any FlakeClock
    func unixMilliseconds() -> Int64 { base.unixMilliseconds() }
    func sleep(milliseconds: Int64) { base.sleep(milliseconds: milliseconds) }
}

/// The installation's one MiniFlake generator, for client IDs and edit IDs alike.
///
/// Its instance number is chosen once per installation. IDs are minted only inside a write transaction, which
/// also persists the new high-water mark (``Settings/highWaterMark``), so the mark is durable exactly when the
/// note or snapshot that used the ID is. The generator starts after the stored mark when the client opens, and
/// re-reads the mark in each transaction: if another process on the same data directory minted past it, the
/// generator jumps ahead too. So neither a restart, a clock set back, nor two processes ever repeat an ID.
final class IDMinter: Sendable {
    private let maker: Mutex<FlakeMaker<AnyFlakeClock>>
    private let clock: AnyFlakeClock
    let instance: Int

    init(instance: Int, clock: any FlakeClock, after mark: FlakeID?) throws(FlakeError) {
        self.instance = instance
        self.clock = AnyFlakeClock(base: clock)
        maker = Mutex(try FlakeMaker(instance: instance, clock: self.clock, after: mark))
    }

    /// `count` new IDs, in increasing order; persists the high-water mark in `db`'s transaction.
    func mint(_ count: Int, in db: Database) throws -> [FlakeID] {
        guard count > 0 else { return [] }
        let stored = try Int64.fetchOne(db.cachedStatement(sql: "SELECT flake_high_water FROM settings WHERE id = 1"))
        let ids: [FlakeID]
        do {
            ids = try maker.withLock { (maker) throws(FlakeError) -> [FlakeID] in
                if let stored, stored > (maker.lastIssued?.rawValue ?? 0) {
                    maker = try FlakeMaker(instance: instance, clock: clock, after: FlakeID(validating: stored))
                }
                var ids: [FlakeID] = []
                ids.reserveCapacity(count)
                for _ in 0..<count { ids.append(try maker.next()) }
                return ids
            }
        } catch {
            throw NotesError(.idGenerator, "Cannot mint a new note ID: \(error.description)")
        }
        try db.cachedStatement(sql: "UPDATE settings SET flake_high_water = ? WHERE id = 1").execute(arguments: [ids[ids.count - 1].rawValue])
        return ids
    }

    /// One new ID; see ``mint(_:in:)``.
    func mint(in db: Database) throws -> FlakeID {
        try mint(1, in: db)[0]
    }
}
