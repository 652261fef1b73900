import GRDB
import MiniFlake
import NoteSyncProtocol

// Search (the FTS5 index `notes_search`) and the trash.

extension LocalStore.Transaction {
    // MARK: - The index

    /// Indexes the text of a note just inserted. Every INSERT into `notes` calls this (``NoteInsert``): no trigger
    /// does it, so that an insert never keeps a statement journal (migration `v-kept-account-state`). Updates and
    /// deletes are still indexed by the triggers `notes_search_update` and `notes_search_delete`.
    func indexForSearch(noteID: Int64, text: StoredText) throws {
        try db.cachedStatement(sql: NoteInsert.indexText).execute(arguments: [noteID, text])
    }

    // MARK: - Search

    /// Live notes matching an FTS5 query (nil: any text) that have every tag of `tagKeys`, best first (bm25; with no
    /// query, the most recently edited first), at most `limit` (nil: all), each with its text marked up by FTS5's
    /// `highlight()`: ``SearchHit/markStart`` and ``SearchHit/markEnd`` around each matching word.
    ///
    /// - Throws: `invalid_input` when FTS5 refuses the query (it is built by ``SearchQuery``, which quotes every
    ///   word, so this should not happen).
    func search(_ query: String?, tagKeys: [String], limit: Int?) throws -> [SearchHit] {
        let columns = noteColumns.split(separator: ", ").map { "n.\($0)" }.joined(separator: ", ")
        let tags = TagFilter.hasEvery(tagKeys, column: "n.id").map { " AND \($0)" } ?? ""
        let sql: String
        var arguments: StatementArguments
        if let query {
            sql = """
                SELECT \(columns), highlight(notes_search, 0, ?, ?)
                FROM notes_search JOIN notes n ON n.id = notes_search.rowid
                WHERE notes_search MATCH ? AND NOT n.deleted AND \(NoteFilter.onShow)\(tags) ORDER BY rank LIMIT ?
                """
            arguments = [SearchHit.markStart, SearchHit.markEnd, query]
        } else {
            // Tags alone: their notes read from the index `note_tags` first (see LocalStore+Listing).
            sql = """
                SELECT \(columns), n.text FROM (\(TagFilter.notesWithEvery(tagKeys) ?? "SELECT id AS note_id FROM notes"))
                tagged CROSS JOIN notes n ON n.id = tagged.note_id WHERE NOT n.deleted AND \(NoteFilter.onShow)
                ORDER BY n.updated_at DESC, n.id DESC LIMIT ?
                """
            arguments = []
        }
        arguments += StatementArguments(tagKeys)
        arguments += [limit ?? -1]
        do {
            let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
            var hits: [SearchHit] = []
            while let row = try rows.next() {
                hits.append(SearchHit(note: try LocalNote(row: row), marked: row.text(at: noteColumnCount)))
            }
            return hits
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            throw NotesError(.invalidInput, "The search cannot be run.", cause: error.message)
        }
    }

    /// How many live notes match an FTS5 query (nil: any text) and have every tag of `tagKeys`.
    func searchCount(_ query: String?, tagKeys: [String]) throws -> Int {
        let tags = TagFilter.hasEvery(tagKeys, column: "n.id").map { " AND \($0)" } ?? ""
        if let query {
            return try Int.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT COUNT(*) FROM notes_search JOIN notes n ON n.id = notes_search.rowid
                        WHERE notes_search MATCH ? AND NOT n.deleted AND \(NoteFilter.onShow)\(tags)
                        """),
                arguments: [query] + StatementArguments(tagKeys)) ?? 0
        }
        return try Int.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT COUNT(*) FROM (\(TagFilter.notesWithEvery(tagKeys) ?? "SELECT id AS note_id FROM notes")) tagged
                    CROSS JOIN notes n ON n.id = tagged.note_id WHERE NOT n.deleted AND \(NoteFilter.onShow)
                    """),
            arguments: StatementArguments(tagKeys)) ?? 0
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
            notes.append(TrashedNote(note: try LocalNote(row: row), text: row.text(at: noteColumnCount), deletedAt: row[noteColumnCount + 1]))
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
