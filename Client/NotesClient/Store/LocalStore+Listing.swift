import GRDB
import MiniFlake
import NoteSyncProtocol

// Listings (`notes list`: every note, a page of them, the notes of some tags) and the tags with their counts
// (`notes tags`).

extension LocalStore.Transaction {
    /// The columns a listing reads of a note, in the order ``summary(_:)`` reads them: the first 400 bytes of a live
    /// text (for its title), never the whole. Unqualified: a page names its note `p`.
    private static let summaryColumns = """
        id, client_id, origin, CASE WHEN deleted THEN NULL ELSE substr(text, 1, 400) END, deleted, dirty, is_conflict,
        push_error, updated_at, tags, pinned, archived
        """

    /// What ``ShortID`` needs to show a listed note (of a page `p` selected with ``summaryColumns``), read after them
    /// by the same statement (so a page or a tag's notes cost one statement, not three per note): the nearest client
    /// IDs below and above it among the notes on show, and how many notes on show have its client ID (index
    /// `notes_client_id`).
    private static let neighbourColumns = """
        (SELECT b.client_id FROM notes b WHERE b.client_id < p.client_id AND \(NoteFilter.onShow) ORDER BY b.client_id DESC LIMIT 1),
        (SELECT b.client_id FROM notes b WHERE b.client_id > p.client_id AND \(NoteFilter.onShow) ORDER BY b.client_id LIMIT 1),
        (SELECT COUNT(*) FROM notes b WHERE b.client_id = p.client_id AND \(NoteFilter.onShow))
        """

    /// The listing order (``ListingFilter/precedes(_:_:)``), which the index `notes_listing` holds for each value of
    /// `archived`.
    private static let listingOrder = "ORDER BY pinned DESC, updated_at DESC, id DESC"

    /// The notes a listing reads and the condition a listed one meets, with its arguments: on show, and as `filter`
    /// says. With tags, the notes are read from the index `note_tags` first (`CROSS JOIN` keeps SQLite from scanning
    /// every note in listing order to test each), so a tag's notes cost what they are, not what the store holds.
    ///
    /// - Parameter ordered: Whether the statement reads the notes in listing order (a page): then `archived = 0`, an
    ///   equality the index `notes_listing` serves in that order; else (a count) `+archived = 0`, which SQLite reads
    ///   from each row of one pass over the table rather than through that index and a lookup of every row.
    /// - Parameter inListingOrder: For a tag: read the notes in listing order (index `notes_listing`) and look each
    ///   up in `note_tags`, instead of reading the tag's notes and sorting them: cheaper for the first page of a tag
    ///   many notes have (``readsTagInListingOrder(_:limit:)``).
    private static func source(
        _ filter: ListingFilter, ordered: Bool = true, inListingOrder: Bool = false
    ) -> (from: String, condition: String, arguments: StatementArguments) {
        var terms = [NoteFilter.onShow]
        let archived = ordered ? "archived" : "+archived"
        switch filter.archived {
        case .hidden: terms.append("\(archived) = 0")
        case .only: terms.append("\(archived) = 1")
        case .included: break
        }
        if !filter.includeDeleted { terms.append("NOT deleted") }
        let keys = TagFilter.keys(filter.tags)
        var from = "notes"
        if inListingOrder, keys.count == 1 {
            terms.append("EXISTS (SELECT 1 FROM note_tags t WHERE t.key = ? AND t.note_id = notes.id)")
        } else if let tagged = TagFilter.notesWithEvery(keys) {
            from = "(\(tagged)) tagged CROSS JOIN notes ON notes.id = tagged.note_id"
        }
        return (from, terms.joined(separator: " AND "), StatementArguments(keys))
    }

    /// Whether the first `limit` notes of one tag's listing are read in listing order, each looked up in `note_tags`:
    /// when the tag is on so many notes (`tag_counts`) that `limit` of them come within fewer notes in that order than
    /// the tag has (about `limit × notes / tagged`, against `tagged`). A rare tag's notes are read from `note_tags`.
    private func readsTagInListingOrder(_ filter: ListingFilter, limit: Int?) throws -> Bool {
        let keys = TagFilter.keys(filter.tags)
        guard let limit, keys.count == 1 else { return false }
        let tagged = try Int.fetchOne(db.cachedStatement(sql: "SELECT notes FROM tag_counts WHERE key = ?"), arguments: [keys[0]]) ?? 0
        let notes = try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(id) FROM notes")) ?? 0
        return tagged > 0 && tagged * tagged > limit * notes
    }

    /// A row selected with ``summaryColumns`` first.
    private func summary(_ row: Row) throws -> NoteSummary {
        // The first 400 bytes: a character cut at the end would decode as U+FFFD, so drop a partial one.
        let head: String? = row.textIfPresent(at: 3).map(Self.droppingCutCharacter)
        var summary = NoteSummary(
            id: row[0], clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]),
            title: head.map(NoteSummary.title(of:)) ?? "", isDeleted: row[4], isDirty: row[5], isConflict: row[6],
            pushErrorCode: row[7], updatedAt: row[8])
        summary.tags = StoredTags.names(row[9])
        summary.isPinned = row[10]
        summary.isArchived = row[11]
        return summary
    }

    /// `text` without a replacement character at its end (what a UTF-8 sequence cut by `substr` decodes to).
    static func droppingCutCharacter(_ text: String) -> String {
        var scalars = text.unicodeScalars
        if scalars.last == "\u{FFFD}" { scalars.removeLast() }
        return String(scalars)
    }

    /// What ``NotesClient/listing(_:)`` returns. Without tags, one scan of the notes on show that reads only the
    /// first 400 bytes of each live text, and the display IDs from every note's key (``ShortID/assign(_:)``); with
    /// tags, only the notes of those tags (index `note_tags`), each with its neighbours.
    func listing(_ filter: ListingFilter) throws -> Listing {
        if !filter.tags.isEmpty { return try page(filter, limit: nil) }
        let rows = try Row.fetchCursor(db, sql: "SELECT \(Self.summaryColumns) FROM notes WHERE \(NoteFilter.onShow)")
        var keys: [(id: Int64, clientID: FlakeID, origin: FlakeID)] = []
        var summaries: [NoteSummary] = []
        while let row = try rows.next() {
            let key = (id: row[0] as Int64, clientID: try FlakeID(stored: row[1]), origin: try FlakeID(stored: row[2]))
            keys.append(key)
            guard filter.lists(isDeleted: row[4], isArchived: row[11]) else { continue }
            summaries.append(try summary(row))
        }
        summaries.sort(by: ListingFilter.precedes)
        return Listing(notes: summaries, displayIDs: ShortID.assign(keys))
    }

    /// The first `limit` notes of a listing (nil: all of them) with their display IDs, from one statement: a page of
    /// notes without tags reads the index `notes_listing` (pinned notes first, then the most recently edited), a tag's
    /// notes the index `note_tags`, and only the notes of the page are looked up for their neighbours, so a page costs
    /// the same with 200,000 notes as with 20.
    func page(_ filter: ListingFilter, limit: Int?) throws -> Listing {
        let (from, condition, arguments) = Self.source(filter, inListingOrder: try readsTagInListingOrder(filter, limit: limit))
        // The page's IDs first (in order, from the index), then only its notes read and their neighbours looked up.
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT \(Self.summaryColumns), \(Self.neighbourColumns) FROM (
                        SELECT notes.id AS page_id, pinned AS page_pinned, updated_at AS page_updated_at FROM \(from)
                        WHERE \(condition) \(Self.listingOrder) LIMIT ?
                    ) page CROSS JOIN notes p ON p.id = page.page_id
                    ORDER BY page.page_pinned DESC, page.page_updated_at DESC, page.page_id DESC
                    """),
            arguments: arguments + [limit ?? -1])
        var summaries: [NoteSummary] = []
        var ids: [Int64: String] = [:]
        while let row = try rows.next() {
            let note = try summary(row)
            summaries.append(note)
            var shared = 0
            for neighbour in [row[12], row[13]] as [Int64?] {
                if let neighbour { shared = max(shared, ShortID.commonPrefix(note.clientID, try FlakeID(stored: neighbour))) }
            }
            ids[note.id] = ShortID.display(note.clientID, shared: shared, collides: (row[14] as Int) > 1, origin: note.origin)
        }
        return Listing(notes: summaries, displayIDs: ids)
    }

    /// How many notes a listing holds. Of one tag's live notes, the tag's count (`tag_counts`) less those set aside and
    /// those the listing leaves out for being archived or not (a scan of the index `notes_listing` for the archived
    /// ones, usually few), so a tag many notes have is not counted note by note.
    func listingCount(_ filter: ListingFilter) throws -> Int {
        let keys = TagFilter.keys(filter.tags)
        if keys.count == 1 && !filter.includeDeleted && filter.archived != .only {
            let tagged = try Int.fetchOne(db.cachedStatement(sql: "SELECT notes FROM tag_counts WHERE key = ?"), arguments: [keys[0]]) ?? 0
            let hasTag = "EXISTS (SELECT 1 FROM note_tags t WHERE t.key = ? AND t.note_id = notes.id)"
            let aside = try Int.fetchOne(
                db.cachedStatement(sql: "SELECT COUNT(*) FROM notes INDEXED BY notes_aside WHERE \(NoteFilter.setAside) AND \(hasTag)"),
                arguments: [keys[0]]) ?? 0
            var archived = 0
            if filter.archived == .hidden {
                archived = try Int.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT COUNT(*) FROM notes INDEXED BY notes_listing WHERE archived = 1 AND NOT deleted AND \(NoteFilter.onShow) AND \(hasTag)"),
                    arguments: [keys[0]]) ?? 0
            }
            return tagged - aside - archived
        }
        let (from, condition, arguments) = Self.source(filter, ordered: false)
        return try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM \(from) WHERE \(condition)"), arguments: arguments) ?? 0
    }

    /// Every note a listing holds, in its order, read whole (`notes list --json`).
    func notes(_ filter: ListingFilter) throws -> [LocalNote] {
        let (from, condition, arguments) = Self.source(filter)
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT \(noteColumns) FROM \(from) WHERE \(condition) \(Self.listingOrder)"), arguments: arguments)
        var notes: [LocalNote] = []
        while let row = try rows.next() { notes.append(try LocalNote(row: row)) }
        return notes
    }

    // MARK: - Tags

    /// Every tag of the live notes on show with how many notes have it, in the order of their keys; each shown as
    /// written on the oldest note here that has it. Reads the counts `tag_counts` keeps of the index `note_tags` (the
    /// tags of live notes only, ``indexTags(ofNote:_:)``), without counting the index or reading the notes; takes off
    /// the tags of the notes set aside (index `notes_aside`, usually none); one row per tag gives its display form.
    func tagCounts() throws -> [TagCount] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    WITH aside(key, notes) AS (
                        SELECT t.key, COUNT(*) FROM notes n INDEXED BY notes_aside CROSS JOIN note_tags t ON t.note_id = n.id
                        WHERE n.\(NoteFilter.setAside) GROUP BY t.key)
                    SELECT (SELECT name FROM note_tags f WHERE f.key = c.key AND \(NoteFilter.tagOfNoteOnShow) ORDER BY note_id LIMIT 1),
                    c.notes - COALESCE(aside.notes, 0)
                    FROM tag_counts c LEFT JOIN aside USING (key) WHERE c.notes > COALESCE(aside.notes, 0) ORDER BY c.key
                    """))
        var counts: [TagCount] = []
        while let row = try rows.next() { counts.append(TagCount(name: row[0], notes: row[1])) }
        return counts
    }
}
