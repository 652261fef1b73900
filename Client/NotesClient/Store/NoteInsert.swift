/// What every INSERT into `notes` does for itself, spelled once: since migration `v-kept-account-state` no trigger
/// fires on an insert (a statement that fires one keeps a statement journal, a copy of every page it touches that its
/// transaction had changed before: most of what a first sign-in wrote). The two inserts (``LocalStore/Transaction``'s
/// `insertNote`, a note written here or imported, and `SyncedNoteInsert`, a note a sync brings) each name the owner
/// with ``owner`` and index the text with ``indexText``; `StoreRuleTests` checks both.
enum NoteInsert {
    /// The value of `owner_account_id`, taking one argument: that owner when not NULL (a copy to an account), else the
    /// signed-in account (none while signed out): a note written or pulled while signed in belongs to that account.
    static let owner = "COALESCE(?, (SELECT account_id FROM settings WHERE id = 1))"

    /// Indexes an inserted note's text for search (arguments: its local ID and its stored text).
    static let indexText = "INSERT INTO notes_search (rowid, text) VALUES (?, ?)"
}
