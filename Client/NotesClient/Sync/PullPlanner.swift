import MiniFlake
import NoteSyncProtocol

/// What the pull reads of the local note a record names, found by the record's server ID, else by its (client
/// ID, origin). ``PullPlanner/apply(_:local:now:)`` reads each property at most once, and only those its decision
/// needs, so the store can hand it the lookup statement's current row, read in place.
protocol PullLocalNote {
    var id: Int64 { get }
    var isDirty: Bool { get }
    var serverID: Int64? { get }
    var text: String { get }
    var isDeleted: Bool { get }
    var updatedAt: Int64 { get }
    var serverVersion: Int64? { get }
    var baseText: String? { get }
    var isConflict: Bool { get }
    var conflictOf: Int64? { get }
    /// The code of the note's push refusal, if any.
    var pushError: String? { get }
}

/// Decides what one pulled record does to this device's notes. Pure: a function of values.
///
/// The sync engine applies a pull page in one transaction: for each record it looks up the local note (one
/// statement), executes the ``Action`` that ``apply(_:local:now:)`` returns, and adds up the counters; then it
/// stores the page's cursor.
///
/// Rules:
/// - No local note: insert the record as a clean note (its base is its text).
/// - A dirty note (local changes wait to be pushed): keep its text and base so the server merges them; only learn
///   the server ID when the note lacked it or had another.
/// - A clean note: take the record (server ID, version, text, deleted, base, conflict fields; push error cleared).
///   Its time becomes the record's `editedAt` (the editing device's time, so every device shows the same); from a
///   server that sends none, the record's `updatedAt` when the text or deleted flag changed, and stays otherwise. A
///   note already exactly as `take` would write it (a sign-in pulls back every note it just pushed) is not written.
/// - Counters: `applied` when the record added a note or changed a clean note's text or deleted flag; `matched`
///   when the note was found without a server ID (by client ID and origin: after a sign-in, a note the account
///   already holds).
enum PullPlanner {
    /// What a record does.
    enum Action: Sendable, Equatable {
        /// Insert a new clean note.
        case insert(NewSyncedNote)
        /// Set the note's server ID, nothing else.
        case adoptServerID(noteID: Int64, serverID: Int64)
        /// Overwrite the note with the server's state.
        case take(noteID: Int64, SyncedState, updatedAt: Int64)
        /// Nothing to write.
        case none
    }

    /// An action and how it counts in ``SyncReport/applied``, ``SyncReport/matched``,
    /// ``SyncReport/pulledConflictCopies`` and ``SyncReport/undeleted``.
    struct Outcome: Sendable, Equatable {
        var action: Action
        var applied: Bool
        var matched: Bool
        /// A conflict copy new to this device.
        var newConflictCopy = false
        /// A tombstone here that the record brings back (another device's edit won over this device's delete).
        var undeleted = false
    }

    /// What `record` does given the local note it names (nil: none). `now` stands in for a record time that does
    /// not parse.
    static func apply(_ record: NoteRecord, local: (some PullLocalNote)?, now: Int64) -> Outcome {
        let serverID = record.serverID.rawValue
        guard let local else {
            let new = NewSyncedNote(
                clientID: record.clientID.rawValue, origin: record.origin.rawValue, state: pulled(record),
                createdAt: record.clientID.unixMilliseconds, updatedAt: editedAt(record) ?? changedAt(record, now: now))
            return Outcome(action: .insert(new), applied: true, matched: false, newConflictCopy: record.conflictOf != nil && !record.deleted)
        }
        let id = local.id
        let localServerID = local.serverID
        let matched = localServerID == nil
        if local.isDirty {
            let action: Action = localServerID != serverID ? .adoptServerID(noteID: id, serverID: serverID) : .none
            return Outcome(action: action, applied: false, matched: matched)
        }
        let wasDeleted = local.isDeleted
        let changed = local.text != record.text || wasDeleted != record.deleted
        let localTime = local.updatedAt
        let recordTime = editedAt(record)
        if !changed && localServerID == serverID && local.serverVersion == record.version && local.baseText == record.text
            && local.isConflict == (record.conflictOf != nil) && local.conflictOf == record.conflictOf?.rawValue
            && local.pushError == nil && (recordTime == nil || recordTime == localTime)
        {
            return Outcome(action: .none, applied: false, matched: matched)
        }
        let updatedAt = recordTime ?? (changed ? changedAt(record, now: now) : localTime)
        return Outcome(
            action: .take(noteID: id, pulled(record), updatedAt: updatedAt), applied: changed, matched: matched,
            undeleted: wasDeleted && !record.deleted)
    }

    private static func pulled(_ record: NoteRecord) -> SyncedState {
        SyncedState(
            serverID: record.serverID.rawValue, version: record.version, text: record.text, deleted: record.deleted,
            baseText: record.text, isConflict: record.conflictOf != nil, conflictOf: record.conflictOf?.rawValue)
    }

    /// When the record's note changed, by the server's clock.
    private static func changedAt(_ record: NoteRecord, now: Int64) -> Int64 {
        WireTime.parse(record.updatedAt) ?? now
    }

    /// When the record's content was edited, by the editing device's clock; nil from servers that do not say.
    private static func editedAt(_ record: NoteRecord) -> Int64? {
        record.editedAt.flatMap(WireTime.parse)
    }
}
