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

    /// What a sign-in to `username` on `server` with `wipe` would delete: the notes on show of another account,
    /// with how many hold changes no server has. Nil when there are none, or when the account on show is the one
    /// signing in (the same account again wipes nothing). Accounts are matched by username and server: the account
    /// ID is known only once the server has answered.
    ///
    /// - Throws: `invalid_input` for a username or server that cannot be signed in to, `storage`.
    public func wipePreview(server: String, username: String) throws(NotesError) -> WipePreview? {
        let (_, serverText) = try Self.parseServer(server)
        let canonical = CredentialRules.canonicalUsername(username) ?? username
        return try store.read { tx in
            guard let id = try tx.shownAccountID() else { return nil }
            let account = try tx.knownAccount(id)
            if account.username == canonical && account.serverURL == serverText { return nil }
            let preview = WipePreview(
                account: account, notes: try tx.liveCount(ownedBy: id, aside: false), unsynced: try tx.unsyncedCount(ownedBy: id))
            return preview.notes > 0 || preview.unsynced > 0 ? preview : nil
        }
    }

    /// Copies a note on show into another account signed in to on this device before (`username`, on the
    /// remembered server when several match): a new note with a new client ID and the same text, tags and flags, owned by that
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
            let copyID = try tx.insertCopy(
                clientID: clientID, origin: origin, text: note.text, state: note.tagsAndFlags, owner: target.accountID, now: now)
            return try tx.noteIgnoringOwner(copyID)
        }
    }
}
