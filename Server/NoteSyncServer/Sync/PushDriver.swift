import MiniFlake
import NoteSyncProtocol

/// Runs a push, the same way for every store: lock the account and read its change sequence, load what the batch
/// names, plan with ``PushPlanner``, write the plan. Every step goes through one transaction handle, so the whole push
/// is one transaction: when it returns the accepted changes are durable, and when it throws none are. In a converting
/// account (``LockedAccount/converting``) the notes a push wrote are no longer plaintext, and the push that converts the
/// last one finishes the conversion in the same transaction (``PushTransaction/converted(_:accountID:)``): the driver
/// then answers `convertedAccount: true`.
///
/// The driver is written twice, with identical bodies: once over ``PushTransaction`` (synchronous) and once over
/// ``AsyncPushTransaction``. Swift has no `reasync`, and the two stores' transactions differ in kind: the SQLite store's
/// is a synchronous GRDB closure (the in-memory store runs it on the calling thread, with nothing to await), while a
/// PostgreSQL statement is awaited. One async driver cannot run inside a GRDB transaction, and one synchronous driver
/// cannot await PostgreSQL; keeping both bodies side by side here, a few lines each, keeps them from drifting.
enum PushDriver {
    /// Runs a push through a synchronous transaction (SQLite).
    ///
    /// - Throws: ``NoteStoreError/accountNotFound``, what `context.mintID` throws, or a store error.
    static func push(
        _ transaction: some PushTransaction, accountID: FlakeID, changes: [NoteChange], context: PushContext
    ) throws -> (results: [ChangeResult], convertedAccount: Bool) {
        guard let locked = try transaction.lockAccount(accountID) else { throw NoteStoreError.accountNotFound }
        let keys = PushPlanner.loadKeys(of: changes)
        var loaded = try transaction.load(keys, accountID: accountID)
        if !keys.chunks.isEmpty { loaded.knownChunks = try transaction.knownChunks(keys.chunks, accountID: accountID, now: context.now) }
        let plan = try PushPlanner.plan(.init(accountID, changes, loaded, locked, context), mintID: context.mintID)
        try transaction.write(plan, accountID: accountID)
        guard locked.converting, !plan.writes.isEmpty else { return (plan.results, false) }
        return (plan.results, try transaction.converted(plan.writes.map(\.note.serverID), accountID: accountID))
    }

    /// Runs a push through an asynchronous transaction (PostgreSQL). The body is the synchronous one's, with `await`.
    ///
    /// - Throws: ``NoteStoreError/accountNotFound``, what `context.mintID` throws, or a store error.
    static func push(
        _ transaction: some AsyncPushTransaction, accountID: FlakeID, changes: [NoteChange], context: PushContext
    ) async throws -> (results: [ChangeResult], convertedAccount: Bool) {
        guard let locked = try await transaction.lockAccount(accountID) else { throw NoteStoreError.accountNotFound }
        let keys = PushPlanner.loadKeys(of: changes)
        var loaded = try await transaction.load(keys, accountID: accountID)
        if !keys.chunks.isEmpty {
            loaded.knownChunks = try await transaction.knownChunks(keys.chunks, accountID: accountID, now: context.now)
        }
        let plan = try PushPlanner.plan(.init(accountID, changes, loaded, locked, context), mintID: context.mintID)
        try await transaction.write(plan, accountID: accountID)
        guard locked.converting, !plan.writes.isEmpty else { return (plan.results, false) }
        return (plan.results, try await transaction.converted(plan.writes.map(\.note.serverID), accountID: accountID))
    }
}

/// A store's part of a push, inside one of its transactions: it locks, loads and writes; ``PushDriver`` runs the
/// steps in order and ``PushPlanner`` decides. Every statement is scoped by the account ID.
protocol PushTransaction {
    /// Serializes the account's pushes until the transaction ends and returns the account's change sequence and
    /// usage, or nil when the account does not exist.
    func lockAccount(_ accountID: FlakeID) throws -> LockedAccount?
    /// The account's applied edits and notes that `keys` names (see ``PushPlanner/LoadKeys``).
    func load(_ keys: PushPlanner.LoadKeys, accountID: FlakeID) throws -> LoadedBatch
    /// Of `hashes`, the chunks the account stores, each referenced again at `now` (`referenced_at`) in this
    /// transaction: a note that starts referring to a chunk is never one the collector deletes under it.
    func knownChunks(_ hashes: [ContentHash], accountID: FlakeID, now: Int64) throws -> Set<ContentHash>
    /// Writes the plan: its notes (inserted or updated), its versions (one batched insert into `note_versions`), its
    /// new applied edits and, when it wrote a note, the account's new change sequence and usage. Writes nothing for a
    /// plan that changes nothing.
    func write(_ plan: PushPlanner.Plan, accountID: FlakeID) throws
    /// A converting account's push wrote `serverIDs` (each now an envelope or a tombstone): marks them converted and,
    /// when no plaintext note is left, deletes what the account still holds in the clear (its history versions from
    /// before the conversion, its applied edits' texts, tags and flags) and marks it encrypted. Returns whether it
    /// finished the conversion.
    func converted(_ serverIDs: [FlakeID], accountID: FlakeID) throws -> Bool
}

/// ``PushTransaction`` for a store whose statements are awaited (PostgreSQL).
protocol AsyncPushTransaction {
    /// See ``PushTransaction/lockAccount(_:)``.
    func lockAccount(_ accountID: FlakeID) async throws -> LockedAccount?
    /// See ``PushTransaction/load(_:accountID:)``.
    func load(_ keys: PushPlanner.LoadKeys, accountID: FlakeID) async throws -> LoadedBatch
    /// See ``PushTransaction/knownChunks(_:accountID:now:)``.
    func knownChunks(_ hashes: [ContentHash], accountID: FlakeID, now: Int64) async throws -> Set<ContentHash>
    /// See ``PushTransaction/write(_:accountID:)``.
    func write(_ plan: PushPlanner.Plan, accountID: FlakeID) async throws
    /// See ``PushTransaction/converted(_:accountID:)``.
    func converted(_ serverIDs: [FlakeID], accountID: FlakeID) async throws -> Bool
}

/// The account row a push locked: its change sequence and running totals.
struct LockedAccount {
    var sequence: Int64
    var usage: AccountUsage
    /// The account's encryption as its pushes see it (``PushPlanner/Input/encryption``).
    var encryption: PushPlanner.Encryption = .none
    /// The account is converting to end-to-end encryption (``EncryptionState/converting``).
    var converting = false

    /// The planner's view of a stored state and generation.
    ///
    /// - Throws: ``NoteStoreError/unreadable(_:)`` for a state this build does not know.
    static func encryption(state: String, generation: Int64) throws -> PushPlanner.Encryption {
        guard let state = EncryptionState(rawValue: state) else { throw NoteStoreError.unreadable("accounts.encryption holds '\(state)'") }
        return state.requiresEncryptedPushes ? .required(generation: UInt32(clamping: generation)) : .none
    }
}

/// What a store loaded for a batch. A note or applied edit may appear twice (found by two keys).
struct LoadedBatch {
    var appliedEdits: [AppliedEdit] = []
    var notes: [StoredNote] = []
    /// Of ``PushPlanner/LoadKeys/chunks``, the ones the account stores, each referenced again at the push's time in
    /// the push's transaction (so that the chunk collector never deletes one a change starts referring to).
    var knownChunks: Set<ContentHash> = []
}

extension PushPlanner.Input {
    /// The planner's input for a batch of `accountID`, from what was loaded under the account's lock.
    init(_ accountID: FlakeID, _ changes: [NoteChange], _ loaded: LoadedBatch, _ locked: LockedAccount, _ context: PushContext) {
        self.init(
            accountID: accountID, changes: changes, notes: loaded.notes, appliedEdits: loaded.appliedEdits,
            currentSequence: locked.sequence, limits: context.limits, now: context.now, pusher: context.pusher,
            usage: locked.usage, quota: context.quota, device: context.device, encryption: locked.encryption,
            knownChunks: loaded.knownChunks
        )
    }
}
