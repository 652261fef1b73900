import MiniFlake
import NoteSyncProtocol

/// Decides what one push result does to the local note it answers. Pure: a function of values.
///
/// The sync engine applies a whole batch's answer in one transaction: for each change it removes the snapshot
/// (skipping the change when another process already did, having applied the same answer), reads the note's
/// revision, and executes the ``Action`` that ``apply(_:to:localRevision:now:)`` returns.
///
/// Rules:
/// - `rejected`: the change is refused (``refusal(for:)``), with the server's error or a generic `rejected`.
/// - Any other status is accepted. The server ID the result names is taken from any other local note that holds
///   it (a note carried between accounts may hold a stale one). A `conflict` stores the server's conflict copy
///   (the pushed text, version 1, the note's origin) at once, not at the next pull, so the text never leaves this
///   device even when the pull fails and the device then signs in to another account; a copy already here (by
///   server ID or by client ID and origin) is not stored twice.
/// - Not edited while the push was in flight (same revision): the note settles, it now matches the server (its
///   text is the server's when the result carries one, and its base is that text; likewise its tags, flags and
///   attachments, and their bases). Edited meanwhile: it stays dirty and takes the result's server ID and the pushed text, tags and
///   flags as its bases, so the next push merges from what was pushed. A snapshot taken before tags existed leaves
///   the note's tags and flags as they are.
/// - A conflict copy holds the pushing device's text, tags and flags; the note keeps the merged ones.
/// - Refusals: `unknown_note` (the account has no note with that server ID, e.g. the server lost it) forgets the
///   note's server ID, so the next round pushes it by client ID; `invalid_base` (the server's history is behind
///   ours, e.g. restored from a backup) forgets its server version, so the next round merges from the base text
///   alone. Any other error is recorded on the note, which is not pushed again until edited (`quota_exceeded`: until
///   the next sync, which tries it once more, ``OutboxPlanner/retriesAtEverySync(_:)``); it is not recorded
///   when the note was edited since the snapshot.
enum PushResultPlanner {
    /// What a result does.
    enum Action: Sendable, Equatable {
        case accept(Acceptance)
        case refuse(Refusal)
    }

    /// The writes of an accepted change, executed in this order.
    struct Acceptance: Sendable, Equatable {
        /// Take this server ID from any other local note that holds it.
        var releaseServerID: Int64?
        /// Insert this conflict copy (what the server stored: the pushed text, version 1, clean, holding this
        /// device's text) unless a local note already has its server ID or its (client ID, origin).
        var conflictCopy: NewSyncedNote?
        /// What happens to the note itself; nil leaves it as it is.
        var update: NoteUpdate?
    }

    enum NoteUpdate: Sendable, Equatable {
        /// The note matches the server: clean, no push error.
        case settle(Settle)
        /// Edited while the push was in flight: stays dirty, takes the server ID, merges from `baseText` (and the
        /// pushed tags and flags, when the snapshot had them) next. The server version is forgotten (the server may
        /// have moved on).
        case rebase(serverID: Int64, baseText: String, baseTagsAndFlags: TagsAndFlags?)
    }

    /// The note's state once it matches the server.
    struct Settle: Sendable, Equatable {
        /// Nil keeps the note's server ID.
        var serverID: Int64?
        /// Nil after a replay (the version the replay reports may not be the note's latest).
        var serverVersion: Int64?
        var text: String
        var deleted: Bool
        /// Nil for a delete the server never stored anything for: a purely local tombstone.
        var baseText: String?
        /// Set when the text came from the server; nil keeps the note's time.
        var updatedAt: Int64?
        /// The note's tags and flags, which are also their base; nil leaves them (a snapshot taken before tags).
        var tagsAndFlags: TagsAndFlags? = nil
        /// The note's `note_tags` rows are written again: its tags or its deleted flag changed.
        var reindexTags = false
    }

    /// What a refused change does to its note.
    enum Refusal: Sendable, Equatable {
        /// `unknown_note`: forget the server ID and version; the next round pushes by client ID.
        case forgetServerID
        /// `invalid_base`: forget the server version; the next round merges from the base text alone.
        case forgetServerVersion
        /// Record the error on the note unless it was edited since the snapshot (revision changed).
        case recordError(APIErrorBody)
    }

    /// What `result` does to the note `entry` snapshotted, whose revision is now `localRevision`. A conflict copy
    /// takes the snapshot's edit time (the server's too), else `now`.
    static func apply(_ result: ChangeResult, to entry: OutboxEntry, localRevision: Int64, now: Int64) -> Action {
        if result.status == .rejected {
            let error = result.error ?? APIErrorBody(code: APIErrorCode("rejected"), message: "The server refused the change.")
            return .refuse(refusal(for: error))
        }
        let serverID = result.serverID?.rawValue
        var acceptance = Acceptance(releaseServerID: serverID)
        if result.status == .conflict, let copy = result.conflict, let serverID {
            acceptance.conflictCopy = NewSyncedNote(
                clientID: copy.clientID.rawValue, origin: entry.origin.rawValue,
                state: SyncedState(
                    serverID: copy.serverID.rawValue, version: 1, text: entry.text, deleted: false, baseText: entry.text,
                    isConflict: true, conflictOf: serverID, tagsAndFlags: entry.tagsAndFlags ?? TagsAndFlags(),
                    baseTagsAndFlags: entry.tagsAndFlags ?? TagsAndFlags()),
                createdAt: copy.clientID.unixMilliseconds, updatedAt: entry.editedAt ?? now, conflictHere: true)
        }
        if localRevision == entry.revision {
            let text = result.text ?? entry.text
            let deleted: Bool
            switch result.status {
            case .kept, .merged, .conflict: deleted = false
            case .deleted: deleted = true
            default: deleted = entry.deleted
            }
            let pushed = entry.tagsAndFlags
            let settled = pushed.map { pushed in
                TagsAndFlags(
                    tags: result.tags.map(Tags.canonical) ?? pushed.tags, pinned: result.pinned ?? pushed.pinned,
                    archived: result.archived ?? pushed.archived,
                    attachments: result.attachments.map(StoredAttachments.canonical) ?? pushed.attachments)
            }
            acceptance.update = .settle(
                Settle(
                    serverID: serverID, serverVersion: result.replayed ? nil : result.version, text: text, deleted: deleted,
                    baseText: serverID == nil && deleted ? nil : text, updatedAt: result.text != nil ? now : nil,
                    tagsAndFlags: settled, reindexTags: deleted != entry.deleted || settled?.tags != pushed?.tags))
        } else if let serverID {
            acceptance.update = .rebase(serverID: serverID, baseText: entry.text, baseTagsAndFlags: entry.tagsAndFlags)
        }
        return .accept(acceptance)
    }

    /// What a refusal with `error` does: two codes are recoverable and retried in the next round, any other is
    /// recorded on the note.
    static func refusal(for error: APIErrorBody) -> Refusal {
        switch error.code {
        case .unknownNote: .forgetServerID
        case .invalidBase: .forgetServerVersion
        default: .recordError(error)
        }
    }
}

extension SyncReport {
    /// Counts a change the server accepted (a replay included).
    mutating func countAccepted(_ result: ChangeResult) {
        pushed += 1
        count(result.status)
        if result.replayed { replayed += 1 }
    }

    /// Reports a refusal recorded on the note `entry` snapshotted.
    mutating func countFailure(of entry: OutboxEntry, error: APIErrorBody) {
        failures.append(PushFailure(noteID: entry.noteID, clientID: entry.clientID, origin: entry.origin, error: PushError(error)))
    }
}
