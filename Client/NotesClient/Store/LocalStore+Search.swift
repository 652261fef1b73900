import GRDB
import MiniFlake
import NoteSyncProtocol

// Search (the FTS5 index `notes_search`), pages of the listing, and the trash.

extension LocalStore.Transaction {
    // MARK: - The index

    /// Indexes the text of a note just inserted. Every INSERT into `notes` calls this (``NoteInsert``): no trigger
    /// does it, so that an insert never keeps a statement journal (migration `v-kept-account-state`). Updates and
    /// deletes are still indexed by the triggers `notes_search_update` and `notes_search_delete`.
    func indexForSearch(noteID: Int64, text: StoredText) throws {
        try db.cachedStatement(sql: NoteInsert.indexText).execute(arguments: [noteID, text])
    }

    // MARK: - Search

    /// Live notes matching an FTS5 query, best first (bm25), at most `limit` (nil: all), each with its text marked
    /// up by FTS5's `highlight()`: ``SearchHit/markStart`` and ``SearchHit/markEnd`` around each matching word.
    ///
    /// - Throws: `invalid_input` when FTS5 refuses the query (it is built by ``SearchQuery``, which quotes every
    ///   word, so this should not happen).
    func search(_ query: String, limit: Int?) throws -> [SearchHit] {
        let sql = """
            SELECT \(noteColumns.split(separator: ", ").map { "n.\($0)" }.joined(separator: ", ")),
            highlight(notes_search, 0, ?, ?)
            FROM notes_search JOIN notes n ON n.id = notes_search.rowid
            WHERE notes_search MATCH ? AND NOT n.deleted AND \(NoteFilter.onShow) ORDER BY rank LIMIT ?
            """
        do {
            let rows = try Row.fetchCursor(
                db.cachedStatement(sql: sql), arguments: [SearchHit.markStart, SearchHit.markEnd, query, limit ?? -1])
            var hits: [SearchHit] = []
            while let row = try rows.next() {
                hits.append(SearchHit(note: try LocalNote(row: row), marked: row.text(at: 17)))
            }
            return hits
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            throw NotesError(.invalidInput, "The search cannot be run.", cause: error.message)
        }
    }

    /// How many live notes match an FTS5 query.
    func searchCount(_ query: String) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT COUNT(*) FROM notes_search JOIN notes n ON n.id = notes_search.rowid
                    WHERE notes_search MATCH ? AND NOT n.deleted AND \(NoteFilter.onShow)
                    """),
            arguments: [query]) ?? 0
    }

    // MARK: - Listing pages

    /// The `limit` most recently edited notes (tombstones only when `includeDeleted`), newest first, read without
    /// their full texts: from the `(updated_at, id)` index, so a page costs the same with 200,000 notes as with 20.
    func recentSummaries(limit: Int, includeDeleted: Bool) throws -> [NoteSummary] {
        let filter = includeDeleted ? "WHERE \(NoteFilter.onShow)" : "WHERE NOT deleted AND \(NoteFilter.onShow)"
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT id, client_id, origin, CASE WHEN deleted THEN NULL ELSE substr(text, 1, 400) END, deleted, dirty,
                    is_conflict, push_error, updated_at FROM notes \(filter) ORDER BY updated_at DESC, id DESC LIMIT ?
                    """),
            arguments: [limit])
        var summaries: [NoteSummary] = []
        while let row = try rows.next() {
            let head = row.textIfPresent(at: 3).map(Self.droppingCutCharacter)
            summaries.append(
                NoteSummary(
                    id: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]),
                    title: head.map(NoteSummary.title(of:)) ?? "", isDeleted: row[4], isDirty: row[5], isConflict: row[6],
                    pushErrorCode: row[7], updatedAt: row[8]))
        }
        return summaries
    }

    /// Live notes (and tombstones when `includeDeleted`).
    func noteCount(includeDeleted: Bool) throws -> Int {
        try Int.fetchOne(db, sql: includeDeleted ? "SELECT COUNT(*) FROM notes WHERE \(NoteFilter.onShow)" : "SELECT COUNT(*) FROM notes WHERE NOT deleted AND \(NoteFilter.onShow)") ?? 0
    }

    // MARK: - Trash

    /// Deleted notes whose text the trash keeps, most recently deleted first.
    func trash() throws -> [TrashedNote] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT \(noteColumns.split(separator: ", ").map { "n.\($0)" }.joined(separator: ", ")), t.text, t.deleted_at
                    FROM trash t JOIN notes n ON n.id = t.note_id WHERE n.deleted AND \(NoteFilter.onShow) ORDER BY t.deleted_at DESC, n.id DESC
                    """))
        var notes: [TrashedNote] = []
        while let row = try rows.next() {
            notes.append(TrashedNote(note: try LocalNote(row: row), text: row.text(at: 17), deletedAt: row[18]))
        }
        return notes
    }

    /// The text the trash keeps for a note, if any.
    func trashedText(ofNote id: Int64) throws -> String? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT text FROM trash WHERE note_id = ?"), arguments: [id]).map { $0.text(at: 0) }
    }

    /// Forgets trashed texts deleted before `cutoff` (Unix milliseconds).
    func emptyTrash(deletedBefore cutoff: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM trash WHERE deleted_at < ?").execute(arguments: [cutoff])
    }
}
