/// The server's state of a note, as this device stores it: what a pulled record gives a local note
/// (``PullPlanner``), and the state of a note a sync adds (``NewSyncedNote``).
struct SyncedState: Sendable, Equatable {
    var serverID: Int64
    var version: Int64
    var text: String
    var deleted: Bool
    /// What was last synced: the text, for a note as the server stores it.
    var baseText: String
    var isConflict: Bool
    /// For a conflict copy: the server ID of the note it was split from.
    var conflictOf: Int64?
    /// The note's tags and flags (the server's, for a note as the server stores it).
    var tagsAndFlags = TagsAndFlags()
    /// What was last synced of them: ``tagsAndFlags``, for a note as the server stores it.
    var baseTagsAndFlags = TagsAndFlags()
}

/// A note a sync adds to this device, clean and as the server stores it: a pulled note new here
/// (``PullPlanner/Action/insert(_:)``), or the conflict copy of this device's own push, stored from the push's answer
/// (``PushResultPlanner/Acceptance/conflictCopy``). The store inserts both with one statement.
struct NewSyncedNote: Sendable, Equatable {
    var clientID: Int64
    var origin: Int64
    var state: SyncedState
    /// The time in the note's client ID.
    var createdAt: Int64
    var updatedAt: Int64
    /// A conflict copy that holds this device's text (the answer to its own push), not another device's.
    var conflictHere = false
}
