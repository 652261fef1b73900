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
/// also persists the new high-water mark (``Settings/highWaterMark``; see `LocalStore.Transaction.mintIDs`), so
/// the mark is durable exactly when the note or snapshot that used the ID is. The generator starts after the
/// stored mark when the client opens, and is given the stored mark again at each mint: if another process on the
/// same data directory minted past it, the generator jumps ahead too. So neither a restart, a clock set back, nor
/// two processes ever repeat an ID.
final class IDMinter: Sendable {
    private let maker: Mutex<FlakeMaker<AnyFlakeClock>>
    private let clock: AnyFlakeClock
    let instance: Int

    init(instance: Int, clock: any FlakeClock, after mark: FlakeID?) throws(FlakeError) {
        self.instance = instance
        self.clock = AnyFlakeClock(base: clock)
        maker = Mutex(try FlakeMaker(instance: instance, clock: self.clock, after: mark))
    }

    /// `count` (at least 1) new IDs, in increasing order, all after `stored`, the high-water mark read in the
    /// minting transaction. The caller persists the last one as the new mark.
    ///
    /// - Throws: `id_generator` when the generator fails (its time range ends in 2087).
    func mint(_ count: Int, after stored: Int64?) throws(NotesError) -> [FlakeID] {
        do {
            return try maker.withLock { (maker) throws(FlakeError) -> [FlakeID] in
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
    }
}
