import GRDB
import MiniFlake
import NoteSyncProtocol

// What the sync engine (Sync/) reads and writes. The decisions are the planners'; these methods execute them.

extension LocalStore.Transaction {
    // MARK: - Outbox

    /// ``OutboxPlanner/requeues(_:)``: marks dirty every note on show the rule selects.
    func applyRequeues() throws {
        try db.cachedStatement(sql: "UPDATE notes SET dirty = 1 WHERE \(NoteFilter.requeues) AND \(NoteFilter.onShow)").execute()
    }

    /// ``OutboxPlanner/settles(_:)``: marks clean every note on show the rule selects.
    func applySettles() throws {
        try db.cachedStatement(sql: "UPDATE notes SET dirty = 0 WHERE \(NoteFilter.settles) AND \(NoteFilter.onShow)").execute()
    }

    /// ``OutboxPlanner/needsSnapshot(_:)``: every note on show the rule selects, in ascending local ID order.
    func notesNeedingSnapshot() throws -> [OutboxPlanner.DirtyNote] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT id, text, deleted, server_version, base_text, server_id, revision, updated_at, tags, pinned, archived,
                    base_tags, base_pinned, base_archived, attachments, base_attachments FROM notes
                    WHERE \(NoteFilter.needsSnapshot) AND \(NoteFilter.onShow) ORDER BY id
                    """))
        var notes: [OutboxPlanner.DirtyNote] = []
        while let row = try rows.next() {
            notes.append(
                OutboxPlanner.DirtyNote(
                    id: row[0], text: row.text(at: 1), isDeleted: row[2], serverVersion: row[3], baseText: row.textIfPresent(at: 4),
                    serverID: try FlakeID(storedIfPresent: row[5]), revision: row[6], updatedAt: row[7],
                    tagsAndFlags: TagsAndFlags(
                        tags: StoredTags.names(row[8]), pinned: row[9], archived: row[10], attachments: StoredAttachments.manifests(row[14])),
                    baseTagsAndFlags: TagsAndFlags(
                        tags: StoredTags.names(row[11]), pinned: row[12], archived: row[13],
                        attachments: StoredAttachments.manifests(row[15]))))
        }
        return notes
    }

    /// Inserts push snapshots into the outbox.
    func insertSnapshots(_ snapshots: [OutboxPlanner.Snapshot]) throws {
        guard !snapshots.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO outbox (note_id, edit_id, text, deleted, base_version, base_text, server_id, revision, edited_at,
                tags, pinned, archived, base_tags, base_pinned, base_archived, attachments, base_attachments)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for snapshot in snapshots {
            let state = snapshot.tagsAndFlags
            let base = snapshot.baseTagsAndFlags
            try insert.execute(arguments: [
                snapshot.noteID, snapshot.editID.rawValue, snapshot.text.stored, snapshot.deleted, snapshot.baseVersion,
                snapshot.baseText.stored, snapshot.serverID?.rawValue, snapshot.revision, snapshot.editedAt,
                state.map { StoredTags.text($0.tags) }, state?.pinned, state?.archived, base.map { StoredTags.text($0.tags) },
                base?.pinned, base?.archived, state.map { StoredAttachments.text($0.attachments) },
                base.map { StoredAttachments.text($0.attachments) },
            ])
        }
    }

    /// The whole outbox, with each note's identity, in no particular order (see ``OutboxPlanner/pushOrder(_:)``).
    func outbox() throws -> [OutboxEntry] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT o.note_id, o.edit_id, o.text, o.deleted, o.base_version, o.base_text, o.server_id, o.revision,
                    n.client_id, n.origin, n.is_conflict, o.edited_at, o.tags, o.pinned, o.archived, o.base_tags, o.base_pinned,
                    o.base_archived, o.attachments, o.base_attachments
                    FROM outbox o JOIN notes n ON n.id = o.note_id WHERE \(NoteFilter.onShow)
                    """))
        var entries: [OutboxEntry] = []
        while let row = try rows.next() {
            entries.append(
                OutboxEntry(
                    snapshot: OutboxPlanner.Snapshot(
                        noteID: row[0], editID: try FlakeID(stored: row[1]), text: row.text(at: 2), deleted: row[3],
                        baseVersion: row[4], baseText: row.textIfPresent(at: 5), serverID: try FlakeID(storedIfPresent: row[6]),
                        revision: row[7], editedAt: row[11], tagsAndFlags: Self.snapshotTagsAndFlags(row, from: 12, attachments: 18),
                        baseTagsAndFlags: Self.snapshotTagsAndFlags(row, from: 15, attachments: 19)),
                    clientID: try FlakeID(stored: row[8]), origin: try FlakeID(stored: row[9]), isConflict: row[10]))
        }
        return entries
    }

    /// A snapshot's tags, pinned and archived columns from `index` on, and its attachments column; nil when the
    /// snapshot was taken before tags existed (NULL). Attachments NULL (a snapshot taken before they existed) are none.
    private static func snapshotTagsAndFlags(_ row: Row, from index: Int, attachments: Int) -> TagsAndFlags? {
        guard !row.hasNull(atIndex: index) else { return nil }
        return TagsAndFlags(
            tags: StoredTags.names(row[index]), pinned: row[index + 1] ?? false, archived: row[index + 2] ?? false,
            attachments: StoredAttachments.manifests(row[attachments]))
    }

    /// Every note on show the server refused (its error kept until the note is edited, or refused for the quota,
    /// until the next sync), in local ID order.
    func refusedNotes() throws -> [PushFailure] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT id, client_id, origin, push_error, push_error_message FROM notes
                    WHERE \(NoteFilter.isRefused) AND \(NoteFilter.onShow) ORDER BY id
                    """))
        var failures: [PushFailure] = []
        while let row = try rows.next() {
            let code: String = row[3]
            failures.append(
                PushFailure(
                    noteID: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]),
                    error: PushError(code: code, message: row[4] ?? code)))
        }
        return failures
    }

    /// Remembers the server's limits (checked by local writes).
    func rememberLimits(_ limits: SyncLimits) throws {
        try db.cachedStatement(sql: "UPDATE settings SET max_note_bytes = ?, max_body_bytes = ? WHERE id = 1")
            .execute(arguments: [limits.maxNoteBytes, limits.maxBodyBytes])
    }

    /// Records whether the pull stopped with more pages waiting.
    func setPullUnfinished(_ unfinished: Bool) throws {
        try db.cachedStatement(sql: "UPDATE settings SET pull_unfinished = ? WHERE id = 1").execute(arguments: [unfinished])
    }

    /// ``OutboxPlanner/retriesAtEverySync(_:)``: clears the refusal of every note on show the rule retries (refused
    /// for the account's quota), which makes it pending again. Returns how many.
    @discardableResult
    func applyRetriesAtEverySync() throws -> Int {
        try db.cachedStatement(
            sql: "UPDATE notes SET push_error = NULL, push_error_message = NULL WHERE \(NoteFilter.retriesAtEverySync) AND \(NoteFilter.onShow)"
        ).execute()
        return db.changesCount
    }

    /// ``OutboxPlanner/isPending(_:)``: notes on show waiting to be pushed (dirty and not refused).
    func pendingCount() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE \(NoteFilter.isPending) AND \(NoteFilter.onShow)")) ?? 0
    }

    // MARK: - Push results

    /// Removes a snapshot the server refused, or that no request could carry. Returns false when it was gone
    /// already (another process applied its answer).
    func dropSnapshot(editID: FlakeID) throws -> Bool {
        try db.cachedStatement(sql: "DELETE FROM outbox WHERE edit_id = ?").execute(arguments: [editID.rawValue])
        return db.changesCount > 0
    }

    /// ``PushResultPlanner/Refusal/forgetServerID``.
    func forgetServerID(ofNote id: Int64) throws {
        try db.cachedStatement(sql: "UPDATE notes SET server_id = NULL, server_version = NULL WHERE id = ?").execute(arguments: [id])
    }

    /// ``PushResultPlanner/Refusal/forgetServerVersion``.
    func forgetServerVersion(ofNote id: Int64) throws {
        try db.cachedStatement(sql: "UPDATE notes SET server_version = NULL WHERE id = ?").execute(arguments: [id])
    }

    /// ``PushResultPlanner/Refusal/recordError(_:)``: records `error` on the note unless its revision is no longer
    /// `revision`. Returns whether it did.
    func recordPushError(_ error: APIErrorBody, onNote id: Int64, revision: Int64) throws -> Bool {
        try db.execute(
            sql: "UPDATE notes SET push_error = ?, push_error_message = ? WHERE id = ? AND revision = ?",
            arguments: [error.code.rawValue, error.message, id, revision])
        return db.changesCount > 0
    }

    /// The statements that apply one push answer, prepared once for the batch.
    func pushResultWriter() throws -> PushResultWriter {
        try PushResultWriter(tx: self)
    }

    /// Applies a push answer's results, change by change, inside one transaction.
    struct PushResultWriter {
        private let db: Database
        private let tx: LocalStore.Transaction
        private let takeSnapshot: Statement
        private let readRevision: Statement
        private let releaseServerID: Statement
        private let settle: Statement
        private let rebase: Statement
        private let readTags: Statement
        private let findCopy: Statement
        private let insertCopy: SyncedNoteInsert

        fileprivate init(tx: LocalStore.Transaction) throws {
            let db = tx.db
            self.tx = tx
            self.db = db
            takeSnapshot = try db.cachedStatement(sql: "DELETE FROM outbox WHERE edit_id = ?")
            readRevision = try db.cachedStatement(sql: "SELECT revision FROM notes WHERE id = ?")
            releaseServerID = try db.cachedStatement(
                sql: "UPDATE notes SET server_id = NULL, server_version = NULL WHERE \(NoteFilter.onShowWithServerID) AND id != ?")
            settle = try db.cachedStatement(
                sql: """
                    UPDATE notes SET server_id = COALESCE(?1, server_id), server_version = ?2, text = ?3, deleted = ?4,
                    base_text = ?5, dirty = 0, push_error = NULL, push_error_message = NULL,
                    updated_at = CASE WHEN ?6 THEN ?7 ELSE updated_at END, tags = COALESCE(?8, tags), pinned = COALESCE(?9, pinned),
                    archived = COALESCE(?10, archived), base_tags = COALESCE(?8, base_tags), base_pinned = COALESCE(?9, base_pinned),
                    base_archived = COALESCE(?10, base_archived), attachments = COALESCE(?12, attachments),
                    base_attachments = COALESCE(?12, base_attachments) WHERE id = ?11
                    """)
            rebase = try db.cachedStatement(
                sql: """
                    UPDATE notes SET server_id = ?, server_version = NULL, base_text = ?, base_tags = COALESCE(?, base_tags),
                    base_pinned = COALESCE(?, base_pinned), base_archived = COALESCE(?, base_archived),
                    base_attachments = COALESCE(?, base_attachments) WHERE id = ?
                    """)
            readTags = try db.cachedStatement(sql: "SELECT tags, deleted FROM notes WHERE id = ?")
            findCopy = try db.cachedStatement(
                sql: "SELECT 1 FROM notes WHERE (\(NoteFilter.onShowWithServerID)) OR (client_id = ? AND origin = ? AND \(NoteFilter.onShow))")
            insertCopy = try SyncedNoteInsert(tx: tx)
        }

        /// Removes the snapshot an answer is for and returns its note's revision; nil when the snapshot was gone
        /// already (another process applied this answer) or its note is.
        func takeSnapshot(of entry: OutboxEntry) throws -> Int64? {
            try takeSnapshot.execute(arguments: [entry.editID.rawValue])
            guard db.changesCount > 0 else { return nil }
            return try Int64.fetchOne(readRevision, arguments: [entry.noteID])
        }

        /// Executes an accepted result's writes on note `noteID`, in the order ``PushResultPlanner/Acceptance``
        /// lists them.
        func apply(_ acceptance: PushResultPlanner.Acceptance, toNote noteID: Int64) throws {
            if let serverID = acceptance.releaseServerID {
                try releaseServerID.execute(arguments: [serverID, noteID])
            }
            if let copy = acceptance.conflictCopy,
                try Row.fetchOne(findCopy, arguments: [copy.state.serverID, copy.clientID, copy.origin]) == nil
            {
                try insertCopy.execute(copy)
            }
            switch acceptance.update {
            case .settle(let state):
                try settle.execute(arguments: [
                    state.serverID, state.serverVersion, state.text.stored, state.deleted, state.baseText.stored, state.updatedAt != nil,
                    state.updatedAt, state.tagsAndFlags.map { StoredTags.text($0.tags) }, state.tagsAndFlags?.pinned,
                    state.tagsAndFlags?.archived, noteID, state.tagsAndFlags.map { StoredAttachments.text($0.attachments) },
                ])
                if state.reindexTags, let row = try Row.fetchOne(readTags, arguments: [noteID]) {
                    try tx.reindexTags(ofNote: noteID, StoredTags.names(row[0]), live: !(row[1] as Bool))
                }
            case .rebase(let serverID, let baseText, let base):
                try rebase.execute(arguments: [
                    serverID, baseText.stored, base.map { StoredTags.text($0.tags) }, base?.pinned, base?.archived,
                    base.map { StoredAttachments.text($0.attachments) }, noteID,
                ])
            case nil:
                break
            }
        }
    }

    // MARK: - Pull

    /// The stored pull cursor, nil before the first pull.
    func cursor() throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT cursor FROM settings WHERE id = 1"))
    }

    /// Stores the pull cursor.
    func setCursor(_ cursor: String) throws {
        try db.cachedStatement(sql: "UPDATE settings SET cursor = ? WHERE id = 1").execute(arguments: [cursor])
    }

    /// Forgets the pull cursor: the next pull starts from the beginning.
    func clearCursor() throws {
        try db.cachedStatement(sql: "UPDATE settings SET cursor = NULL WHERE id = 1").execute()
    }

    /// The statements that apply one pull page, prepared once for the page.
    func pullPageWriter() throws -> PullPageWriter {
        try PullPageWriter(tx: self)
    }

    /// Applies a pull page's records, one by one, inside one transaction.
    struct PullPageWriter {
        private let tx: LocalStore.Transaction
        private let find: Statement
        private let load: Statement
        private let take: Statement
        private let adopt: Statement
        private let insert: SyncedNoteInsert

        fileprivate init(tx: LocalStore.Transaction) throws {
            let db = tx.db
            self.tx = tx
            // The local note with the record's server ID, else the one with its (client ID, origin): one statement,
            // whose first arm is read first, so a server ID match wins. It reads the ID only: a note new here (every
            // note of a first sign-in) costs no row (GRDB names a row's columns anew for each statement run).
            find = try db.cachedStatement(
                sql: """
                    SELECT id FROM notes WHERE \(NoteFilter.onShowWithServerID)
                    UNION ALL SELECT id FROM notes WHERE client_id = ? AND origin = ? AND \(NoteFilter.onShow)
                    LIMIT 1
                    """)
            load = try db.cachedStatement(sql: "SELECT \(LookupRow.columns) FROM notes WHERE id = ?")
            take = try db.cachedStatement(
                sql: """
                    UPDATE notes SET server_id = ?, server_version = ?, text = ?, deleted = ?, base_text = ?, is_conflict = ?,
                    conflict_of_server_id = ?, push_error = NULL, push_error_message = NULL, updated_at = ?, tags = ?, pinned = ?,
                    archived = ?, base_tags = ?, base_pinned = ?, base_archived = ?, attachments = ?, base_attachments = ? WHERE id = ?
                    """)
            adopt = try db.cachedStatement(sql: "UPDATE notes SET server_id = ? WHERE id = ?")
            insert = try SyncedNoteInsert(tx: tx)
        }

        /// Looks up the local note `record` names and hands it to `decide`, read in place from the statement:
        /// valid only inside `decide`, which must run no other statement.
        func withLocalNote<T>(matching record: NoteRecord, _ decide: (LookupRow?) -> T) throws -> T {
            guard
                let id = try Int64.fetchOne(
                    find, arguments: [record.serverID.rawValue, record.clientID.rawValue, record.origin.rawValue])
            else { return decide(nil) }
            let rows = try Row.fetchCursor(load, arguments: [id])
            return decide(try rows.next().map(LookupRow.init(row:)))
        }

        /// Executes a ``PullPlanner/Action``.
        func perform(_ action: PullPlanner.Action) throws {
            switch action {
            case .insert(let new):
                try insert.execute(new)
            case .adoptServerID(let noteID, let serverID):
                try adopt.execute(arguments: [serverID, noteID])
            case .take(let noteID, let state, let updatedAt, let reindexTags):
                let current = state.tagsAndFlags
                let base = state.baseTagsAndFlags
                try take.execute(arguments: [
                    state.serverID, state.version, state.text.stored, state.deleted, state.baseText.stored, state.isConflict,
                    state.conflictOf, updatedAt, StoredTags.text(current.tags), current.pinned, current.archived,
                    StoredTags.text(base.tags), base.pinned, base.archived, StoredAttachments.text(current.attachments),
                    StoredAttachments.text(base.attachments), noteID,
                ])
                if reindexTags { try tx.reindexTags(ofNote: noteID, current.tags, live: !state.deleted) }
            case .none:
                break
            }
        }
    }

    /// The one statement that adds a note a sync brings (``NewSyncedNote``: a pulled note new here, or a push's
    /// conflict copy): clean, revision 0, owned by the signed-in account (``NoteInsert/owner``), its text indexed for
    /// search and, when it is live and has tags, its tags for `list --tag` (one more statement; none without tags).
    struct SyncedNoteInsert {
        private let db: Database
        private let tx: LocalStore.Transaction
        private let statement: Statement
        private let index: Statement

        fileprivate init(tx: LocalStore.Transaction) throws {
            let db = tx.db
            self.tx = tx
            self.db = db
            statement = try db.cachedStatement(
                sql: """
                    INSERT INTO notes (client_id, origin, server_id, server_version, text, deleted, base_text, revision, dirty,
                    is_conflict, conflict_of_server_id, created_at, updated_at, conflict_here, tags, pinned, archived, base_tags,
                    base_pinned, base_archived, attachments, base_attachments, owner_account_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(NoteInsert.owner))
                    """)
            index = try db.cachedStatement(sql: NoteInsert.indexText)
        }

        func execute(_ note: NewSyncedNote) throws {
            let state = note.state
            let text = state.text.stored
            let current = state.tagsAndFlags
            let base = state.baseTagsAndFlags
            let tags = StoredTags.text(current.tags)
            let attachments = StoredAttachments.text(current.attachments)
            try statement.execute(arguments: [
                note.clientID, note.origin, state.serverID, state.version, text, state.deleted,
                state.baseText == state.text ? text : state.baseText.stored, state.isConflict, state.conflictOf, note.createdAt,
                note.updatedAt, note.conflictHere, tags, current.pinned, current.archived,
                base.tags == current.tags ? tags : StoredTags.text(base.tags), base.pinned, base.archived, attachments,
                base.attachments == current.attachments ? attachments : StoredAttachments.text(base.attachments), nil,
            ])
            let id = db.lastInsertedRowID
            try index.execute(arguments: [id, text])
            if !state.deleted { try tx.indexTags(ofNote: id, current.tags) }
        }
    }

    /// A row of the pull lookup, read column by column as ``PullPlanner`` asks.
    struct LookupRow: PullLocalNote {
        static let columns = """
            id, dirty, server_id, text, deleted, updated_at, server_version, base_text, is_conflict, conflict_of_server_id, push_error, \
            tags, pinned, archived, base_tags, base_pinned, base_archived, attachments, base_attachments
            """
        let row: Row
        var id: Int64 { row[0] }
        var isDirty: Bool { row[1] }
        var serverID: Int64? { row[2] }
        var text: String { row.text(at: 3) }
        var isDeleted: Bool { row[4] }
        var updatedAt: Int64 { row[5] }
        var serverVersion: Int64? { row[6] }
        var baseText: String? { row.textIfPresent(at: 7) }
        var isConflict: Bool { row[8] }
        var conflictOf: Int64? { row[9] }
        var pushError: String? { row[10] }
        var tagsAndFlags: TagsAndFlags {
            TagsAndFlags(
                tags: StoredTags.names(row[11]), pinned: row[12], archived: row[13], attachments: StoredAttachments.manifests(row[17]))
        }
        var baseTagsAndFlags: TagsAndFlags {
            TagsAndFlags(
                tags: StoredTags.names(row[14]), pinned: row[15], archived: row[16], attachments: StoredAttachments.manifests(row[18]))
        }
    }

    // MARK: - Sessions and accounts

    /// Stores a new session (server, account, token); the rest of the account state is untouched.
    func storeSession(serverURL: String, accountID: FlakeID, username: String, token: String) throws {
        try db.execute(
            sql: "UPDATE settings SET server_url = ?, account_id = ?, username = ?, token = ? WHERE id = 1",
            arguments: [serverURL, accountID.rawValue, username, token])
    }

    /// Forgets the token when it is still `token` (another process may have signed in meanwhile). Returns whether
    /// it did.
    func dropToken(_ token: String) throws -> Bool {
        try db.cachedStatement(sql: "UPDATE settings SET token = NULL WHERE id = 1 AND token = ?").execute(arguments: [token])
        return db.changesCount > 0
    }

    /// Ends the session's state (token, account, cursor, last sync) and keeps every note. What the account's
    /// notes learned from it stays with them, since it belongs to their owner: server IDs and versions, base texts,
    /// snapshots in flight; and the account keeps its pull cursor (``keptCursor(of:)``), so that signing in to it
    /// again pulls only what changed meanwhile (``SignInPlanner/Plan/resumeCursor``).
    func forgetAccountState() throws {
        try db.execute(
            sql: """
                UPDATE known_accounts SET cursor = (SELECT cursor FROM settings WHERE id = 1)
                WHERE account_id = (SELECT account_id FROM settings WHERE id = 1);
                UPDATE settings SET account_id = NULL, username = NULL, token = NULL, cursor = NULL, last_sync_at = NULL,
                pull_unfinished = 0 WHERE id = 1;
                """)
    }

    /// The pull cursor `account` kept when its last session on this device ended: every change before it is in the
    /// device's notes of that account. Nil: none (never signed in here, or its notes were wiped or disowned since).
    func keptCursor(of account: FlakeID) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT cursor FROM known_accounts WHERE account_id = ?"), arguments: [account.rawValue])
    }

    /// Forgets `account`'s kept cursor: the device no longer holds every note it pulled (a wipe deleted them), so its
    /// next sign-in pulls from the start.
    func forgetKeptCursor(of account: FlakeID) throws {
        try db.cachedStatement(sql: "UPDATE known_accounts SET cursor = NULL WHERE account_id = ?").execute(arguments: [account.rawValue])
    }

    /// Every note's local ID and what ``SignInPlanner/queues(_:)`` reads of it.
    func signInQueueStates() throws -> [(id: Int64, state: SignInPlanner.NoteState)] {
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT id, dirty, deleted, base_text IS NOT NULL, server_id IS NOT NULL,
                text IS NOT base_text OR tags IS NOT base_tags OR pinned <> base_pinned OR archived <> base_archived
                OR attachments IS NOT base_attachments,
                \(NoteFilter.hasSnapshot) FROM notes WHERE \(NoteFilter.onShow)
                """)
        var states: [(id: Int64, state: SignInPlanner.NoteState)] = []
        while let row = try rows.next() {
            states.append(
                (
                    id: row[0],
                    state: SignInPlanner.NoteState(
                        isDirty: row[1], isDeleted: row[2], hasBaseText: row[3], hasServerID: row[4],
                        differsFromBase: row[5], hasSnapshot: row[6])
                ))
        }
        return states
    }

    /// Queues notes for the next push: marks them dirty and clears their push errors.
    func queueForPush(_ noteIDs: [Int64]) throws {
        guard !noteIDs.isEmpty else { return }
        let queue = try db.cachedStatement(sql: "UPDATE notes SET dirty = 1, push_error = NULL, push_error_message = NULL WHERE id = ?")
        for id in noteIDs { try queue.execute(arguments: [id]) }
    }

    /// Records when a sync completed.
    func recordSync(at now: Int64) throws {
        try db.cachedStatement(sql: "UPDATE settings SET last_sync_at = ? WHERE id = 1").execute(arguments: [now])
    }

    /// Notes on show with unsynced changes (refused ones included).
    func dirtyCount() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE dirty AND \(NoteFilter.onShow)")) ?? 0
    }

    /// Deletes the notes on show (and their snapshots) from this device, keeping the ones set aside for other
    /// accounts, and the kept cursor of the account shown; returns how many live ones there were.
    func deleteNotesOnShow() throws -> Int {
        let live = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notes WHERE \(NoteFilter.onShow) AND NOT deleted") ?? 0
        if let shown = try shownAccountID() { try forgetKeptCursor(of: shown) }
        try db.execute(sql: "DELETE FROM notes WHERE \(NoteFilter.onShow)")
        try recountTags()
        return live
    }
}

extension LocalStore.Transaction {
    /// Marks a note clean: it holds the server's version and nothing of it waits to be pushed (a device merge that
    /// took the other device's version, ``DeviceMerge``).
    func markClean(noteID: Int64) throws {
        try db.cachedStatement(sql: "UPDATE notes SET dirty = 0 WHERE id = ?").execute(arguments: [noteID])
    }
}
