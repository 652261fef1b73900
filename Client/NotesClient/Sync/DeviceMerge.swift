import MiniFlake
import NoteMerge
import NoteSyncProtocol

/// The merge an encrypted account's device makes itself: the server cannot read the notes, so it answers a change
/// whose base is not the note's current version `stale`, and the device merges when the pull brings that version.
///
/// The pull, finding a note with changes waiting whose server version is not the record's (and no push in flight),
/// reads the note (``init(local:)``), lets the note take the record as a clean note would, then
/// (``apply(theirs:in:minter:origin:now:)``) writes the merge back as a local edit based on that version, which the next
/// push round sends. The one merge implementation is NoteMerge's, the server's for plaintext accounts:
/// - this device deleted the note: the other version wins (an edit wins over a delete), with the tags, flags and
///   attachments this device changed before deleting merged onto it as below (a local edit when they differ from the
///   other version's, else nothing to push); both deleted: nothing to push;
/// - the other version deletes it: this device's text and state come back (an edit wins over a delete);
/// - texts three-way from the note's base (ThreeWayMerge), tags (TagMerge), flags (FlagMerge) and attachments
///   (AttachmentMerge: by name; two different files under one name keep both, this device's renamed `photo (2).png`)
///   each;
/// - texts that do not merge: the note keeps the other version's text with the merged tags, flags and attachments (a
///   local edit when they differ from the other version's), and this device's text, tags, flags and attachments
///   become a new note of this device (the conflict copy), pushed like any: what the server does for a plaintext account.
struct DeviceMerge: Sendable {
    /// What a merge did.
    enum Outcome: Sendable, Equatable {
        /// The merge is a local edit waiting to be pushed.
        case merged
        /// The note took the other version; this device's text is a new note.
        case conflict
        /// The note is the other version, nothing to push (this device's change was a delete that changed no tag or
        /// flag, or already in it).
        case tookTheirs
    }

    /// The local note as it was before the pull, read whole.
    struct Note: PullLocalNote, Sendable {
        var id: Int64
        var isDirty: Bool
        var serverID: Int64?
        var text: String
        var isDeleted: Bool
        var updatedAt: Int64
        var serverVersion: Int64?
        var baseText: String?
        var isConflict: Bool
        var conflictOf: Int64?
        var pushError: String?
        var tagsAndFlags: TagsAndFlags
        var baseTagsAndFlags: TagsAndFlags
    }

    let ours: Note

    var noteID: Int64 { ours.id }

    init(local: some PullLocalNote) {
        ours = Note(
            id: local.id, isDirty: local.isDirty, serverID: local.serverID, text: local.text, isDeleted: local.isDeleted,
            updatedAt: local.updatedAt, serverVersion: local.serverVersion, baseText: local.baseText, isConflict: local.isConflict,
            conflictOf: local.conflictOf, pushError: local.pushError, tagsAndFlags: local.tagsAndFlags,
            baseTagsAndFlags: local.baseTagsAndFlags)
    }

    /// The note as the pull planner sees it when it takes the other version: the same, but clean.
    var asClean: Note {
        var clean = ours
        clean.isDirty = false
        return clean
    }

    /// Writes the merge of this device's note with `theirs` (an opened record the note has just taken).
    func apply(
        theirs record: NoteRecord, in tx: LocalStore.Transaction, minter: IDMinter, origin: FlakeID, now: Int64
    ) throws -> Outcome {
        if ours.isDeleted && record.deleted {
            try tx.markClean(noteID: ours.id)
            return .tookTheirs
        }
        let base = ours.baseTagsAndFlags
        let mine = ours.tagsAndFlags
        // The record was opened: its attachments are its envelope's (NotePayload), with their files' keys.
        let theirsState = TagsAndFlags(
            tags: Tags.canonical(record.tags ?? []), pinned: record.pinned ?? false, archived: record.archived ?? false,
            attachments: StoredAttachments.canonical(record.attachments ?? mine.attachments))
        let state = TagsAndFlags(
            tags: Tags.canonical(TagMerge.merge(base: base.tags, ours: mine.tags, theirs: theirsState.tags)),
            pinned: FlagMerge.merge(base: base.pinned, ours: mine.pinned, theirs: theirsState.pinned),
            archived: FlagMerge.merge(base: base.archived, ours: mine.archived, theirs: theirsState.archived),
            attachments: StoredAttachments.canonical(
                AttachmentMerge.merge(base: base.attachments, ours: mine.attachments, theirs: theirsState.attachments)))
        let text: String
        if record.deleted {
            text = ours.text
        } else if ours.isDeleted {
            // An edit wins over this device's delete: the note comes back as the other version, with the tags and flags
            // this device changed before deleting merged onto it, as the server's `kept` delete does for a plaintext
            // account (a tag it took off stays off: notes-sim's seed 5232).
            text = record.text
        } else {
            switch ThreeWayMerge.merge(base: ours.baseText ?? "", ours: ours.text, theirs: record.text) {
            case .clean(let merged):
                text = merged
            case .conflict:
                let clientID = try tx.mintClientID(with: minter, createdAt: now)
                try tx.insertNote(clientID: clientID, origin: origin, text: ours.text, createdAt: now, editedAt: ours.updatedAt, state: mine)
                // As the server's conflict for a plaintext account: the note keeps the other text and takes the merged
                // tags and flags, so a tag this device added is not lost from it (notes-sim's no-lost-tag-change).
                if state == theirsState {
                    try tx.markClean(noteID: ours.id)
                } else {
                    try tx.replaceContent(ofNote: try tx.note(ours.id), with: record.text, state: state, now: now)
                }
                return .conflict
            }
        }
        if !record.deleted && text == record.text && state == theirsState {
            try tx.markClean(noteID: ours.id)
            return .tookTheirs
        }
        try tx.replaceContent(ofNote: try tx.note(ours.id), with: text, state: state, now: now)
        return .merged
    }
}
