import Foundation
import MiniFlake
import NoteSyncProtocol

/// One outbox snapshot with its note's identity: a change ready to send. A snapshot is re-sent unchanged (same
/// edit ID) until the server answers it, so a push whose answer was lost is answered `replayed`. The snapshot's
/// fields read through the entry (`entry.text`, `entry.editID`).
@dynamicMemberLookup
struct OutboxEntry: Sendable, Equatable {
    /// The outbox row.
    var snapshot: OutboxPlanner.Snapshot
    var clientID: FlakeID
    var origin: FlakeID
    /// Whether the note is a conflict copy (see ``OutboxPlanner/pushOrder(_:)``).
    var isConflict: Bool
    /// The change sealed for an encrypted account (``NoteSealing``), set just before it is planned; nil: plaintext.
    var sealed: SealedChange? = nil

    subscript<T>(dynamicMember field: WritableKeyPath<OutboxPlanner.Snapshot, T>) -> T {
        get { snapshot[keyPath: field] }
        set { snapshot[keyPath: field] = newValue }
    }

    /// The change as the server reads it: the note's whole state (text, tags, flags and attachments) with what was
    /// last synced of it, so the server merges each part three-way; a snapshot taken before tags existed sends none
    /// (the server leaves them as they are). Attachments are sent only when the note or its base has some: none on
    /// either side changes nothing on the server, and keeps changes small (and readable by servers older than them).
    ///
    /// Sealed (an encrypted account): the envelope as the text, `deleted` and `baseVersion` in the clear, nothing
    /// else of the note (the server refuses plaintext fields for an encrypted account): its attachments' manifests
    /// are in the envelope, and the change carries only `chunkRefs`, the addresses of their sealed chunks (sorted,
    /// each once), when the note or its base has attachments (`[]` once the last is detached).
    var change: NoteChange {
        if let sealed {
            return NoteChange(
                clientID: clientID, origin: origin, serverID: snapshot.serverID, editID: snapshot.editID, text: sealed.text,
                deleted: snapshot.deleted, baseVersion: snapshot.baseVersion,
                editedAt: snapshot.editedAt.map { WireTime.format(unixMilliseconds: $0) },
                chunkRefs: sendsAttachments ? AttachmentRules.chunks(of: snapshot.tagsAndFlags?.attachments ?? []) : nil)
        }
        let state = snapshot.tagsAndFlags
        let base = snapshot.baseTagsAndFlags
        return NoteChange(
            clientID: clientID, origin: origin, serverID: snapshot.serverID, editID: snapshot.editID, text: snapshot.text,
            deleted: snapshot.deleted, baseVersion: snapshot.baseVersion, baseText: snapshot.baseText,
            editedAt: snapshot.editedAt.map { WireTime.format(unixMilliseconds: $0) }, tags: state?.tags, pinned: state?.pinned,
            archived: state?.archived, baseTags: base?.tags, basePinned: base?.pinned, baseArchived: base?.archived,
            attachments: sendsAttachments ? state?.attachments : nil, baseAttachments: sendsAttachments ? base?.attachments : nil)
    }

    /// Whether the change carries attachments: the note or its base has some.
    private var sendsAttachments: Bool {
        !(snapshot.tagsAndFlags?.attachments.isEmpty ?? true) || !(snapshot.baseTagsAndFlags?.attachments.isEmpty ?? true)
    }
}

/// Decides what a push round sends: which notes are queued and snapshotted, in which order, in which batches, and
/// which changes are refused locally because the server could never take them. Pure: a function of values.
///
/// Once per sync, before its first round, a note refused for a reason every sync tries again (the account's quota)
/// loses its refusal and is pending again (``retriesAtEverySync(_:)``).
///
/// A round, in the sync engine:
/// 1. Queueing (``prepare(_:)``): a clean live note without a server ID is queued again (``requeues(_:)``); a
///    dirty tombstone never synced anywhere is marked clean (``settles(_:)``); every pending note (dirty, not
///    refused: ``isPending(_:)``) without a snapshot gets one (``needsSnapshot(_:)``). The store runs each rule as
///    one set-based statement over every note on show, its condition named after the rule (`NoteFilter`); its
///    tests check the statements against these predicates.
/// 2. Snapshots (``snapshots(of:editIDs:)``): the notes to snapshot in ascending local ID order, with one new edit
///    ID each, minted together in one call, so the IDs increase with the local ID.
/// 3. Order (``pushOrder(_:)``): the whole outbox (older snapshots included), conflict copies first, then oldest
///    edit first.
/// 4. Sending (``plan(_:limits:)``): each change encoded once; refused locally when its text is over
///    `maxNoteBytes` or it alone does not fit in `maxBodyBytes`; the rest split into batches in order
///    (``batches(_:limits:)``). A batch the server answers 413 is halved, or refused when it is a single change
///    (``whenTooLarge(_:serverError:)``).
enum OutboxPlanner {
    // MARK: - Queueing

    /// What the queueing rules read of a local note.
    struct NoteState: Sendable, Equatable, Hashable {
        var isDirty: Bool
        var isDeleted: Bool
        var hasBaseText: Bool
        var hasServerID: Bool
        /// An outbox snapshot of the note waits for its answer.
        var hasSnapshot: Bool
        /// The server refused the note's last push (it is not pushed again until edited; refused for the quota, until
        /// the next sync).
        var hasPushError: Bool
    }

    /// A clean live note without a server ID is queued again: a sign-in left it for its pull to find, and the
    /// account did not return it (its pull was interrupted, or the server lost it), so it is pushed by (client
    /// ID, origin) and the server reconciles or creates it.
    static func requeues(_ note: NoteState) -> Bool {
        !note.hasServerID && !note.isDirty && !note.isDeleted
    }

    /// A dirty tombstone never synced anywhere (no base text, no server ID, no snapshot in flight) has nothing to
    /// tell a server: it is marked clean instead of pushed.
    static func settles(_ note: NoteState) -> Bool {
        note.isDirty && note.isDeleted && !note.hasBaseText && !note.hasServerID && !note.hasSnapshot
    }

    /// A note is pending (waits to be pushed) when it is dirty and its last push was not refused; a refused note
    /// waits for an edit, or, refused for the quota, for the next sync (``retriesAtEverySync(_:)``).
    static func isPending(_ note: NoteState) -> Bool {
        note.isDirty && !note.hasPushError
    }

    /// A pending note gets a snapshot (and a new edit ID) unless it has one in flight.
    static func needsSnapshot(_ note: NoteState) -> Bool {
        isPending(note) && !note.hasSnapshot
    }

    /// The three queueing rules in the order a round applies them: the note's dirty flag afterwards, and whether
    /// it gets a new snapshot.
    static func prepare(_ note: NoteState) -> (isDirty: Bool, needsSnapshot: Bool) {
        var note = note
        if requeues(note) { note.isDirty = true }
        if settles(note) { note.isDirty = false }
        return (note.isDirty, needsSnapshot(note))
    }

    /// The refusals every sync tries again: the account's quota (space may have been freed since, here or on
    /// another device, or the limit raised), and a chunk the account does not have (`unknown_chunk`: the sync
    /// uploads what this device's cache holds first, ``ChunkPlanner``). Any other refusal waits for an edit.
    static let retriedAtEverySync: [APIErrorCode] = [.quotaExceeded, ChunkPlanner.unknownChunk]

    /// Whether a note refused with `code` is tried again at the next sync without an edit: its refusal is cleared
    /// at the start of the sync; refused again, the note keeps the new refusal until the sync after.
    static func retriesAtEverySync(_ code: String) -> Bool {
        retriedAtEverySync.contains { $0.rawValue == code }
    }

    // MARK: - Snapshots

    /// A note that ``needsSnapshot(_:)``, as read to snapshot it.
    struct DirtyNote: Sendable, Equatable {
        var id: Int64
        var text: String
        var isDeleted: Bool
        var serverVersion: Int64?
        var baseText: String?
        var serverID: FlakeID?
        var revision: Int64
        /// The note's edit time (its `updatedAt`).
        var updatedAt: Int64 = 0
        /// Its tags and flags, and what was last synced of them.
        var tagsAndFlags = TagsAndFlags()
        var baseTagsAndFlags = TagsAndFlags()
    }

    /// An outbox row: a note's change as it was when snapshotted, sent (with the note's identity, ``OutboxEntry``)
    /// until the server answers it.
    struct Snapshot: Sendable, Equatable {
        var noteID: Int64
        var editID: FlakeID
        /// Empty for a delete.
        var text: String
        var deleted: Bool
        var baseVersion: Int64?
        var baseText: String?
        var serverID: FlakeID?
        /// The note's revision when the snapshot was taken: an answer settles the note only if it was not edited
        /// since.
        var revision: Int64
        /// When the snapshotted edit was made (Unix milliseconds, this device's clock), sent as the change's
        /// `editedAt`; nil for a snapshot taken before edit times were kept (the server then stores its own time).
        var editedAt: Int64?
        /// The note's tags and flags, and what was last synced of them; nil in a snapshot taken before tags existed
        /// (migration `v-tags-flags-history`), which is sent again as it was, without them.
        var tagsAndFlags: TagsAndFlags? = TagsAndFlags()
        var baseTagsAndFlags: TagsAndFlags? = TagsAndFlags()
    }

    /// The snapshots of `notes` (ascending local ID), `editIDs[i]` for `notes[i]`; `editIDs` come from one mint of
    /// `notes.count` IDs. A delete sends no text; every snapshot sends the note's tags and flags with their bases.
    static func snapshots(of notes: [DirtyNote], editIDs: [FlakeID]) -> [Snapshot] {
        precondition(notes.count == editIDs.count, "one edit ID per snapshot")
        return zip(notes, editIDs).map { note, editID in
            Snapshot(
                noteID: note.id, editID: editID, text: note.isDeleted ? "" : note.text, deleted: note.isDeleted,
                baseVersion: note.serverVersion, baseText: note.baseText, serverID: note.serverID, revision: note.revision,
                editedAt: note.updatedAt, tagsAndFlags: note.tagsAndFlags, baseTagsAndFlags: note.baseTagsAndFlags)
        }
    }

    // MARK: - Order

    /// The push order: conflict copies first, then oldest edit (smallest edit ID) first.
    ///
    /// Copies go first because a note carried into another account may have lost a line to a conflict copy (the
    /// conflict gave the note the other side's text). Pushed in this order, the account's change sequence holds
    /// the copy before the note's new text, so no pull that stops between them shows the line gone from every
    /// note.
    static func pushOrder(_ entries: [OutboxEntry]) -> [OutboxEntry] {
        entries.sorted { a, b in a.isConflict != b.isConflict ? a.isConflict : a.editID < b.editID }
    }

    // MARK: - Sending

    /// A change encoded once, ready to go in a batch.
    struct Prepared: Sendable, Equatable {
        var entry: OutboxEntry
        /// The change's JSON, as it goes between the commas of the push body.
        var json: Data
    }

    /// What a round sends and what it refuses without asking the server.
    struct Plan: Sendable, Equatable {
        /// Requests to send, in order.
        var batches: [[Prepared]]
        /// Changes no request to this server could carry, each with the error recorded on its note.
        var refused: [Refused]
        /// How many changes the batches hold.
        var total: Int
    }

    /// A change refused with `error`.
    struct Refused: Sendable, Equatable {
        var entry: OutboxEntry
        var error: APIErrorBody
    }

    /// Encodes each change once (in push order), refuses locally what the server could never take, and splits
    /// the rest into batches.
    static func plan(_ entries: [OutboxEntry], limits: SyncLimits) -> Plan {
        var prepared: [Prepared] = []
        prepared.reserveCapacity(entries.count)
        var refused: [Refused] = []
        for entry in entries {
            if entry.text.utf8.count > limits.maxNoteBytes {
                refused.append(
                    Refused(
                        entry: entry,
                        error: APIErrorBody(
                            code: .noteTooLarge, message: "The note is larger than the server's limit of \(limits.maxNoteBytes) bytes.")))
                continue
            }
            let json = entry.change.encodedJSON()
            if json.count + pushEnvelopeBytes > limits.maxBodyBytes {
                refused.append(
                    Refused(entry: entry, error: APIErrorBody(code: .bodyTooLarge, message: "The note does not fit in one request to this server.")))
                continue
            }
            prepared.append(Prepared(entry: entry, json: json))
        }
        return Plan(batches: batches(prepared, limits: limits), refused: refused, total: prepared.count)
    }

    /// Splits encoded changes, in order, into batches of at most `maxBatchChanges` whose push bodies fit in
    /// `maxBodyBytes`. A batch closes when the next change would break either limit; a change that alone breaks
    /// `maxBodyBytes` (``plan(_:limits:)`` refuses those) gets a batch of its own.
    static func batches(_ prepared: [Prepared], limits: SyncLimits) -> [[Prepared]] {
        var batches: [[Prepared]] = []
        var current: [Prepared] = []
        var bytes = pushEnvelopeBytes
        for item in prepared {
            let size = item.json.count + (current.isEmpty ? 0 : 1)
            if !current.isEmpty && (current.count >= limits.maxBatchChanges || bytes + size > limits.maxBodyBytes) {
                batches.append(current)
                current = []
                bytes = pushEnvelopeBytes
            }
            bytes += item.json.count + (current.isEmpty ? 0 : 1)
            current.append(item)
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }

    /// What to do with a batch the server answered 413 (its limits are tighter than it said).
    enum TooLarge: Sendable, Equatable {
        /// Send the two halves instead, first one first.
        case split([Prepared], [Prepared])
        /// Refuse the lone change with this error.
        case refuse(Refused)
    }

    /// Halves a batch the server found too large, or refuses its lone change with the server's error (a generic
    /// `body_too_large` when it sent none).
    static func whenTooLarge(_ batch: [Prepared], serverError: APIErrorBody?) -> TooLarge {
        if batch.count > 1 {
            let middle = batch.count / 2
            return .split(Array(batch[..<middle]), Array(batch[middle...]))
        }
        let error = serverError ?? APIErrorBody(code: .bodyTooLarge, message: "The note is too large for this server.")
        return .refuse(Refused(entry: batch[0].entry, error: error))
    }

    // MARK: - Push body

    /// Bytes a push body adds around its changes (see ``PushRequest/envelopeBytes``).
    static let pushEnvelopeBytes = PushRequest.envelopeBytes

    /// The push request body of a batch: its changes' JSON, comma-separated, in the request's envelope.
    static func body(of batch: [Prepared]) -> Data {
        PushRequest.body(encodedChanges: batch.map(\.json))
    }
}
