import MiniFlake
import NoteSyncProtocol

/// Why a note's change was refused: the protocol's stable error code (e.g. `note_too_large`) and the server's
/// sentence.
public struct PushError: Sendable, Equatable, Codable {
    public var code: String
    public var message: String

    /// Refused for the account's quota (`quota_exceeded`): every sync tries the note again
    /// (``OutboxPlanner/retriesAtEverySync(_:)``).
    public var isOverQuota: Bool { code == APIErrorCode.quotaExceeded.rawValue }
    /// Refused for a reason every sync tries again (the quota, a chunk neither side has:
    /// ``OutboxPlanner/retriesAtEverySync(_:)``), without an edit.
    public var isRetriedAtEverySync: Bool { OutboxPlanner.retriesAtEverySync(code) }
}

extension PushError {
    init(_ body: APIErrorBody) {
        self.init(code: body.code.rawValue, message: body.message)
    }
}

/// One change the server refused (or the client refused to send because it cannot fit the server's limits).
public struct PushFailure: Sendable, Equatable {
    /// The local note.
    public var noteID: Int64
    public var clientID: FlakeID
    public var origin: FlakeID
    /// The reason, e.g. `note_too_large`.
    public var error: PushError
}

/// What a ``NotesClient/sync(progress:)`` did.
public struct SyncReport: Sendable, Equatable {
    /// Changes sent and accepted by the server (every status except `rejected`), including replays.
    public var pushed = 0
    public var created = 0
    public var reconciled = 0
    public var updated = 0
    public var unchanged = 0
    public var merged = 0
    /// Pushes that overlapped another device's edit: the pushed text became a conflict copy.
    public var conflicts = 0
    public var deleted = 0
    /// Deletes refused because the note changed on the server meanwhile: the note came back.
    public var kept = 0
    /// Results the server had already applied (an earlier answer was lost): nothing was applied twice.
    public var replayed = 0
    /// Records received from the pull.
    public var pulled = 0
    /// Pulled records of notes this device had without their server ID, found by (client ID, origin): after a
    /// sign-in, the notes the account already holds. Like ``reconciled`` (found by the server when pushed), each is
    /// a duplicate avoided.
    public var matched = 0
    /// Pulled records that added a note here or changed one (the rest were already up to date, e.g. this
    /// device's own pushes coming back).
    public var applied = 0
    /// Local IDs of notes whose push overlapped another device's edit: the note keeps the other device's text, and
    /// this device's text went into a new conflict copy.
    public var conflictNotes: [Int64] = []
    /// Conflict copies the pull brought from other devices (their text; the note kept this device's or another's).
    public var pulledConflictCopies = 0
    /// Local IDs of notes this device had deleted that came back because another device edited them meanwhile
    /// (an edit wins over a delete): refused deletes (`kept`) and tombstones a pull restored.
    public var undeleted: [Int64] = []
    /// Changes refused by this sync; each note keeps its error and is not pushed again until edited (refused for the
    /// quota: until the next sync).
    public var failures: [PushFailure] = []
    /// Every note the server refuses once this sync ended: this sync's ``failures`` and those refused by earlier
    /// syncs and not edited since (they are not sent again, but they are not synced either).
    public var refused: [PushFailure] = []
    /// Notes still waiting to be pushed after this sync (edited while it ran); refused ones are not counted (see
    /// ``NotesStatus/failed``).
    public var pending = 0
    /// Attachments: chunks sent before the pushes that refer to them (those the server lacked), and their bytes.
    public var chunksUploaded = 0
    public var chunkBytesUploaded: Int64 = 0
    /// Attachments left out of the changes sent (and so dropped from their notes) because their bytes are on neither
    /// this device nor the server (``ChunkPlanner``): the account that stored them was deleted, or the chunk cache
    /// was emptied by hand. No device could save them.
    public var attachmentsDropped = 0
    /// How many push requests and pull pages were exchanged.
    public var requests = 0
    /// Encrypted accounts: changes the server answered `stale` (the note changed there since the change's base); the
    /// sync pulled, merged on this device and pushed again.
    public var stale = 0
    /// Encrypted accounts: notes merged on this device because another device's version came in while they had
    /// changes waiting (the server cannot merge what it cannot read). A text that did not merge is in
    /// ``deviceConflicts``.
    public var deviceMerged = 0
    /// Encrypted accounts: local IDs of notes whose text did not merge with another device's version: the note took
    /// that version and this device's text went into a new conflict copy made here.
    public var deviceConflicts: [Int64] = []
    /// Encrypted accounts: pulled records this device refused (they do not open, or are older than what it has seen
    /// of the note); each note keeps this device's copy.
    public var tampered: [TamperedNote] = []
    /// Encrypted accounts: notes sealed under an older key generation that this sync queued to be sealed again under
    /// the newest (at most ``SyncEngine/resealPerSync``; lazy re-seal after a rotation).
    public var resealed = 0

    public init() {}

    mutating func count(_ status: ChangeStatus) {
        switch status {
        case .created: created += 1
        case .reconciled: reconciled += 1
        case .updated: updated += 1
        case .unchanged: unchanged += 1
        case .merged: merged += 1
        case .conflict: conflicts += 1
        case .deleted: deleted += 1
        case .kept: kept += 1
        case .rejected, .stale: break
        }
    }
}

/// Progress of a sync, for a progress line.
public struct SyncProgress: Sendable, Equatable {
    public enum Phase: String, Sendable {
        /// Sending local changes; `total` is the number of changes in this round.
        case pushing
        /// Receiving changes; `total` is how many the pull brings at most, from the server's `remaining` (exact for
        /// a pull from the start, such as a first sign-in), nil before the first page or from a server that does
        /// not say.
        case pulling
    }

    public var phase: Phase
    public var done: Int
    public var total: Int?

    public init(phase: Phase, done: Int, total: Int?) {
        self.phase = phase
        self.done = done
        self.total = total
    }
}
