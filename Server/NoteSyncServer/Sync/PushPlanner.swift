import MiniFlake
import NoteMerge
import NoteSyncProtocol

/// Decides what a push does: pure, deterministic, shared by every ``NoteStore``.
///
/// ``PushDriver`` runs it for every store: in one transaction it locks the account and reads its change sequence,
/// loads what ``loadKeys(of:)`` names, calls ``plan(_:mintID:)`` and writes the ``Plan``. The planner never reads a
/// clock or a random source: `now` and `mintID` are passed in, and ordering depends only on versions and the account
/// change sequence, never on device clocks.
///
/// Rules, per change in order (an overlay carries notes changed earlier in the same batch):
/// 1. Validate: text over `maxNoteBytes` → rejected `note_too_large`; the edit ID earlier in the batch → rejected
///    `duplicate_edit`; `baseVersion < 1` → rejected `invalid_base`. Rejected changes store nothing.
/// 2. Replay: the edit ID was applied before (in this account) → exactly its stored outcome (status, server ID,
///    version, text, conflict copy), `replayed: true`, whatever the note holds now. Nothing is written.
/// 3. Find the note: by server ID (absent in this account → `unknown_note`; other client ID or origin →
///    `client_id_mismatch`), else by `(clientID, origin)` (a reconciliation match).
/// 4. No note: a delete is `unchanged`; anything else creates version 1 (`created`).
/// 5. A note: `baseVersion > version` → `invalid_base`. Delete: already deleted → `unchanged`; base current →
///    tombstone (`deleted`); else `kept` (an edit wins over a delete). Edit of a tombstone → restored (`updated`).
///    Same text → `unchanged`. Base current → fast-forward (`updated`). Otherwise a three-way merge: clean →
///    `merged`; overlapping → `conflict`, the pushed text going to a new note (a conflict copy).
///    A note found by `(clientID, origin)` reports `reconciled` instead of `updated` or `unchanged`.
///    Every write keeps the change's `editedAt` (else `now`) as the note's edit time; a clean merge keeps the later
///    of the two edits' times. The edit time is informational: nothing here reads it to decide.
/// 6. Every change that is not rejected records an ``AppliedEdit``.
/// 7. Quota: a change whose writes would take the account's ``AccountUsage`` over its ``AccountQuota`` (notes, tombstones
///    included, or bytes) is rejected `quota_exceeded` instead (checked at steps 4 and 5, before anything is
///    written). The bytes are the notes' texts plus the texts applied edits keep for replays (``AccountUsage/storedBytes``):
///    a change's growth is its note's change in size plus the text its applied edit keeps (a `merged`, `conflict` or
///    `kept` answer's text), and a change whose growth is not positive is always accepted: deletes, shorter texts
///    from a device that had the current version, a merge that frees at least what its answer keeps. So an accepted
///    change either ends within the limit or does not raise the total. The usage is a running total kept with the
///    account row, so the check costs nothing per stored note.
public enum PushPlanner {
    /// Everything the planner reads.
    public struct Input: Sendable {
        public var accountID: FlakeID
        public var changes: [NoteChange]
        /// The account's notes named by the batch (any extra notes are ignored; other accounts' notes too).
        public var notes: [StoredNote]
        /// The account's applied edits for the batch's edit IDs (extra ones are ignored).
        public var appliedEdits: [AppliedEdit]
        /// The account's change sequence before the push.
        public var currentSequence: Int64
        public var limits: SyncLimits
        /// Server time, Unix milliseconds: stamped on written notes only.
        public var now: Int64
        /// The pushing installation (see ``PushContext/pusher``).
        public var pusher: FlakeID?
        /// The account's running totals before the push.
        public var usage: AccountUsage
        /// The account's limits.
        public var quota: AccountQuota

        public init(
            accountID: FlakeID, changes: [NoteChange], notes: [StoredNote], appliedEdits: [AppliedEdit],
            currentSequence: Int64, limits: SyncLimits, now: Int64, pusher: FlakeID? = nil,
            usage: AccountUsage = AccountUsage(), quota: AccountQuota = .unlimited
        ) {
            self.pusher = pusher
            self.usage = usage
            self.quota = quota
            self.accountID = accountID
            self.changes = changes
            self.notes = notes
            self.appliedEdits = appliedEdits
            self.currentSequence = currentSequence
            self.limits = limits
            self.now = now
        }
    }

    /// A note to write: its final state after the batch.
    public struct NoteWrite: Sendable, Equatable {
        public var note: StoredNote
        /// True when the note did not exist before the batch (insert), false for an update.
        public var isNew: Bool
    }

    /// Everything the store writes, and the answer.
    public struct Plan: Sendable {
        /// One per change, in order.
        public var results: [ChangeResult]
        /// Each changed note once, in its final state, ascending by its new change sequence.
        public var writes: [NoteWrite]
        /// The applied edits to insert (none of them existed before).
        public var newEdits: [AppliedEdit]
        /// The account's change sequence after the push (unchanged when nothing was written).
        public var newSequence: Int64
        /// The account's running totals after the push (unchanged when nothing was written).
        public var newUsage: AccountUsage
        /// The account's running totals before the push (``Input/usage``).
        public var oldUsage: AccountUsage
    }

    /// What a store loads before planning a batch: a function of the changes alone.
    ///
    /// A store loads, in the pushing account only:
    /// - the applied edits with these edit IDs (whoever pushed them and whatever note they named; a replay answers
    ///   from its applied edit alone);
    /// - the notes with these server IDs;
    /// - the notes with these client IDs (any origin: a note with the same client ID and another origin is loaded
    ///   too, and the planner ignores it).
    ///
    /// The planner ignores any extra note or applied edit, so a store may load a superset (an `IN` list padded with
    /// repeated values, a note found twice).
    public struct LoadKeys: Sendable, Equatable {
        /// The batch's distinct edit IDs, in order of first use.
        public var editIDs: [FlakeID]
        /// The distinct server IDs the changes name, in order of first use.
        public var serverIDs: [FlakeID]
        /// The distinct client IDs of the changes that name no server ID, in order of first use.
        public var clientIDs: [FlakeID]
    }

    /// What to load for a batch (see ``LoadKeys``).
    public static func loadKeys(of changes: [NoteChange]) -> LoadKeys {
        var keys = LoadKeys(editIDs: [], serverIDs: [], clientIDs: [])
        var seenEditIDs = Set<FlakeID>()
        var seenServerIDs = Set<FlakeID>()
        var seenClientIDs = Set<FlakeID>()
        for change in changes {
            if seenEditIDs.insert(change.editID).inserted { keys.editIDs.append(change.editID) }
            if let serverID = change.serverID {
                if seenServerIDs.insert(serverID).inserted { keys.serverIDs.append(serverID) }
            } else if seenClientIDs.insert(change.clientID).inserted {
                keys.clientIDs.append(change.clientID)
            }
        }
        return keys
    }

    /// Plans a push. Throws only what `mintID` throws.
    public static func plan(_ input: Input, mintID: () throws -> FlakeID) throws -> Plan {
        var planner = State(input: input)
        var results: [ChangeResult] = []
        results.reserveCapacity(input.changes.count)
        for (index, change) in input.changes.enumerated() {
            results.append(try planner.apply(change, index: index, mintID: mintID))
        }
        let writes = planner.written
            .map { NoteWrite(note: planner.notes[$0]!, isNew: planner.created.contains($0)) }
            .sorted { $0.note.changeSeq < $1.note.changeSeq }
        return Plan(
            results: results, writes: writes, newEdits: planner.newEdits, newSequence: planner.sequence, newUsage: planner.usage,
            oldUsage: input.usage)
    }

    // MARK: - State

    /// The overlay of one batch.
    struct State {
        let accountID: FlakeID
        let limits: SyncLimits
        let now: Int64
        var sequence: Int64
        /// The account's notes by server ID, updated as the batch changes them.
        var notes: [FlakeID: StoredNote] = [:]
        var byKey: [NoteKey: FlakeID] = [:]
        var applied: [AppliedEditKey: AppliedEdit] = [:]
        var pusher: FlakeID?
        var seenEditIDs = Set<FlakeID>()
        /// Server IDs written by the batch.
        var written = Set<FlakeID>()
        var created = Set<FlakeID>()
        var newEdits: [AppliedEdit] = []
        /// The account's totals, updated as the batch writes.
        var usage: AccountUsage
        let quota: AccountQuota

        init(input: Input) {
            usage = input.usage
            quota = input.quota
            accountID = input.accountID
            limits = input.limits
            now = input.now
            sequence = input.currentSequence
            for note in input.notes where note.accountID == input.accountID {
                notes[note.serverID] = note
                byKey[note.key] = note.serverID
            }
            pusher = input.pusher
            for edit in input.appliedEdits { applied[AppliedEditKey(editID: edit.editID, noteKey: edit.noteKey, pusher: edit.pusher)] = edit }
        }

        mutating func apply(_ change: NoteChange, index: Int, mintID: () throws -> FlakeID) throws -> ChangeResult {
            func reject(_ code: APIErrorCode, _ field: NoteChange.CodingKeys, _ message: String) -> ChangeResult {
                ChangeResult(
                    clientID: change.clientID, editID: change.editID, status: .rejected,
                    error: APIErrorBody(
                        code: code, message: message,
                        field: "\(PushRequest.CodingKeys.changes.rawValue)[\(index)].\(field.rawValue)")
                )
            }

            // 1. Validate.
            let firstUse = seenEditIDs.insert(change.editID).inserted
            if !change.deleted, change.text.utf8.count > limits.maxNoteBytes {
                return reject(.noteTooLarge, .text, "The note text is larger than \(limits.maxNoteBytes) bytes.")
            }
            if !firstUse {
                return reject(.duplicateEdit, .editID, "The edit ID \(change.editID) appears earlier in this batch.")
            }
            if let base = change.baseVersion, base < 1 {
                return reject(.invalidBase, .baseVersion, "The base version must be at least 1.")
            }
            func overQuota(_ new: StoredNote?, replacing old: StoredNote?, replayText: String? = nil) -> ChangeResult? {
                guard let message = quotaRefusal(new, replacing: old, replayText: replayText) else { return nil }
                return reject(.quotaExceeded, .text, message)
            }

            // 2. Replay.
            if let edit = applied[AppliedEditKey(editID: change.editID, noteKey: NoteKey(clientID: change.clientID, origin: change.origin), pusher: pusher)] {
                return ChangeResult(
                    clientID: change.clientID, editID: change.editID, status: edit.status, serverID: edit.serverID,
                    version: edit.version, text: edit.text, conflict: edit.conflict, replayed: true
                )
            }

            // 3. Find the note.
            let found: StoredNote?
            let matched: Bool
            if let serverID = change.serverID {
                guard let note = notes[serverID] else {
                    return reject(.unknownNote, .serverID, "No note \(serverID) in this account.")
                }
                guard note.clientID == change.clientID, note.origin == change.origin else {
                    return reject(
                        .clientIDMismatch, .clientID,
                        "Note \(serverID) has another client ID or origin than the change."
                    )
                }
                found = note
                matched = false
            } else {
                found = byKey[NoteKey(clientID: change.clientID, origin: change.origin)].flatMap { notes[$0] }
                matched = found != nil
            }

            // The edit's time, informational only (see ``NoteChange/editedAt``).
            let editedAt = change.editedAt.flatMap(WireTime.parse) ?? now

            // 4. No note.
            guard var note = found else {
                if change.deleted {
                    return record(change, status: .unchanged, serverID: nil, version: nil)
                }
                let serverID = try mintID()
                let note = StoredNote(
                    accountID: accountID, serverID: serverID, clientID: change.clientID, origin: change.origin,
                    version: 1, text: change.text, deleted: false, conflictOf: nil, changeSeq: 0, createdAt: now,
                    updatedAt: now, editedAt: editedAt
                )
                if let refused = overQuota(note, replacing: nil) { return refused }
                write(note, isNew: true)
                return record(change, status: .created, serverID: serverID, version: 1)
            }

            // 5. A note.
            if let base = change.baseVersion, base > note.version {
                return reject(
                    .invalidBase, .baseVersion,
                    "The base version \(base) is newer than the note's version \(note.version)."
                )
            }
            let baseIsCurrent =
                change.baseVersion == note.version
                || (!note.deleted && change.baseText.map { ThreeWayMerge.sameBytes($0, note.text) } == true)

            if change.deleted {
                if note.deleted {
                    return record(change, status: .unchanged, serverID: note.serverID, version: note.version)
                }
                if baseIsCurrent {
                    note.text = ""
                    note.deleted = true
                    note.version += 1
                    note.editedAt = editedAt
                    write(note, isNew: false)
                    return record(change, status: .deleted, serverID: note.serverID, version: note.version)
                }
                // The note changed since the client's base: an edit wins over a delete. The answer's text is kept for
                // replays, so it counts against the byte limit like any stored text.
                if let refused = overQuota(nil, replacing: note, replayText: note.text) { return refused }
                return record(change, status: .kept, serverID: note.serverID, version: note.version, text: note.text)
            }

            let applied: ChangeStatus = matched ? .reconciled : .updated
            let stored = note
            if note.deleted {
                // An edit concurrent with a delete wins: restore the note with the pushed text.
                note.text = change.text
                note.deleted = false
                note.version += 1
                note.editedAt = editedAt
                if let refused = overQuota(note, replacing: stored) { return refused }
                write(note, isNew: false)
                return record(change, status: applied, serverID: note.serverID, version: note.version)
            }
            if ThreeWayMerge.sameBytes(change.text, note.text) {
                return record(change, status: matched ? .reconciled : .unchanged, serverID: note.serverID, version: note.version)
            }
            if baseIsCurrent {
                note.text = change.text
                note.version += 1
                note.editedAt = editedAt
                if let refused = overQuota(note, replacing: stored) { return refused }
                write(note, isNew: false)
                return record(change, status: applied, serverID: note.serverID, version: note.version)
            }

            // Concurrent edits.
            switch ThreeWayMerge.merge(base: change.baseText ?? "", ours: note.text, theirs: change.text) {
            case .clean(let merged):
                let text = ThreeWayMerge.sameBytes(merged, change.text) ? nil : merged
                let changesNote = !ThreeWayMerge.sameBytes(merged, note.text)
                if changesNote {
                    note.text = merged
                    note.version += 1
                    note.editedAt = max(note.editedAt ?? note.updatedAt, editedAt)
                }
                if let refused = overQuota(changesNote ? note : nil, replacing: stored, replayText: text) { return refused }
                if changesNote { write(note, isNew: false) }
                return record(change, status: .merged, serverID: note.serverID, version: note.version, text: text)
            case .conflict:
                // Mint the client ID first: the copy's server ID is then the larger, and the largest stored server
                // ID stays a valid high-water mark for the generator.
                let copyClientID = try mintID()
                let copyServerID = try mintID()
                let copy = StoredNote(
                    accountID: accountID, serverID: copyServerID, clientID: copyClientID, origin: change.origin,
                    version: 1, text: change.text, deleted: false, conflictOf: note.serverID, changeSeq: 0,
                    createdAt: now, updatedAt: now, editedAt: editedAt
                )
                if let refused = overQuota(copy, replacing: nil, replayText: note.text) { return refused }
                write(copy, isNew: true)
                return record(
                    change, status: .conflict, serverID: note.serverID, version: note.version, text: note.text,
                    conflict: ConflictCopy(serverID: copyServerID, clientID: copyClientID)
                )
            }
        }

        /// Stores the outcome as an applied edit and builds the result; the edit's text is counted in ``usage``.
        mutating func record(
            _ change: NoteChange, status: ChangeStatus, serverID: FlakeID?, version: Int64?, text: String? = nil,
            conflict: ConflictCopy? = nil
        ) -> ChangeResult {
            usage.replayTextBytes += Int64(text?.utf8.count ?? 0)
            let noteKey = NoteKey(clientID: change.clientID, origin: change.origin)
            let edit = AppliedEdit(
                editID: change.editID, noteKey: noteKey, pusher: pusher, status: status, serverID: serverID, version: version, text: text,
                conflict: conflict, createdAt: now
            )
            applied[AppliedEditKey(editID: change.editID, noteKey: noteKey, pusher: pusher)] = edit
            newEdits.append(edit)
            return ChangeResult(
                clientID: change.clientID, editID: change.editID, status: status, serverID: serverID, version: version,
                text: text, conflict: conflict
            )
        }

        /// Why writing `new` (over `old`, nil for a new note; `new` nil when the note is not written) and keeping
        /// `replayText` in the change's applied edit would break the quota, or nil when it keeps within it.
        /// A change that does not grow what is over a limit is always within it: its growth is the note's change in
        /// size plus the kept text, so a shrinking note pays for its answer's text out of what it frees.
        func quotaRefusal(_ new: StoredNote?, replacing old: StoredNote?, replayText: String?) -> String? {
            let addsNote = new != nil && old == nil
            let noteGrowth = new.map { Int64($0.text.utf8.count) - Int64(old?.text.utf8.count ?? 0) } ?? 0
            let growth = noteGrowth + Int64(replayText?.utf8.count ?? 0)
            let bytes = usage.storedBytes + growth
            if addsNote, usage.noteCount + 1 > quota.maxNotes {
                return "The account holds its limit of \(quota.maxNotes) notes (deleted ones included); this change needs a new one."
            }
            if growth > 0, bytes > quota.maxTextBytes {
                return "The account would store \(bytes) bytes (its notes' texts and the texts kept to answer replays), over its limit of \(quota.maxTextBytes); shorten or delete notes to make room."
            }
            return nil
        }

        /// Puts a note's new state in the overlay with the next change sequence, and counts it in ``usage``.
        mutating func write(_ note: StoredNote, isNew: Bool) {
            let old = isNew ? nil : notes[note.serverID]
            usage.noteCount += isNew ? 1 : 0
            usage.textBytes += Int64(note.text.utf8.count) - Int64(old?.text.utf8.count ?? 0)
            var note = note
            sequence += 1
            note.changeSeq = sequence
            note.updatedAt = now
            written.insert(note.serverID)
            if isNew { created.insert(note.serverID) }
            notes[note.serverID] = note
            byKey[note.key] = note.serverID
        }
    }
}
