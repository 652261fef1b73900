import Foundation

// Tags, pinned and archived notes: each change one transaction, marking the note dirty as an edit does, so that it
// syncs and merges like one (the server merges tags three-way against the note's base, ``TagRules``).

extension NotesClient {
    /// Gives a note the tags of `adding` it does not have and takes away those of `removing` (tags compared by key,
    /// ``Tags/key(_:)``; an added tag is kept as written, a tag the note has keeps its form). Changing nothing (every
    /// added tag already there, no removed one there) writes nothing.
    ///
    /// - Throws: `note_not_found` (also for a deleted note: restore it first); `invalid_input` for an added tag
    ///   that breaks ``TagRules``, or more tags than a note may have.
    @discardableResult
    public func tag(_ id: LocalNote.ID, adding: [String], removing: [String] = []) throws(NotesError) -> LocalNote {
        let adding = try Tags.validated(adding)
        return try changeState(of: id) { state throws(NotesError) in
            state.tags = Tags.applying(adding: adding, removing: removing, to: state.tags)
            try Tags.requireCount(state.tags)
        }
    }

    /// Pins a note (listed first) or unpins it. Already so: nothing is written.
    ///
    /// - Throws: `note_not_found` (also for a deleted note).
    @discardableResult
    public func pin(_ id: LocalNote.ID, _ pinned: Bool = true) throws(NotesError) -> LocalNote {
        try changeState(of: id) { state in state.pinned = pinned }
    }

    /// Archives a note (hidden from `notes list` unless asked for; searches still find it) or brings it back.
    /// Already so: nothing is written.
    ///
    /// - Throws: `note_not_found` (also for a deleted note).
    @discardableResult
    public func archive(_ id: LocalNote.ID, _ archived: Bool = true) throws(NotesError) -> LocalNote {
        try changeState(of: id) { state in state.archived = archived }
    }

    /// Every tag of the live notes on show, with how many notes have it, in the order of their keys.
    public func tagCounts() throws(NotesError) -> [TagCount] {
        try store.read { tx in try tx.tagCounts() }
    }

    /// Changes a live note's tags or flags with `change`, in one transaction; writes only when they changed.
    private func changeState(
        of id: LocalNote.ID, _ change: (inout TagsAndFlags) throws(NotesError) -> Void
    ) throws(NotesError) -> LocalNote {
        try store.write { tx in
            let note = try tx.note(id)
            guard !note.isDeleted else {
                throw NotesError(.noteNotFound, "The note is deleted; restore it first (`notes restore`).")
            }
            var state = note.tagsAndFlags
            try change(&state)
            guard state != note.tagsAndFlags else { return note }
            try tx.replaceState(ofNote: note, with: state)
            return try tx.note(id)
        }
    }
}
