import NoteMerge
import NoteSyncProtocol

extension PushPlanner {
    /// What a change makes of a note's tags and flags: each the change carries, merged three-way against its base
    /// with the note's (``TagMerge``: a change without `baseTags` has the empty set as base; ``FlagMerge``: a flag
    /// without its base wins); each it leaves out, the note's. The attachments go the same way (``AttachmentMerge``:
    /// a change without `baseAttachments` has the empty set as base), and an encrypted note's chunk references are
    /// the pushed ones (``NoteChange/chunkRefs``), the note's when the change carries none.
    struct Labels: Equatable {
        var tags: [String]
        var pinned: Bool
        var archived: Bool
        var attachments: [AttachmentManifest]
        var chunkRefs: [ContentHash]

        /// The note's own.
        init(_ note: StoredNote) {
            tags = note.tags
            pinned = note.pinned
            archived = note.archived
            attachments = note.attachments
            chunkRefs = note.chunkRefs
        }

        init(merging change: NoteChange, onto note: StoredNote) {
            tags = change.tags.map { TagMerge.merge(base: change.baseTags ?? [], ours: $0, theirs: note.tags) } ?? note.tags
            attachments =
                change.attachments.map { AttachmentMerge.merge(base: change.baseAttachments ?? [], ours: $0, theirs: note.attachments) }
                ?? note.attachments
            // A plaintext note's are its attachments' chunks (derived again when it is written, ``PushPlanner/State``).
            chunkRefs =
                change.chunkRefs.map { Set($0).sorted() }
                ?? (change.attachments == nil ? note.chunkRefs : AttachmentRules.chunks(of: attachments))
            pinned = Self.flag(change.pinned, base: change.basePinned, theirs: note.pinned)
            archived = Self.flag(change.archived, base: change.baseArchived, theirs: note.archived)
        }

        private static func flag(_ ours: Bool?, base: Bool?, theirs: Bool) -> Bool {
            guard let ours else { return theirs }
            guard let base else { return ours }
            return FlagMerge.merge(base: base, ours: ours, theirs: theirs)
        }

        func apply(to note: inout StoredNote) {
            note.tags = tags
            note.pinned = pinned
            note.archived = archived
            note.attachments = attachments
            note.chunkRefs = chunkRefs
        }

        /// Equal tags compare by their display forms in order (both sorted), so a changed spelling counts.
        static func == (a: Labels, b: Labels) -> Bool {
            a.pinned == b.pinned && a.archived == b.archived && a.tags.map { Array($0.utf8) } == b.tags.map { Array($0.utf8) }
                && a.attachments == b.attachments && a.chunkRefs == b.chunkRefs
        }
    }

    /// Whether the note's tags and flags are still those the change was based on (a base the change leaves out, as
    /// an older client does, counts as unchanged): a delete based on the note's text but on older tags or flags is
    /// the delete of a note another device changed since, and loses like one whose text changed (rule 5).
    static func labelsUnchanged(since change: NoteChange, on note: StoredNote) -> Bool {
        if change.baseVersion == note.version { return true }
        if let base = change.baseTags, Set(base.map(TagRules.key)) != Set(note.tags.map(TagRules.key)) { return false }
        if let base = change.basePinned, base != note.pinned { return false }
        if let base = change.baseArchived, base != note.archived { return false }
        if let base = change.baseAttachments, !AttachmentRules.sameSet(base, note.attachments) { return false }
        return true
    }
}
