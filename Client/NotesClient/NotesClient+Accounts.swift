import Foundation
import MiniFlake
import NoteSyncProtocol

// Accounts on one device (see `OwnerPlanner`): what the CLI asks before a sign-in, and the explicit copy.

extension NotesClient {
    /// Live notes without an owner: written while signed out and never synced. A sign-in asks what to do with
    /// them (``UnownedNotes``).
    public func unownedNoteCount() throws(NotesError) -> Int {
        try store.read { tx in try tx.unownedCount() }
    }

    /// Live notes of other accounts (and unowned ones while signed in) kept on this device, hidden.
    public func setAsideNoteCount() throws(NotesError) -> Int {
        try store.read { tx in try tx.asideCount() }
    }

    /// The account whose notes are on show: the signed-in one, else the last one signed in to (nil: none yet).
    public func shownAccount() throws(NotesError) -> AccountName? {
        try store.read { tx in try tx.shownAccountID().map { id in try tx.knownAccount(id) } }
    }

    /// Copies a note on show into another account signed in to on this device before (`username`, on the
    /// remembered server when several match): a new note with a new client ID and the same text, owned by that
    /// account, pushed as a create at its next sync (set aside until it signs in, unless it is on show). The
    /// original is untouched.
    ///
    /// - Throws: `note_not_found` (also for a deleted note), `invalid_input` when no account of that name was
    ///   signed in to here, `storage`.
    @discardableResult
    public func copy(_ id: LocalNote.ID, to username: String) throws(NotesError) -> LocalNote {
        let canonical = CredentialRules.canonicalUsername(username) ?? username
        let now = now
        return try store.write { tx in
            let note = try tx.note(id)
            guard !note.isDeleted else { throw NotesError(.noteNotFound, "Note \(id) is deleted; restore it before copying it.") }
            let candidates = try tx.knownAccounts(username: canonical)
            let server = try tx.settings()?.serverURL
            guard let target = candidates.first(where: { $0.serverURL == server }) ?? candidates.first else {
                throw NotesError(
                    .invalidInput,
                    "No account '\(canonical)' was signed in to on this device; sign in to it once (`notes login -u \(canonical)`), then copy.")
            }
            let clientID = try tx.mintClientID(with: minter, createdAt: now)
            let copyID = try tx.insertCopy(clientID: clientID, origin: origin, text: note.text, owner: target.accountID, now: now)
            return try tx.noteIgnoringOwner(copyID)
        }
    }
}
