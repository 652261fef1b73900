import MiniFlake

/// A summary of the local state, for `notes status` and for the simulation's invariant checks.
public struct NotesStatus: Sendable, Equatable {
    /// This installation's origin ID (random, minted once).
    public var origin: FlakeID
    /// This installation's MiniFlake instance number (random in 0..<1024, chosen once).
    public var flakeInstance: Int
    /// The last ID minted here (client IDs and edit IDs), persisted with the note it minted.
    public var highWaterMark: FlakeID?
    /// The last client ID minted here with a scheme other than MiniFlake (``NotesEnvironment/clientIDScheme``);
    /// nil when there is none.
    public var clientIDHighWaterMark: FlakeID?
    /// The remembered server (kept after sign-out so the next sign-in needs no URL).
    public var serverURL: String?
    /// The signed-in account, nil when signed out.
    public var account: AccountInfo?
    /// The stored pull cursor (opaque), nil before the first pull and after sign-out.
    public var cursor: String?
    /// When a sync last completed, Unix milliseconds.
    public var lastSyncAt: Int64?
    /// Live (not deleted) notes.
    public var notes: Int
    /// Local tombstones.
    public var deletedNotes: Int
    /// Notes with changes not yet acknowledged by a server (refused ones included).
    public var pending: Int
    /// Notes whose last push was refused (see ``LocalNote/pushError``), ``overQuota`` included.
    public var failed: Int
    /// Notes refused for the account's quota: every sync tries them again without an edit
    /// (``OutboxPlanner/retriesAtEverySync(_:)``), so they count in ``toSend``.
    public var overQuota = 0
    /// Live conflict copies.
    public var conflicts: Int
    /// Push snapshots waiting for an answer (re-sent unchanged at the next sync).
    public var inFlight: Int
    /// Whether the last sync stopped while the server still had changes to send (an interrupted pull): the next
    /// sync resumes it.
    public var pullUnfinished: Bool = false
    /// The remembered server's largest note, in bytes (from the last sync), if known.
    public var maxNoteBytes: Int? = nil
    /// The signed-in account is end-to-end encrypted (this device holds its keys); false signed out or plaintext.
    public var encrypted = false

    /// Notes the next sync sends: those with changes (``pending``) but the ones refused until edited (a note refused
    /// for the quota is sent again).
    public var toSend: Int { pending - refusedUntilEdited }

    /// Notes the server refused that are not sent again until they are edited: ``failed`` but ``overQuota``.
    public var refusedUntilEdited: Int { failed - overQuota }
}
