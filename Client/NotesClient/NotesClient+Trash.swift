import Foundation

// The trash: deleted notes whose text this device keeps, and bringing one back.

extension NotesClient {
    /// How long the trash keeps a deleted note's text, in days, counted from the delete.
    public static let trashDays = 30

    /// Deleted notes whose text is kept (deleted here or on another device within ``trashDays`` days), most
    /// recently deleted first. Older entries are forgotten first.
    public func trash() throws(NotesError) -> [TrashedNote] {
        let cutoff = now - Int64(Self.trashDays) * 86_400_000
        return try store.write { tx in
            try tx.emptyTrash(deletedBefore: cutoff)
            return try tx.trash()
        }
    }

    /// Brings a deleted note back with the text the trash kept: an edit of the tombstone, which syncs like any
    /// edit (the server restores the note for every device).
    ///
    /// - Throws: `note_not_found`; `invalid_input` when the note is not deleted or the trash no longer has its text.
    @discardableResult
    public func restore(_ id: LocalNote.ID) throws(NotesError) -> LocalNote {
        let text: String = try store.read { tx in
            let note = try tx.note(id)
            guard note.isDeleted else { throw NotesError(.invalidInput, "The note is not deleted.") }
            guard let text = try tx.trashedText(ofNote: id) else {
                throw NotesError(
                    .invalidInput, "The trash no longer has this note's text (it keeps texts for \(Self.trashDays) days).")
            }
            return text
        }
        return try edit(id, text: text)
    }
}
