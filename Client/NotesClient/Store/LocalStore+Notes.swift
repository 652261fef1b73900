import GRDB
import MiniFlake
import NoteSyncProtocol

// The local commands and the reads: what `NotesClient` runs without a server.

extension LocalStore.Transaction {
    // MARK: - Local commands

    /// Inserts a new dirty note (revision 1, never synced) created and edited at `now`, and returns it.
    func insertNote(clientID: FlakeID, origin: FlakeID, text: String, now: Int64, state: TagsAndFlags = TagsAndFlags()) throws -> LocalNote {
        try insertNote(clientID: clientID, origin: origin, text: text, createdAt: now, editedAt: now, state: state)
    }

    /// Inserts a new dirty note (revision 1, never synced), and returns it: a note written here, or one from an
    /// export with its own identity and times (a sign-in or push finds it on the server by client ID and origin).
    /// Its owner is `owner`, else the signed-in account (none while signed out); its text is indexed for search and
    /// its tags (`state`, in canonical order) for `list --tag`.
    @discardableResult
    func insertNote(
        clientID: FlakeID, origin: FlakeID, text: String, createdAt: Int64, editedAt: Int64, owner: FlakeID? = nil,
        state: TagsAndFlags = TagsAndFlags()
    ) throws -> LocalNote {
        let stored = text.stored
        try db.cachedStatement(
            sql: """
                INSERT INTO notes (client_id, origin, text, deleted, base_text, revision, dirty, created_at, updated_at,
                tags, pinned, archived, attachments, owner_account_id) VALUES (?, ?, ?, 0, NULL, 1, 1, ?, ?, ?, ?, ?, ?, \(NoteInsert.owner))
                """
        ).execute(arguments: [
            clientID.rawValue, origin.rawValue, stored, createdAt, editedAt, StoredTags.text(state.tags), state.pinned, state.archived,
            StoredAttachments.text(state.attachments), owner?.rawValue,
        ])
        let id = db.lastInsertedRowID
        try indexForSearch(noteID: id, text: stored)
        try indexTags(ofNote: id, state.tags)
        var note = LocalNote(
            id: id, clientID: clientID, origin: origin, serverID: nil, serverVersion: nil,
            text: text, isDeleted: false, baseText: nil, revision: 1, isDirty: true, isConflict: false,
            conflictOf: nil, pushError: nil, createdAt: createdAt, updatedAt: editedAt)
        note.tags = state.tags
        note.isPinned = state.pinned
        note.isArchived = state.archived
        note.attachments = StoredAttachments.canonical(state.attachments)
        return note
    }

    /// Gives a note new text, restores it when deleted, bumps its revision and marks it dirty; clears its push
    /// error (an edit is what makes a refused note pushable again).
    func replaceText(ofNote id: LocalNote.ID, with text: String, now: Int64) throws {
        let wasDeleted = try Bool.fetchOne(db.cachedStatement(sql: "SELECT deleted FROM notes WHERE id = ?"), arguments: [id]) ?? false
        try db.cachedStatement(
            sql: """
                UPDATE notes SET text = ?, deleted = 0, revision = revision + 1, dirty = 1, push_error = NULL,
                push_error_message = NULL, updated_at = ? WHERE id = ?
                """
        ).execute(arguments: [text.stored, now, id])
        if wasDeleted {
            let tags = try String.fetchOne(db.cachedStatement(sql: "SELECT tags FROM notes WHERE id = ?"), arguments: [id])
            try indexTags(ofNote: id, StoredTags.names(tags))
        }
    }

    /// Gives a note new content (text, tags and flags: a version restored from its history), brings it back when
    /// deleted, bumps its revision and marks it dirty, as an edit does. Only what differs is written.
    func replaceContent(ofNote note: LocalNote, with text: String, state: TagsAndFlags, now: Int64) throws {
        try db.execute(
            sql: """
                UPDATE notes SET text = ?, deleted = 0, tags = ?, pinned = ?, archived = ?, attachments = ?, revision = revision + 1,
                dirty = 1, push_error = NULL, push_error_message = NULL, updated_at = ? WHERE id = ?
                """,
            arguments: [
                text.stored, StoredTags.text(state.tags), state.pinned, state.archived, StoredAttachments.text(state.attachments), now,
                note.id,
            ])
        if note.isDeleted || note.tags != state.tags { try reindexTags(ofNote: note.id, state.tags, live: true) }
    }

    /// Gives a note other tags, flags or attachments (`state`), bumps its revision and marks it dirty, as an edit
    /// does; clears its push error. The text stays; the edit time is `now` when given (attachments are the note's
    /// content), else it stays (tags and flags are not).
    func replaceState(ofNote note: LocalNote, with state: TagsAndFlags, now: Int64? = nil) throws {
        try db.cachedStatement(
            sql: """
                UPDATE notes SET tags = ?, pinned = ?, archived = ?, attachments = ?, revision = revision + 1, dirty = 1,
                push_error = NULL, push_error_message = NULL, updated_at = COALESCE(?, updated_at) WHERE id = ?
                """
        ).execute(arguments: [
            StoredTags.text(state.tags), state.pinned, state.archived, StoredAttachments.text(state.attachments), now, note.id,
        ])
        if note.tags != state.tags { try reindexTags(ofNote: note.id, state.tags, live: !note.isDeleted) }
    }

    /// Makes a note a tombstone and bumps its revision; `syncs` says whether the delete is to be pushed (it is
    /// dirty) or stays local. Clears its push error.
    func markDeleted(_ id: LocalNote.ID, syncs: Bool, now: Int64) throws {
        try db.cachedStatement(
            sql: """
                UPDATE notes SET deleted = 1, revision = revision + 1, dirty = ?, push_error = NULL,
                push_error_message = NULL, updated_at = ? WHERE id = ?
                """
        ).execute(arguments: [syncs, now, id])
        try unindexTags(ofNote: id)
    }

    /// Whether a note with this identity is here (tombstones included).
    func hasNote(clientID: FlakeID, origin: FlakeID) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM notes WHERE client_id = ? AND origin = ? AND \(NoteFilter.onShow))"),
            arguments: [clientID.rawValue, origin.rawValue]) ?? false
    }

    /// Every live note's text without trailing newlines (what tells an imported plain text is already here).
    func liveTextKeys() throws -> [String] {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT text FROM notes WHERE NOT deleted AND \(NoteFilter.onShow)"))
        var keys: [String] = []
        while let row = try rows.next() { keys.append(NotesClient.importKey(row.text(at: 0))) }
        return keys
    }

    /// Makes the stored flake high-water mark at least `id`, so the generator never mints it again.
    func raiseHighWaterMark(to id: FlakeID) throws {
        try db.cachedStatement(
            sql: "UPDATE settings SET flake_high_water = ? WHERE id = 1 AND (flake_high_water IS NULL OR flake_high_water < ?)"
        ).execute(arguments: [id.rawValue, id.rawValue])
    }

    /// Whether a push snapshot of the note is waiting for its answer.
    func hasSnapshot(noteID: LocalNote.ID) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM outbox WHERE note_id = ?)"), arguments: [noteID])
            ?? false
    }

    // MARK: - Reads

    /// One note by its local ID.
    ///
    /// - Throws: `note_not_found`.
    func note(_ id: LocalNote.ID) throws -> LocalNote {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT \(noteColumns) FROM notes WHERE id = ? AND \(NoteFilter.onShow)"), arguments: [id]) else {
            throw NotesError(.noteNotFound, "No note has local ID \(id).")
        }
        return try LocalNote(row: row)
    }

    /// The note on show that has `serverID`, if any.
    func note(serverID: FlakeID) throws -> LocalNote? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(noteColumns) FROM notes WHERE \(NoteFilter.onShowWithServerID)"), arguments: [serverID.rawValue])
            .map(LocalNote.init(row:))
    }

    /// Every note, newest change first (archived ones too); tombstones only when `includeDeleted`.
    func notes(includeDeleted: Bool) throws -> [LocalNote] {
        let filter = includeDeleted ? "WHERE \(NoteFilter.onShow)" : "WHERE NOT deleted AND \(NoteFilter.onShow)"
        return try fetchNotes(sql: "SELECT \(noteColumns) FROM notes \(filter) ORDER BY updated_at DESC, id DESC")
    }

    /// Every note including tombstones, in local ID order.
    func allNotes() throws -> [LocalNote] {
        try fetchNotes(sql: "SELECT \(noteColumns) FROM notes WHERE \(NoteFilter.onShow) ORDER BY id")
    }

    /// Live conflict copies, newest change first.
    func conflicts() throws -> [LocalNote] {
        try fetchNotes(sql: "SELECT \(noteColumns) FROM notes WHERE is_conflict AND NOT deleted AND \(NoteFilter.onShow) ORDER BY updated_at DESC, id DESC")
    }

    /// Up to 64 notes whose client ID is in `range`, by client ID then origin.
    func notes(clientIDsIn range: ClosedRange<Int64>) throws -> [LocalNote] {
        try fetchNotes(
            sql: "SELECT \(noteColumns) FROM notes WHERE client_id BETWEEN ? AND ? AND \(NoteFilter.onShow) ORDER BY client_id, origin LIMIT 64",
            arguments: [range.lowerBound, range.upperBound])
    }

    private func fetchNotes(sql: String, arguments: StatementArguments = StatementArguments()) throws -> [LocalNote] {
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        var notes: [LocalNote] = []
        while let row = try rows.next() { notes.append(try LocalNote(row: row)) }
        return notes
    }

    /// Every note's identity (tombstones included, in local ID order), the signed-in account and the pull cursor.
    func identities() throws -> NoteIdentities {
        let settings = try Settings.fetch(db)
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT id, client_id, origin, server_id, deleted, owner_account_id, aside FROM notes ORDER BY id"))
        var notes: [NoteIdentity] = []
        while let row = try rows.next() {
            notes.append(
                NoteIdentity(
                    id: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]),
                    serverID: try FlakeID(storedIfPresent: row[3]), isDeleted: row[4],
                    owner: try FlakeID(storedIfPresent: row[5]), isSetAside: row[6]))
        }
        return NoteIdentities(notes: notes, account: settings?.account, cursor: settings?.cursor)
    }

    /// Every note's key for ``ShortID/assign(_:)``, sorted by client ID.
    func displayKeys() throws -> [(id: Int64, clientID: FlakeID, origin: FlakeID)] {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT id, client_id, origin FROM notes WHERE \(NoteFilter.onShow) ORDER BY client_id"))
        var keys: [(id: Int64, clientID: FlakeID, origin: FlakeID)] = []
        while let row = try rows.next() {
            keys.append((id: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2])))
        }
        return keys
    }

    /// What ``ShortID`` needs to show one client ID: the nearest other client IDs below and above it, and how
    /// many local notes have it.
    func neighbours(ofClientID clientID: FlakeID) throws -> (before: FlakeID?, after: FlakeID?, twins: Int) {
        let raw = clientID.rawValue
        let before = try Int64.fetchOne(
            db, sql: "SELECT client_id FROM notes WHERE client_id < ? AND \(NoteFilter.onShow) ORDER BY client_id DESC LIMIT 1", arguments: [raw])
        let after = try Int64.fetchOne(
            db, sql: "SELECT client_id FROM notes WHERE client_id > ? AND \(NoteFilter.onShow) ORDER BY client_id LIMIT 1", arguments: [raw])
        let twins = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE client_id = ? AND \(NoteFilter.onShow)"), arguments: [raw]) ?? 1
        return (try FlakeID(storedIfPresent: before), try FlakeID(storedIfPresent: after), twins)
    }

    /// The local state in brief.
    ///
    /// - Throws: `storage` when the settings row is missing.
    func status() throws -> NotesStatus {
        let settings = try requireSettings()
        let counts = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT COALESCE(SUM(NOT deleted), 0), COALESCE(SUM(deleted), 0), COALESCE(SUM(dirty), 0),
                    COALESCE(SUM(\(NoteFilter.isRefused)), 0), COALESCE(SUM(is_conflict AND NOT deleted), 0),
                    COALESCE(SUM(push_error = '\(APIErrorCode.quotaExceeded.rawValue)'), 0) FROM notes WHERE \(NoteFilter.onShow)
                    """))!
        let inFlight = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox")) ?? 0
        let clientIDMark = try Int64.fetchOne(db.cachedStatement(sql: "SELECT client_id_high_water FROM settings WHERE id = 1"))
        var status = NotesStatus(
            origin: settings.origin, flakeInstance: settings.flakeInstance, highWaterMark: settings.highWaterMark,
            clientIDHighWaterMark: try FlakeID(storedIfPresent: clientIDMark),
            serverURL: settings.serverURL, account: settings.account, cursor: settings.cursor,
            lastSyncAt: settings.lastSyncAt, notes: counts[0], deletedNotes: counts[1], pending: counts[2],
            failed: counts[3], overQuota: counts[5], conflicts: counts[4], inFlight: inFlight, pullUnfinished: settings.pullUnfinished,
            maxNoteBytes: settings.maxNoteBytes)
        status.encrypted = try settings.account.map { account in try keyRing(of: account.accountID) != nil } ?? false
        return status
    }
}
