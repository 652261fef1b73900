import GRDB
import MiniFlake
import NoteSyncProtocol

// Owners and the notes on show (see `OwnerPlanner`): every other query reads only the notes on show
// (`NoteFilter.onShow`).

extension LocalStore.Transaction {
    /// The account whose notes are on show: the signed-in one, else the last one signed in to (nil: none yet).
    func shownAccountID() throws -> FlakeID? {
        try FlakeID(storedIfPresent: Int64.fetchOne(db.cachedStatement(sql: "SELECT last_account_id FROM settings WHERE id = 1")))
    }

    /// An account signed in to on this device, by ID.
    func knownAccount(_ id: FlakeID) throws -> AccountName {
        let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT username, server_url FROM known_accounts WHERE account_id = ?"), arguments: [id.rawValue])
        return AccountName(accountID: id, username: row?[0], serverURL: row?[1])
    }

    /// The accounts signed in to on this device with this username (on any server).
    func knownAccounts(username: String) throws -> [AccountName] {
        let rows = try Row.fetchAll(
            db.cachedStatement(sql: "SELECT account_id, username, server_url FROM known_accounts WHERE username = ? ORDER BY account_id"),
            arguments: [username])
        return try rows.map { AccountName(accountID: try FlakeID(stored: $0[0]), username: $0[1], serverURL: $0[2]) }
    }

    /// Remembers an account signed in to (for messages and copies), and makes it the one on show.
    func rememberAccount(_ account: AccountInfo) throws {
        try db.execute(
            sql: """
                INSERT INTO known_accounts (account_id, username, server_url) VALUES (?, ?, ?)
                ON CONFLICT (account_id) DO UPDATE SET username = excluded.username, server_url = excluded.server_url;
                UPDATE settings SET last_account_id = ? WHERE id = 1;
                """,
            arguments: [account.accountID.rawValue, account.username, account.serverURL, account.accountID.rawValue])
    }

    /// Live notes without an owner (on show or set aside).
    func unownedCount() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE owner_account_id IS NULL AND NOT deleted")) ?? 0
    }

    /// Live notes owned by `account`.
    func liveCount(ownedBy account: FlakeID, aside: Bool? = nil) throws -> Int {
        let filter = aside.map { $0 ? " AND \(NoteFilter.setAside)" : " AND \(NoteFilter.onShow)" } ?? ""
        return try Int.fetchOne(
            db, sql: "SELECT COUNT(*) FROM notes WHERE owner_account_id = ? AND NOT deleted\(filter)", arguments: [account.rawValue]) ?? 0
    }

    /// Notes on show owned by `account` with changes no server has (a wipe loses them).
    func unsyncedCount(ownedBy account: FlakeID) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT COUNT(*) FROM notes WHERE owner_account_id = ? AND dirty AND \(NoteFilter.onShow)", arguments: [account.rawValue])
            ?? 0
    }

    /// Live notes set aside: those of other accounts, and the unowned ones while an account is signed in.
    func asideCount() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE \(NoteFilter.setAside) AND NOT deleted")) ?? 0
    }

    /// Executes a sign-in's ``OwnerPlanner/Plan`` and reports it (live notes counted).
    func applyOwners(_ plan: OwnerPlanner.Plan) throws -> OwnerReport {
        var report = OwnerReport()
        if let previous = plan.setAside ?? plan.wipe { report.previous = try knownAccount(previous) }
        if let previous = plan.setAside {
            report.setAside = try liveCount(ownedBy: previous, aside: false)
            try db.execute(
                sql: "UPDATE notes SET aside = 1 WHERE owner_account_id = ? AND \(NoteFilter.onShow)", arguments: [previous.rawValue])
        }
        if let previous = plan.wipe {
            report.wiped = try liveCount(ownedBy: previous)
            try forgetKeptCursor(of: previous)
            try db.execute(sql: "DELETE FROM notes WHERE owner_account_id = ?", arguments: [previous.rawValue])
            try recountTags()
        }
        report.restored = try liveCount(ownedBy: plan.restore, aside: true)
        try db.execute(
            sql: "UPDATE notes SET aside = 0 WHERE owner_account_id = ? AND \(NoteFilter.setAside)", arguments: [plan.restore.rawValue])
        let unowned = try unownedCount()
        switch plan.unowned {
        case .carry:
            report.carried = unowned
            try db.execute(
                sql: "UPDATE notes SET owner_account_id = ?, aside = 0 WHERE owner_account_id IS NULL", arguments: [plan.restore.rawValue])
        case .keepAside:
            report.keptAside = unowned
            try db.execute(sql: "UPDATE notes SET aside = 1 WHERE owner_account_id IS NULL AND \(NoteFilter.onShow)")
        }
        return report
    }

    /// After the account was deleted on its server: its notes become notes of no account, as if written while
    /// signed out and never synced (no server ID, no base text, no snapshot in flight; live ones dirty), on show; the
    /// account is forgotten (with its keys, for an encrypted one). Returns how many live notes were kept.
    ///
    /// A note the unowned ones already hold under the same (client ID, origin) (a note of an account deleted before,
    /// which another device carried into the account signed up again, and pulled from it here) is resolved first
    /// (``resolveKeyClashes(moving:to:minter:origin:now:)``).
    ///
    /// The attachments whose bytes this device does not hold (`onDevice` false) are left out of the kept notes and
    /// counted in `attachmentsDropped`: the server deleted the account's chunks with it, so no device could save them
    /// from here (the simulation's seed 548: a note carried into the account signed up again listed an attachment
    /// that every save refused until a push got through). A device that holds the bytes carries its copy, and the
    /// merge adds it back.
    func disownNotes(of account: FlakeID, minter: IDMinter, origin: FlakeID, now: Int64, onDevice: (AttachmentManifest) -> Bool)
        throws -> (kept: Int, rekeyed: [RekeyedNote], attachmentsDropped: Int)
    {
        let rekeyed = try resolveKeyClashes(moving: account, to: nil, minter: minter, origin: origin, now: now)
        let kept = try liveCount(ownedBy: account)
        let id = account.rawValue
        let attachmentsDropped = try replaceAttachments(ofNotesWhere: "owner_account_id = ?", arguments: [id]) { onDevice($0) ? $0 : nil }
        try db.execute(sql: "DELETE FROM outbox WHERE note_id IN (SELECT id FROM notes WHERE owner_account_id = ?)", arguments: [id])
        try db.execute(
            sql: """
                UPDATE notes SET owner_account_id = NULL, aside = 0, server_id = NULL, server_version = NULL,
                    conflict_of_server_id = NULL, base_text = NULL, base_tags = '', base_attachments = '', base_pinned = 0,
                    base_archived = 0, dirty = NOT deleted, push_error = NULL, push_error_message = NULL
                WHERE owner_account_id = ?
                """,
            arguments: [id])
        try db.execute(sql: "DELETE FROM known_accounts WHERE account_id = ?", arguments: [id])
        try db.execute(sql: "UPDATE settings SET last_account_id = NULL WHERE id = 1 AND last_account_id = ?", arguments: [id])
        try forgetKeys(of: account)  // an encrypted account's: it is gone, and its notes here are no account's now
        return (kept, rekeyed, attachmentsDropped)
    }

    /// Before a sign-in carries the notes of no account into an encrypted account: each of their attachments becomes
    /// `resealed(manifest)`, the file sealed for that account (``ChunkCache/resealed(_:for:)``), so that no push of
    /// theirs uploads a chunk in the clear; an attachment it returns nil for (the chunk cache does not hold the file
    /// whole) is left out. Written as the notes' current attachments, with no new revision: a note of no account is
    /// dirty and was never pushed (nothing of it is in the outbox or on a server). Returns how many were left out.
    func resealAttachmentsOfUnownedNotes(_ resealed: (AttachmentManifest) throws -> AttachmentManifest?) throws -> Int {
        try replaceAttachments(ofNotesWhere: "owner_account_id IS NULL", arguments: [], resealed)
    }

    /// The account note `id` belongs to (nil: none, or no such note).
    func owner(ofNote id: LocalNote.ID) throws -> FlakeID? {
        try FlakeID(storedIfPresent: Int64.fetchOne(db, sql: "SELECT owner_account_id FROM notes WHERE id = ?", arguments: [id]))
    }

    /// The attachments of the notes of no account (what a carry into an encrypted account seals).
    func attachmentsOfUnownedNotes() throws -> [AttachmentManifest] {
        try String.fetchAll(db, sql: "SELECT attachments FROM notes WHERE owner_account_id IS NULL AND attachments <> ''")
            .flatMap { StoredAttachments.manifests($0) }
    }

    /// Replaces every attachment of the notes matching `filter` (SQL over `notes`) by `transform(manifest)`, leaving
    /// out those it returns nil for; returns how many were left out.
    private func replaceAttachments(
        ofNotesWhere filter: String, arguments: StatementArguments, _ transform: (AttachmentManifest) throws -> AttachmentManifest?
    ) throws -> Int {
        var dropped = 0
        let rows = try Row.fetchAll(db, sql: "SELECT id, attachments FROM notes WHERE \(filter) AND attachments <> ''", arguments: arguments)
        for row in rows {
            let manifests = StoredAttachments.manifests(row[1])
            let kept = try manifests.compactMap(transform)
            guard kept != manifests else { continue }
            dropped += manifests.count - kept.count
            let noteID: Int64 = row[0]
            try db.execute(sql: "UPDATE notes SET attachments = ? WHERE id = ?", arguments: [StoredAttachments.text(kept), noteID])
        }
        return dropped
    }

    /// Before the notes of owner `source` move to owner `target` (nil: no owner), where `target` may already hold a
    /// note with the same (client ID, origin): after an account deletion, a note can be both a note of no account
    /// here and, carried there by another device, a note of the account signed up again. Local notes are unique by
    /// (owner, client ID, origin), and nothing may be lost: a `source` note with the same text, deleted state, tags
    /// and flags as its twin is dropped (the twin holds it); one that differs in any of them becomes a new note of this
    /// device (a fresh client ID and this origin, unsynced), as a copy would.
    @discardableResult
    func resolveKeyClashes(moving source: FlakeID?, to target: FlakeID?, minter: IDMinter, origin: FlakeID, now: Int64) throws
        -> [RekeyedNote]
    {
        var rekeyed: [RekeyedNote] = []
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT s.id, s.text IS t.text AND s.deleted = t.deleted AND s.tags IS t.tags AND s.pinned = t.pinned
                AND s.archived = t.archived AND s.attachments IS t.attachments, s.client_id, s.origin FROM notes s
                JOIN notes t ON t.client_id = s.client_id AND t.origin = s.origin AND t.id <> s.id
                WHERE s.owner_account_id IS ? AND t.owner_account_id IS ?
                """,
            arguments: [source?.rawValue, target?.rawValue])
        for row in rows {
            let id: Int64 = row[0]
            if row[1] as Bool {
                try unindexTags(ofNote: id)
                try db.execute(sql: "DELETE FROM notes WHERE id = ?", arguments: [id])
            } else {
                let clientID = try mintClientID(with: minter, createdAt: now)
                try db.execute(sql: "DELETE FROM outbox WHERE note_id = ?", arguments: [id])
                try db.execute(
                    sql: """
                        UPDATE notes SET client_id = ?, origin = ?, server_id = NULL, server_version = NULL,
                            conflict_of_server_id = NULL, base_text = NULL, base_tags = '', base_attachments = '', base_pinned = 0,
                            base_archived = 0, dirty = NOT deleted, push_error = NULL, push_error_message = NULL
                        WHERE id = ?
                        """,
                    arguments: [clientID.rawValue, origin.rawValue, id])
                rekeyed.append(
                    RekeyedNote(oldClientID: try FlakeID(stored: row[2]), oldOrigin: try FlakeID(stored: row[3]), clientID: clientID, origin: origin))
            }
        }
        return rekeyed
    }

    /// What a sign-out does to the notes on show (``OwnerPlanner/afterSignOut``): the unowned ones come back.
    func showUnownedNotes() throws {
        try db.cachedStatement(sql: "UPDATE notes SET aside = 0 WHERE owner_account_id IS NULL AND \(NoteFilter.setAside)").execute()
    }

    /// Inserts a copy of a note's text, tags and flags as a new note owned by `account` (set aside unless it is on
    /// show): dirty and never synced, so it is pushed as a create at that account's next sync.
    func insertCopy(
        clientID: FlakeID, origin: FlakeID, text: String, state: TagsAndFlags, owner account: FlakeID, now: Int64
    ) throws -> Int64 {
        let note = try insertNote(
            clientID: clientID, origin: origin, text: text, createdAt: now, editedAt: now, owner: account, state: state)
        if try shownAccountID() != account {
            try db.execute(sql: "UPDATE notes SET aside = 1 WHERE id = ?", arguments: [note.id])
        }
        return note.id
    }
}

extension LocalStore.Transaction {
    /// One note by its local ID, on show or set aside.
    func noteIgnoringOwner(_ id: LocalNote.ID) throws -> LocalNote {
        guard let row = try Row.fetchOne(db, sql: "SELECT \(noteColumns) FROM notes WHERE id = ?", arguments: [id]) else {
            throw NotesError(.noteNotFound, "No note has local ID \(id).")
        }
        return try LocalNote(row: row)
    }
}

extension LocalStore.Transaction {
    /// Every note including tombstones and set-aside ones, in local ID order.
    func allNotesOfEveryOwner() throws -> [LocalNote] {
        let rows = try Row.fetchCursor(db, sql: "SELECT \(noteColumns) FROM notes ORDER BY id")
        var notes: [LocalNote] = []
        while let row = try rows.next() { notes.append(try LocalNote(row: row)) }
        return notes
    }
}
