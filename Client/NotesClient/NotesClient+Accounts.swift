import Foundation
import MiniFlake
import NoteCrypto
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
    /// remembered server when several match): a new note with a new client ID and the same text, tags, flags and
    /// attachments, owned by that account, pushed as a create at its next sync (set aside until it signs in, unless it
    /// is on show). The original is untouched.
    ///
    /// Into an end-to-end encrypted account (this device holds its keys), each attachment's file is sealed for it from
    /// this device's chunk cache as `attach` would seal it there (``ChunkCache/resealed(_:for:)``), so that the copy's
    /// push uploads no chunk in the clear; one whose file the cache does not hold whole is left out of the copy
    /// (``NoteCopy/attachmentsLeftOut``).
    ///
    /// - Throws: `note_not_found` (also for a deleted note), `invalid_input` when no account of that name was
    ///   signed in to here, `data_directory` (the chunk cache cannot be written), `storage`.
    @discardableResult
    public func copy(_ id: LocalNote.ID, to username: String) throws(NotesError) -> NoteCopy {
        let canonical = CredentialRules.canonicalUsername(username) ?? username
        let now = now
        let cache = chunkCache
        // An encrypted account's copy has its attachments sealed for it, staged here, outside the transaction.
        let (source, targetKeys) = try store.read { tx in
            (try tx.note(id), try (try? Self.copyTarget(canonical, in: tx)).flatMap { target in try tx.keyRing(of: target.accountID) })
        }
        let staged = try targetKeys.map { (keys) throws(NotesError) in
            try AttachmentResealer(cache: cache, keys: keys, staging: source.isDeleted ? [] : source.attachments)
        }
        return try store.write { tx in
            let note = try tx.note(id)
            guard !note.isDeleted else { throw NotesError(.noteNotFound, "Note \(id) is deleted; restore it before copying it.") }
            let target = try Self.copyTarget(canonical, in: tx)
            var state = note.tagsAndFlags
            var leftOut: [String] = []
            if let keys = try tx.keyRing(of: target.accountID) {
                let resealer = try staged.flatMap { $0.keys.account == keys.account ? $0 : nil }
                    ?? AttachmentResealer(cache: cache, keys: keys, staging: [])
                state.attachments = try state.attachments.compactMap { manifest in
                    let sealed = try resealer(manifest)
                    if sealed == nil { leftOut.append(manifest.name) }
                    return sealed
                }
            }
            let clientID = try tx.mintClientID(with: minter, createdAt: now)
            let copyID = try tx.insertCopy(
                clientID: clientID, origin: origin, text: note.text, state: state, owner: target.accountID, now: now)
            return NoteCopy(note: try tx.noteIgnoringOwner(copyID), attachmentsLeftOut: leftOut)
        }
    }

    /// The account `username` (canonical) names for a copy: the one on the remembered server when several match.
    ///
    /// - Throws: `invalid_input` when no account of that name was signed in to on this device.
    private static func copyTarget(_ username: String, in tx: LocalStore.Transaction) throws -> AccountName {
        let candidates = try tx.knownAccounts(username: username)
        let server = try tx.settings()?.serverURL
        guard let target = candidates.first(where: { $0.serverURL == server }) ?? candidates.first else {
            throw NotesError(
                .invalidInput,
                "No account '\(username)' was signed in to on this device; sign in to it once (`notes login -u \(username)`), then copy.")
        }
        return target
    }
}

/// A copy of a note into another account (``NotesClient/copy(_:to:)``).
public struct NoteCopy: Sendable, Equatable {
    /// The new note, owned by the other account.
    public var note: LocalNote
    /// The names of the source's attachments the copy does not have: into an end-to-end encrypted account, the files
    /// this device's chunk cache does not hold whole, which it cannot encrypt for that account.
    public var attachmentsLeftOut: [String] = []
}
