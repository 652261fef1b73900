import GRDB
import MiniFlake
import NoteSyncProtocol

// Listings (`notes list`: every note, a page of them, the notes of some tags) and the tags with their counts
// (`notes tags`).

extension LocalStore.Transaction {
    /// The columns a listing reads of a note, in the order ``summary(_:)`` reads them: the first 400 bytes of a live
    /// text (for its title), never the whole.
    private static let summaryColumns = """
        id, client_id, origin, CASE WHEN deleted THEN NULL ELSE substr(text, 1, 400) END, deleted, dirty, is_conflict,
        push_error, updated_at, tags, pinned, archived
        """

    /// What ``ShortID`` needs to show a listed note, read after ``summaryColumns`` by the same statement (so a page or
    /// a tag's notes cost one statement, not three per note): the nearest client IDs below and above it among the
    /// notes on show, and how many notes on show have its client ID (index `notes_client_id`).
    private static let neighbourColumns = """
        (SELECT b.client_id FROM notes b WHERE b.client_id < notes.client_id AND \(NoteFilter.onShow) ORDER BY b.client_id DESC LIMIT 1),
        (SELECT b.client_id FROM notes b WHERE b.client_id > notes.client_id AND \(NoteFilter.onShow) ORDER BY b.client_id LIMIT 1),
        (SELECT COUNT(*) FROM notes b WHERE b.client_id = notes.client_id AND \(NoteFilter.onShow))
        """

    /// The listing order (``ListingFilter/precedes(_:_:)``), which the index `notes_listing` holds for each value of
    /// `archived`.
    private static let listingOrder = "ORDER BY pinned DESC, updated_at DESC, id DESC"

    /// The condition a listed note meets, with its arguments: on show, and as `filter` says.
    private static func condition(_ filter: ListingFilter) -> (sql: String, arguments: StatementArguments) {
        var terms = [NoteFilter.onShow]
        // `archived = 0`, not `NOT archived`: an equality the index `notes_listing` can use.
        switch filter.archived {
        case .hidden: terms.append("archived = 0")
        case .only: terms.append("archived = 1")
        case .included: break
        }
        if !filter.includeDeleted { terms.append("NOT deleted") }
        let keys = TagFilter.keys(filter.tags)
        if let tags = TagFilter.hasEvery(keys) { terms.append(tags) }
        return (terms.joined(separator: " AND "), StatementArguments(keys))
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
    /// notes without tags reads the index `notes_listing` (pinned notes first, then the most recently edited), so it
    /// costs the same with 200,000 notes as with 20.
    func page(_ filter: ListingFilter, limit: Int?) throws -> Listing {
        let (condition, arguments) = Self.condition(filter)
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT \(Self.summaryColumns), \(Self.neighbourColumns) FROM notes WHERE \(condition)
                    \(Self.listingOrder) LIMIT ?
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

    /// How many notes a listing holds.
    func listingCount(_ filter: ListingFilter) throws -> Int {
        let (condition, arguments) = Self.condition(filter)
        return try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE \(condition)"), arguments: arguments) ?? 0
    }

    /// Every note a listing holds, in its order, read whole (`notes list --json`).
    func notes(_ filter: ListingFilter) throws -> [LocalNote] {
        let (condition, arguments) = Self.condition(filter)
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT \(noteColumns) FROM notes WHERE \(condition) \(Self.listingOrder)"), arguments: arguments)
        var notes: [LocalNote] = []
        while let row = try rows.next() { notes.append(try LocalNote(row: row)) }
        return notes
    }

    // MARK: - Tags

    /// Every tag of the live notes on show with how many notes have it, in the order of their keys; each shown as
    /// written on the oldest note here that has it. One pass over the index `note_tags`, which holds the tags of live
    /// notes only (``indexTags(ofNote:_:)``), so the notes themselves are not read; only the notes set aside (index
    /// `notes_aside`, usually none) are looked up to leave theirs out.
    func tagCounts() throws -> [TagCount] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT name, MIN(note_id), COUNT(*) FROM note_tags WHERE \(NoteFilter.tagOfNoteOnShow)
                    GROUP BY key ORDER BY key
                    """))
        var counts: [TagCount] = []
        while let row = try rows.next() { counts.append(TagCount(name: row[0], notes: row[2])) }
        return counts
    }
}
