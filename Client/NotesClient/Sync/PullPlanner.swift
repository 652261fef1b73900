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
    /// The note's tags and flags, and what was last synced of them.
    var tagsAndFlags: TagsAndFlags { get }
    var baseTagsAndFlags: TagsAndFlags { get }
}

/// Decides what one pulled record does to this device's notes. Pure: a function of values.
///
/// The sync engine applies a pull page in one transaction: for each record it looks up the local note (one
/// statement), executes the ``Action`` that ``apply(_:local:now:)`` returns, and adds up the counters; then it
/// stores the page's cursor.
///
/// Rules:
/// - No local note: insert the record as a clean note (its base is its text).
/// - A dirty note (local changes wait to be pushed): keep its text, tags and flags and their bases so the server merges
///   them; only learn the server ID when the note lacked it or had another.
/// - A clean note: take the record (server ID, version, text, deleted, tags, flags and attachments, their bases,
///   conflict fields; push error cleared). A record without tags, flags or attachments (from a server older than
///   them) leaves the note's as they are; an encrypted account's record comes opened, with its envelope's. A pull
///   never downloads an attachment's chunks: `notes save` does, when asked. The note's `note_tags` rows are written again only when its tags or its deleted flag changed
///   (``Action/take(noteID:_:updatedAt:reindexTags:)``).
///   Its time becomes the record's `editedAt` (the editing device's time, so every device shows the same); from a
///   server that sends none, the record's `updatedAt` when the text or deleted flag changed, and stays otherwise. A
///   note already exactly as `take` would write it (a sign-in pulls back every note it just pushed) is not written.
/// - Counters: `applied` when the record added a note or changed a clean note's text, deleted flag, tags or flags; `matched`
///   when the note was found without a server ID (by client ID and origin: after a sign-in, a note the account
///   already holds).
enum PullPlanner {
    /// What a record does.
    enum Action: Sendable, Equatable {
        /// Insert a new clean note.
        case insert(NewSyncedNote)
        /// Set the note's server ID, nothing else.
        case adoptServerID(noteID: Int64, serverID: Int64)
        /// Overwrite the note with the server's state; with `reindexTags`, write its `note_tags` rows again (its tags
        /// or its deleted flag changed).
        case take(noteID: Int64, SyncedState, updatedAt: Int64, reindexTags: Bool)
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
                clientID: record.clientID.rawValue, origin: record.origin.rawValue, state: pulled(record, keeping: TagsAndFlags(), base: TagsAndFlags()),
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
        let localTags = local.tagsAndFlags
        let localBase = local.baseTagsAndFlags
        let state = pulled(record, keeping: localTags, base: localBase)
        if !changed && localServerID == serverID && local.serverVersion == record.version && local.baseText == record.text
            && local.isConflict == (record.conflictOf != nil) && local.conflictOf == record.conflictOf?.rawValue
            && local.pushError == nil && (recordTime == nil || recordTime == localTime)
            && localTags == state.tagsAndFlags && localBase == state.baseTagsAndFlags
        {
            return Outcome(action: .none, applied: false, matched: matched)
        }
        let updatedAt = recordTime ?? (changed ? changedAt(record, now: now) : localTime)
        let reindex = wasDeleted != record.deleted || localTags.tags != state.tagsAndFlags.tags
        return Outcome(
            action: .take(noteID: id, state, updatedAt: updatedAt, reindexTags: reindex),
            applied: changed || localTags != state.tagsAndFlags, matched: matched, undeleted: wasDeleted && !record.deleted)
    }

    /// The note as the record has it; where the record has no tags or flags (a server older than them), those the
    /// note has here (`kept`, with their base `keptBase`).
    private static func pulled(_ record: NoteRecord, keeping kept: TagsAndFlags, base keptBase: TagsAndFlags) -> SyncedState {
        let tags = record.tags.map(Tags.canonical)
        let attachments = record.attachments.map(StoredAttachments.canonical)
        let current = TagsAndFlags(
            tags: tags ?? kept.tags, pinned: record.pinned ?? kept.pinned, archived: record.archived ?? kept.archived,
            attachments: attachments ?? kept.attachments)
        let base = TagsAndFlags(
            tags: tags ?? keptBase.tags, pinned: record.pinned ?? keptBase.pinned, archived: record.archived ?? keptBase.archived,
            attachments: attachments ?? keptBase.attachments)
        return SyncedState(
            serverID: record.serverID.rawValue, version: record.version, text: record.text, deleted: record.deleted,
            baseText: record.text, isConflict: record.conflictOf != nil, conflictOf: record.conflictOf?.rawValue,
            tagsAndFlags: current, baseTagsAndFlags: base)
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
