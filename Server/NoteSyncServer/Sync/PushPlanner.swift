import MiniFlake
import NoteCrypto
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
/// 5. A note: `baseVersion > version` → `invalid_base`. Delete: already deleted → `unchanged` (`deleted`, a write,
///    when the tags or flags it carries, merged onto the tombstone, change it; never for an encrypted account, rule
///    8); base current (its text, and its tags and flags when the change names their bases) → tombstone (`deleted`);
///    else `kept` (an edit wins over a delete, a change of tags or flags too), the tags and flags the change carries
///    merged onto the note as an edit's are (a write when they change). Edit of a tombstone → restored (`updated`).
///    Same text → `unchanged`. Base current → fast-forward (`updated`). Otherwise a three-way merge: clean →
///    `merged`; overlapping → `conflict`, the pushed text going to a new note (a conflict copy).
///    A note found by `(clientID, origin)` reports `reconciled` instead of `updated` or `unchanged`.
///    Every write keeps the change's `editedAt` (else `now`) as the note's edit time; a clean merge keeps the later
///    of the two edits' times. The edit time is informational: nothing here reads it to decide.
///    Tags and flags (``Labels``): a new note takes the pushed ones (none: no tags, not pinned, not archived). An
///    edit merges each field it carries three-way against its base with the note's (``TagMerge``, ``FlagMerge``;
///    `tags` without `baseTags` has the empty set as base, a flag without its base wins) and leaves the others as
///    they are; a change of tags or flags alone is a write like a text's (`updated`, or `reconciled`). A clean
///    merge writes the merged text with the merged tags and flags. A conflict copy takes the pushed text with the
///    pushing device's tags and flags (the note's for a field the change left out), and the note keeps its text and
///    takes the merged tags and flags (a write when they changed). A delete leaves them, merged, on the tombstone. The answer
///    carries each field the change carried whose value on the note differs from it (``ChangeResult/tags``).
/// 6. Every change that is not rejected records an ``AppliedEdit`` (with the answer's tags and flags); every write
///    of a note keeps its new state as a version in the history (``Plan/versions``, ``StoredVersion``).
/// 7. Quota: a change whose writes would take the account's ``AccountUsage`` over its ``AccountQuota`` (notes, tombstones
///    included, or bytes) is rejected `quota_exceeded` instead (checked at steps 4 and 5, before anything is
///    written). The bytes are the notes' texts plus the texts applied edits keep for replays plus the texts of the
///    kept versions (``AccountUsage/storedBytes``): a change's growth is its notes' change in size, plus each written
///    note's new text (its version in the history), plus the text its applied edit keeps (a `merged`, `conflict` or
///    `kept` answer's text), and a change whose growth is not positive is always accepted: a delete (its version's
///    text is empty), an edit that at least halves a note's text. So an accepted change either ends within the limit
///    or does not raise the total. The usage is a running total kept with the account row, so the check costs
///    nothing per stored note.
/// 8. Encrypted accounts (``Input/encryption``, ``EncryptedRules``): the server cannot read or merge, so before step 2
///    a change whose text is not a well-formed note envelope (``NoteEnvelope``; a delete's text may be "") is rejected
///    `not_encrypted`, one sealed under a generation the account does not have yet `invalid_field`, and one that
///    carries `baseText`, `tags`, `pinned`, `archived` or their bases (they would be plaintext) `invalid_field`. At
///    step 5, a change whose `baseVersion` is not the note's current version is `stale` (nothing written or
///    recorded, the note's version in the answer) unless it is a replay of the note's text or a delete of a
///    tombstone (`unchanged`, or `reconciled`, whatever its base and its `chunkRefs`: both write nothing, since the
///    envelope the note keeps is sealed for its own edit, and rule 9 would put it under this change's edit ID, which no
///    device opens); the base current, it is a fast-forward or a tombstone as above. No
///    merge, no conflict copy: the device makes them. Every write of such an account's note stores no tags and no
///    flags (they are in the envelope): a converting account's note that had them in the clear loses them there.
/// 9. Every write of a note keeps the change's edit ID as the note's and the version's (``StoredNote/editID``).
/// 10. Attachments (``Labels``) travel with the tags and flags: a new note takes the pushed set, an edit merges it
///    three-way against `baseAttachments` with the note's (``AttachmentMerge``), a conflict copy takes the pushed set
///    (the note's when the change carries none), a tombstone keeps its set. Before step 3 (after a replay is
///    answered), a change that refers to a chunk the account does not store (``Input/knownChunks``; the chunks of its
///    `attachments` and its `chunkRefs`, not of its base) is rejected `unknown_chunk`, and a plaintext account's
///    change carrying `chunkRefs` `invalid_field` (its references are its manifests' chunks). Every write keeps the
///    note's chunk references (``StoredNote/chunkRefs``): a plaintext note's manifests' chunks, an encrypted note's
///    pushed `chunkRefs` (the last pushed when a change carries none), for the chunk collector.
public enum PushPlanner {
    /// Whether an account's pushes must be encrypted (``EncryptionState/requiresEncryptedPushes``).
    public enum Encryption: Sendable, Equatable {
        /// A plaintext account: texts as pushed, merged by the server.
        case none
        /// An encrypted (or converting, or reset) account whose current key generation is `generation`.
        case required(generation: UInt32)
    }

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
        public var usage = AccountUsage()
        /// The account's limits.
        public var quota: AccountQuota = .unlimited
        /// The pushing session's device name (see ``PushContext/device``).
        public var device: String?
        /// Whether the account's changes must be encrypted (rule 8).
        public var encryption: Encryption = .none
        /// Of the chunks the batch refers to (``LoadKeys/chunks``), the ones the account stores (rule 10).
        public var knownChunks: Set<ContentHash> = []
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
        /// The versions to keep in the history: one per write of a note, in the order written (a note the batch
        /// changed twice has two), each the note's state right after that write.
        public var versions: [StoredVersion]
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
        /// The distinct chunks the changes refer to (their `attachments`' chunks and their `chunkRefs`), ascending: the
        /// store loads which of them the account has (``Input/knownChunks``) and references them again.
        public var chunks: [ContentHash] = []
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
        keys.chunks = Set(changes.flatMap { referencedChunks($0) }).sorted()
        return keys
    }

    /// Plans a push. Throws only what `mintID` throws.
    /// The chunks a change refers to (rule 10): its attachments' and its `chunkRefs`, in order, with repeats.
    static func referencedChunks(_ change: NoteChange) -> [ContentHash] {
        (change.attachments ?? []).flatMap(\.chunks) + (change.chunkRefs ?? [])
    }

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
            results: results, writes: writes, newEdits: planner.newEdits, versions: planner.versions, newSequence: planner.sequence,
            newUsage: planner.usage, oldUsage: input.usage)
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
        /// Every version the batch writes, in order (a note written twice keeps both).
        var versions: [StoredVersion] = []
        /// The pushing session's device name, kept with each version.
        let device: String?
        /// The account's totals, updated as the batch writes.
        var usage: AccountUsage
        let quota: AccountQuota
        let encryption: Encryption
        /// The edit ID of the change being applied: every note it writes keeps it (rule 9).
        var editing: FlakeID?
        let knownChunks: Set<ContentHash>

        init(input: Input) {
            knownChunks = input.knownChunks
            encryption = input.encryption
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
            device = input.device
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
            editing = change.editID
            if case .required(let generation) = encryption,
                let (code, field, message) = EncryptedRules.refusal(of: change, generation: generation, limits: limits)
            {
                return reject(code, field, message)
            }
            func overQuota(_ writes: [(new: StoredNote, old: StoredNote?)], replayText: String? = nil) -> ChangeResult? {
                guard let message = quotaRefusal(writes, replayText: replayText) else { return nil }
                return reject(.quotaExceeded, .text, message)
            }

            // 2. Replay.
            if let edit = applied[AppliedEditKey(editID: change.editID, noteKey: NoteKey(clientID: change.clientID, origin: change.origin), pusher: pusher)] {
                return ChangeResult(
                    clientID: change.clientID, editID: change.editID, status: edit.status, serverID: edit.serverID,
                    version: edit.version, text: edit.text, tags: edit.tags, pinned: edit.pinned, archived: edit.archived,
                    conflict: edit.conflict, replayed: true
                )
            }

            // Rule 10: the chunks it refers to are the account's.
            if encryption == .none, change.chunkRefs != nil {
                return reject(
                    .invalidField, .chunkRefs,
                    "A plaintext account's change carries no chunkRefs: the server reads them from the attachments.")
            }
            if let missing = referencedChunks(change).first(where: { !knownChunks.contains($0) }) {
                return reject(
                    .unknownChunk, change.chunkRefs?.contains(missing) == true ? .chunkRefs : .attachments,
                    "The account stores no chunk \(missing): upload it (PUT /v1/chunks/\(missing)), then push again; nothing was stored.")
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
                    updatedAt: now, editedAt: editedAt, tags: TagRules.sorted(change.tags ?? []), pinned: change.pinned ?? false,
                    archived: change.archived ?? false, attachments: AttachmentRules.sorted(change.attachments ?? []),
                    chunkRefs: Set(change.chunkRefs ?? []).sorted()
                )
                if let refused = overQuota([(note, nil)]) { return refused }
                write(note, isNew: true)
                return record(change, status: .created, serverID: serverID, version: 1, note: note)
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
            if encryption != .none, !baseIsCurrent, EncryptedRules.isStale(change, note: note) {
                // The server cannot merge what it cannot read: the device pulls, merges and pushes again.
                return ChangeResult(
                    clientID: change.clientID, editID: change.editID, status: .stale, serverID: note.serverID, version: note.version)
            }

            if change.deleted {
                /// The note with the tags and flags the delete merges onto it as its next version; nil when they change
                /// nothing.
                func relabelled() -> StoredNote? {
                    let labels = Labels(merging: change, onto: note)
                    guard labels != Labels(note) else { return nil }
                    var next = note
                    labels.apply(to: &next)
                    next.version += 1
                    next.editedAt = editedAt
                    return next
                }
                if note.deleted {
                    // Deleted on another device too: the tags and flags this device changed before deleting are merged
                    // onto the tombstone all the same (a restore must not bring back a tag it took off). Not on an
                    // encrypted account's: its labels are in the tombstone's envelope, sealed for the edit that wrote
                    // it, and a write would keep that envelope under this change's edit ID, which no device opens
                    // (notes-sim's seed 2499: a delete carrying `chunkRefs` the tombstone lacked).
                    guard encryption == .none, let next = relabelled() else {
                        return record(change, status: .unchanged, serverID: note.serverID, version: note.version, note: note)
                    }
                    if let refused = overQuota([(next, note)]) { return refused }
                    write(next, isNew: false)
                    return record(change, status: .deleted, serverID: next.serverID, version: next.version, note: next)
                }
                if baseIsCurrent, PushPlanner.labelsUnchanged(since: change, on: note) {
                    // The tombstone keeps the note's tags and flags as the deleting device left them (a tag it took
                    // off before deleting stays off; a restore brings them back).
                    let stored = note
                    Labels(merging: change, onto: note).apply(to: &note)
                    // An encrypted account's tombstone keeps the delete's envelope (its payload's `seq` continues the
                    // note's chain for the devices); a plaintext one no text.
                    note.text = encryption != .none ? change.text : ""
                    note.deleted = true
                    note.version += 1
                    note.editedAt = editedAt
                    if let refused = overQuota([(note, stored)]) { return refused }
                    write(note, isNew: false)
                    return record(change, status: .deleted, serverID: note.serverID, version: note.version, note: note)
                }
                // The note changed since the client's base (its text, or its tags or flags: another device tagged,
                // pinned or archived it): an edit wins over a delete. The answer's text is kept for replays, so it
                // counts against the byte limit like any stored text. What the deleting device changed of the tags
                // and flags before it deleted still takes effect, merged as an edit's would be (a tag it took off
                // stays off): a write when they change.
                if let next = relabelled() {
                    if let refused = overQuota([(next, note)], replayText: next.text) { return refused }
                    note = next
                    write(note, isNew: false)
                } else if let refused = overQuota([], replayText: note.text) {
                    return refused
                }
                return record(change, status: .kept, serverID: note.serverID, version: note.version, text: note.text, note: note)
            }

            let applied: ChangeStatus = matched ? .reconciled : .updated
            let stored = note
            let labels = Labels(merging: change, onto: note)
            /// The pushed text, with the merged tags and flags, as the note's next version (restoring a tombstone).
            func advance() -> ChangeResult {
                note.text = change.text
                note.deleted = false
                note.version += 1
                note.editedAt = editedAt
                labels.apply(to: &note)
                if let refused = overQuota([(note, stored)]) { return refused }
                write(note, isNew: false)
                return record(change, status: applied, serverID: note.serverID, version: note.version, note: note)
            }
            // An edit concurrent with a delete wins: restore the note with the pushed text.
            if note.deleted { return advance() }
            if ThreeWayMerge.sameBytes(change.text, note.text) {
                // An encrypted note's own envelope sent again is sealed for the note's edit: it writes nothing, whatever
                // `chunkRefs` it carries (a write would put it under this change's edit ID).
                guard encryption == .none, labels != Labels(note) else {
                    return record(
                        change, status: matched ? .reconciled : .unchanged, serverID: note.serverID, version: note.version, note: note)
                }
                // The text is the note's; the tags or flags changed.
                return advance()
            }
            if baseIsCurrent { return advance() }

            // Concurrent edits.
            switch ThreeWayMerge.merge(base: change.baseText ?? "", ours: note.text, theirs: change.text) {
            case .clean(let merged):
                let text = ThreeWayMerge.sameBytes(merged, change.text) ? nil : merged
                let changesNote = !ThreeWayMerge.sameBytes(merged, note.text) || labels != Labels(note)
                if changesNote {
                    note.text = merged
                    note.version += 1
                    note.editedAt = max(note.editedAt ?? note.updatedAt, editedAt)
                    labels.apply(to: &note)
                }
                if let refused = overQuota(changesNote ? [(note, stored)] : [], replayText: text) { return refused }
                if changesNote { write(note, isNew: false) }
                return record(change, status: .merged, serverID: note.serverID, version: note.version, text: text, note: note)
            case .conflict:
                // The copy takes the pushed text with the pushing device's tags and flags; the note keeps its text and
                // takes the merged tags and flags (so a concurrent tag change on either side survives).
                // Mint the client ID first: the copy's server ID is then the larger, and the largest stored server
                // ID stays a valid high-water mark for the generator.
                let copyClientID = try mintID()
                let copyServerID = try mintID()
                let copy = StoredNote(
                    accountID: accountID, serverID: copyServerID, clientID: copyClientID, origin: change.origin,
                    version: 1, text: change.text, deleted: false, conflictOf: note.serverID, changeSeq: 0,
                    createdAt: now, updatedAt: now, editedAt: editedAt, tags: change.tags.map(TagRules.sorted) ?? note.tags,
                    pinned: change.pinned ?? note.pinned, archived: change.archived ?? note.archived,
                    attachments: change.attachments.map(AttachmentRules.sorted) ?? note.attachments
                )
                let relabels = labels != Labels(note)
                if relabels {
                    note.version += 1
                    note.editedAt = max(note.editedAt ?? note.updatedAt, editedAt)
                    labels.apply(to: &note)
                }
                if let refused = overQuota([(copy, nil)] + (relabels ? [(note, stored)] : []), replayText: note.text) {
                    return refused
                }
                write(copy, isNew: true)
                if relabels { write(note, isNew: false) }
                return record(
                    change, status: .conflict, serverID: note.serverID, version: note.version, text: note.text,
                    conflict: ConflictCopy(serverID: copyServerID, clientID: copyClientID), note: note
                )
            }
        }

        /// Stores the outcome as an applied edit and builds the result; the edit's text is counted in ``usage``. With
        /// `note` (the note's state after the change), the answer carries each of its tags and flags the change
        /// carried and the note now holds otherwise (``ChangeResult/tags``).
        mutating func record(
            _ change: NoteChange, status: ChangeStatus, serverID: FlakeID?, version: Int64?, text: String? = nil,
            conflict: ConflictCopy? = nil, note: StoredNote? = nil
        ) -> ChangeResult {
            usage.replayTextBytes += Int64(text?.utf8.count ?? 0)
            let tags = change.tags.flatMap { pushed in note.flatMap { sameDisplayForms(pushed, $0.tags) ? nil : $0.tags } }
            let pinned = change.pinned.flatMap { pushed in note.flatMap { $0.pinned == pushed ? nil : $0.pinned } }
            let archived = change.archived.flatMap { pushed in note.flatMap { $0.archived == pushed ? nil : $0.archived } }
            // Attachments: as tags when the change carried them; when it did not (a device sends none while the note and
            // its base have none), the note's own, if it has any: otherwise a device would never learn the attachments
            // another device gave the note since its base (its cursor is past that version once it pulls).
            let attachments: [AttachmentManifest]? =
                if let pushed = change.attachments {
                    note.flatMap { AttachmentRules.sameSet(pushed, $0.attachments) ? nil : $0.attachments }
                } else {
                    note.flatMap { $0.attachments.isEmpty ? nil : $0.attachments }
                }
            let noteKey = NoteKey(clientID: change.clientID, origin: change.origin)
            let edit = AppliedEdit(
                editID: change.editID, noteKey: noteKey, pusher: pusher, status: status, serverID: serverID, version: version, text: text,
                conflict: conflict, tags: tags, pinned: pinned, archived: archived, createdAt: now
            )
            applied[AppliedEditKey(editID: change.editID, noteKey: noteKey, pusher: pusher)] = edit
            newEdits.append(edit)
            return ChangeResult(
                clientID: change.clientID, editID: change.editID, status: status, serverID: serverID, version: version,
                text: text, tags: tags, pinned: pinned, archived: archived, attachments: attachments, conflict: conflict
            )
        }

        /// Whether two sets hold the same display forms, byte for byte, in any order.
        func sameDisplayForms(_ a: [String], _ b: [String]) -> Bool {
            a.count == b.count && Set(a.map { Array($0.utf8) }) == Set(b.map { Array($0.utf8) })
        }

        /// Why writing `writes` (each note's new state over its old one, nil for a new note) and keeping `replayText`
        /// in the change's applied edit would break the quota, or nil when it keeps within it. Each written note keeps
        /// its new text in the history as well. A change that does not grow what is over a limit is always within it:
        /// its growth is the notes' change in size plus the history's new texts plus the kept text, so only a delete
        /// (whose version's text is empty) is sure never to grow it.
        func quotaRefusal(_ writes: [(new: StoredNote, old: StoredNote?)], replayText: String?) -> String? {
            let addedNotes = Int64(writes.filter { $0.old == nil }.count)
            var growth = Int64(replayText?.utf8.count ?? 0)
            for (new, old) in writes {
                let size = Int64(new.text.utf8.count)
                growth += size - Int64(old?.text.utf8.count ?? 0) + size
            }
            let bytes = usage.storedBytes + growth
            if addedNotes > 0, usage.noteCount + addedNotes > quota.maxNotes {
                return "The account holds its limit of \(quota.maxNotes) notes (deleted ones included); this change needs a new one."
            }
            if growth > 0, bytes > quota.maxTextBytes {
                return "The account would store \(bytes) bytes (its notes' texts, the texts kept to answer replays and its notes' history), over its limit of \(quota.maxTextBytes); delete notes to make room (their history goes with the retention), or ask the operator."
            }
            return nil
        }

        /// Puts a note's new state in the overlay with the next change sequence, and counts it in ``usage``.
        mutating func write(_ note: StoredNote, isNew: Bool) {
            let old = isNew ? nil : notes[note.serverID]
            usage.noteCount += isNew ? 1 : 0
            usage.textBytes += Int64(note.text.utf8.count) - Int64(old?.text.utf8.count ?? 0)
            var note = note
            if encryption != .none {
                // Rule 8: the tags and flags are in the envelope; what a converting account's note held in the clear goes.
                (note.tags, note.pinned, note.archived) = ([], false, false)
                note.attachments = []
            } else {
                note.chunkRefs = AttachmentRules.chunks(of: note.attachments)
            }
            sequence += 1
            note.changeSeq = sequence
            note.updatedAt = now
            note.editID = editing
            written.insert(note.serverID)
            if isNew { created.insert(note.serverID) }
            notes[note.serverID] = note
            byKey[note.key] = note.serverID
            versions.append(StoredVersion(note, savedAt: now, device: device))
            usage.historyBytes += Int64(note.text.utf8.count)
        }
    }
}
