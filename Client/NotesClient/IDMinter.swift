import MiniFlake
import Synchronization

/// A clock of any kind, so the minter is not generic.
struct AnyFlakeClock: FlakeClock {
    let base: any FlakeClock
    func unixMilliseconds() -> Int64 { base.unixMilliseconds() }
    func sleep(milliseconds: Int64) { base.sleep(milliseconds: milliseconds) }
}

/// The installation's one MiniFlake generator, for client IDs and edit IDs alike, and the generator of client IDs
/// when the client mints them with another scheme (``NotesEnvironment/clientIDScheme``).
///
/// Its instance number is chosen once per installation. IDs are minted only inside a write transaction, which
/// also persists the new high-water mark (``Settings/highWaterMark``; see `LocalStore.Transaction.mintIDs`), so
/// the mark is durable exactly when the note or snapshot that used the ID is. The generator starts after the
/// stored mark when the client opens, and is given the stored mark again at each mint: if another process on the
/// same data directory minted past it, the generator jumps ahead too. So neither a restart, a clock set back, nor
/// two processes ever repeat an ID.
///
/// The other schemes repeat IDs by design (a CDCounter restarted in the same second, two notes in one millisecond).
/// Their raw values are ``clientIDCandidate(createdAt:)``; `LocalStore.Transaction.mintClientID` keeps them from
/// repeating within the installation with a mark of its own, which is all the note's identity (client ID, origin)
/// needs.
final class IDMinter: Sendable {
    private let maker: Mutex<FlakeMaker<AnyFlakeClock>>
    /// The current run's counter (``IDScheme/cdcounter`` only): replaced by ``restartRun()``.
    private let counter: Mutex<CDCounter<AnyFlakeClock>>
    private let clock: AnyFlakeClock
    let instance: Int
    /// How client IDs are minted; edit IDs are always MiniFlake.
    let clientIDScheme: IDScheme

    init(instance: Int, clock: any FlakeClock, after mark: FlakeID?, clientIDScheme: IDScheme = .miniflake) throws(FlakeError) {
        self.instance = instance
        self.clock = AnyFlakeClock(base: clock)
        self.clientIDScheme = clientIDScheme
        maker = Mutex(try FlakeMaker(instance: instance, clock: self.clock, after: mark))
        counter = Mutex(CDCounter(clock: self.clock))
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

    /// The raw client ID of the scheme for a note created at `createdAt` (Unix ms): the CDCounter's next value, or
    /// the creation time. It may repeat an earlier one; the caller makes it unique in the installation. Not for
    /// ``IDScheme/miniflake`` (use ``mint(_:after:)``).
    ///
    /// - Throws: `id_generator` when the value is not a positive 64-bit integer (a clock before 1970).
    func clientIDCandidate(createdAt: Int64) throws(NotesError) -> Int64 {
        do {
            switch clientIDScheme {
            case .cdcounter: return try counter.withLock { $0 }.next().rawValue
            case .timestamp: return try CreationTimestampIDs<AnyFlakeClock>.id(createdAt: createdAt).rawValue
            case .miniflake: preconditionFailure("MiniFlake client IDs come from mint(_:after:)")
            }
        } catch {
            throw NotesError(.idGenerator, "Cannot mint a new note ID with the \(clientIDScheme.rawValue) scheme: \(error.description)")
        }
    }

    /// Begins a new run, as reopening the client would: a CDCounter starts again from the clock at its next use.
    /// (The MiniFlake generator needs nothing: it is given the stored mark at each mint.)
    func restartRun() {
        counter.withLock { $0 = CDCounter(clock: clock) }
    }
}
