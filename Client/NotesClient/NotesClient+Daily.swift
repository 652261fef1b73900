import Foundation
import MiniFlake
import NoteSyncProtocol

// The everyday commands beyond add/edit/delete: search, listing pages, the trash, conflict resolution, export and
// import. Each is one transaction; none touches the network.

extension NotesClient {
    // MARK: - Search

    /// Live notes containing every word (case and accents ignored; `word*` matches words starting with `word`),
    /// best match first (FTS5's bm25 rank), at most `limit` of them (nil: all), and how many match in all.
    ///
    /// The index (`notes_search`, SQLite FTS5) is kept in step with the notes by triggers in the same transactions,
    /// so a search costs what the matches cost, not what the store holds. No words: no results.
    public func search(_ words: [String], limit: Int?) throws(NotesError) -> SearchResults {
        guard let query = SearchQuery.fts5(words) else { return SearchResults(hits: [], total: 0) }
        return try store.read { tx in
            let hits = try tx.search(query, limit: limit)
            let total = limit == nil || hits.count < (limit ?? 0) ? hits.count : try tx.searchCount(query)
            return SearchResults(hits: hits, total: total)
        }
    }

    /// Every live note containing every word, best first (see ``search(_:limit:)``).
    public func search(_ words: [String]) throws(NotesError) -> [LocalNote] {
        try search(words, limit: nil).hits.map(\.note)
    }

    // MARK: - Listing pages

    /// The `limit` most recently edited notes (tombstones only when `includeDeleted`), newest first, with their
    /// display IDs and how many notes there are in all. Reads only that page and each shown note's neighbours, so
    /// it costs the same with 200,000 notes as with 20.
    public func recent(limit: Int, includeDeleted: Bool = false) throws(NotesError) -> (listing: Listing, total: Int) {
        let (notes, total) = try store.read { tx in
            (try tx.recentSummaries(limit: limit, includeDeleted: includeDeleted), try tx.noteCount(includeDeleted: includeDeleted))
        }
        var ids: [Int64: String] = [:]
        for note in notes { ids[note.id] = try displayID(clientID: note.clientID, origin: note.origin) }
        return (Listing(notes: notes, displayIDs: ids), total)
    }

    /// The short ID people see for a note with this client ID and origin.
    func displayID(clientID: FlakeID, origin: FlakeID) throws(NotesError) -> String {
        let (before, after, twins) = try store.read { tx in try tx.neighbours(ofClientID: clientID) }
        var shared = 0
        for neighbour in [before, after].compactMap({ $0 }) {
            shared = max(shared, ShortID.commonPrefix(clientID, neighbour))
        }
        return ShortID.display(clientID, shared: shared, collides: twins > 1, origin: origin)
    }

    // MARK: - Trash

    /// How long the trash keeps a deleted note's text, in days, counted from the delete.
    public static let trashDays = 30

    /// Deleted notes whose text is kept (deleted here or on another device within ``trashDays`` days), most
    /// recently deleted first. Older entries are forgotten first.
    public func trash() throws(NotesError) -> [TrashedNote] {
        let cutoff = now - Int64(Self.trashDays) * 86_400_000
        return try store.write { tx in
            try tx.emptyTrash(deletedBefore: cutoff)
            return try tx.trash()
        }
    }

    /// Brings a deleted note back with the text the trash kept: an edit of the tombstone, which syncs like any
    /// edit (the server restores the note for every device).
    ///
    /// - Throws: `note_not_found`; `invalid_input` when the note is not deleted or the trash no longer has its text.
    @discardableResult
    public func restore(_ id: LocalNote.ID) throws(NotesError) -> LocalNote {
        let text: String = try store.read { tx in
            let note = try tx.note(id)
            guard note.isDeleted else { throw NotesError(.invalidInput, "The note is not deleted.") }
            guard let text = try tx.trashedText(ofNote: id) else {
                throw NotesError(
                    .invalidInput, "The trash no longer has this note's text (it keeps texts for \(Self.trashDays) days).")
            }
            return text
        }
        return try edit(id, text: text)
    }

    // MARK: - Conflicts

    /// What to keep of a conflict copy and the note it was split from.
    public enum ConflictResolution: Sendable, Equatable {
        /// The note as it is; the copy is deleted.
        case keepNote
        /// The copy's text becomes the note's; the copy is deleted.
        case keepCopy
        /// Both texts: the copy's becomes a new, ordinary note; the copy is deleted.
        case keepBoth
        /// This text (a merge) becomes the note's; the copy is deleted.
        case merged(String)
    }

    /// The note a conflict copy was split from, when it is on this device.
    public func original(ofConflictCopy copy: LocalNote) throws(NotesError) -> LocalNote? {
        guard let serverID = copy.conflictOf else { return nil }
        return try note(serverID: serverID)
    }

    /// Resolves a conflict: keeps what `resolution` says and deletes the copy, in one transaction. Everything it
    /// does syncs like ordinary edits and deletes, so the copy disappears from every device.
    ///
    /// - Returns: the note that holds the result (the original, or the new note for ``ConflictResolution/keepBoth``);
    ///   nil for ``ConflictResolution/keepNote`` when the original is not on this device.
    /// - Throws: `invalid_input` when `copyID` is not a live conflict copy, or the original is needed and not here;
    ///   `empty_note`, `invalid_text` for a merged text add or edit would refuse.
    @discardableResult
    public func resolveConflict(copy copyID: LocalNote.ID, _ resolution: ConflictResolution) throws(NotesError) -> LocalNote? {
        if case .merged(let text) = resolution { try Self.requireContent(text) }
        let now = now
        return try store.write { tx in
            let copy = try tx.note(copyID)
            guard copy.isConflict && !copy.isDeleted else {
                throw NotesError(.invalidInput, "That note is not a conflict copy (see `notes conflicts`).")
            }
            let original = try copy.conflictOf.flatMap { serverID in try tx.note(serverID: serverID) }
            func requireOriginal() throws -> LocalNote {
                guard let original, !original.isDeleted else {
                    throw NotesError(
                        .invalidInput,
                        "The note this copy was split from is not on this device (or was deleted); keep both or keep the copy as a note with --keep both.")
                }
                return original
            }
            var result: LocalNote?
            switch resolution {
            case .keepNote:
                result = original
            case .keepCopy, .merged:
                let target = try requireOriginal()
                let text: String
                if case .merged(let merged) = resolution { text = merged } else { text = copy.text }
                try Self.requireFits(text, baseText: target.baseText, settings: try tx.requireSettings())
                if target.text != text { try tx.replaceText(ofNote: target.id, with: text, now: now) }
                result = try tx.note(target.id)
            case .keepBoth:
                let clientID = try tx.mintClientID(with: minter, createdAt: now)
                result = try tx.insertNote(clientID: clientID, origin: origin, text: copy.text, now: now)
            }
            try Self.delete(copyID, in: tx, now: now)
            return result
        }
    }

    // MARK: - Export and import

    /// Every live note (unsynced ones and conflict copies included) with its identity: what `notes export` writes.
    public func export() throws(NotesError) -> NotesExport {
        let notes = try store.read { tx in try tx.notes(includeDeleted: false) }
        return NotesExport(
            exportedAt: WireTime.format(unixMilliseconds: now),
            notes: notes.map { note in
                ExportedNote(
                    clientID: note.clientID, origin: note.origin, text: note.text, conflict: note.isConflict,
                    createdAt: WireTime.format(unixMilliseconds: note.createdAt),
                    editedAt: WireTime.format(unixMilliseconds: note.updatedAt), pending: note.isDirty)
            })
    }

    /// Adds notes from exports and plain texts, in one transaction (all or nothing), reporting progress as it goes.
    ///
    /// - Notes of an export keep their client ID, origin, creation and edit times. A note this device already has
    ///   (same client ID and origin) is left as it is; so importing an export on a fresh device of the same
    ///   account, before or after signing in, creates no duplicate: the sign-in finds the notes by client ID.
    /// - A plain text becomes a new note, unless a live note already holds the same text (trailing newlines
    ///   aside), so importing the same files twice adds nothing the second time.
    ///
    /// - Throws: `empty_note` never (empty texts are skipped and counted); `invalid_text` for a text over the
    ///   remembered server's limit (nothing is imported).
    public func importNotes(
        _ items: [ImportItem], progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws(NotesError) -> ImportReport {
        let total = items.reduce(0) { count, item in
            switch item {
            case .export(let export): count + export.notes.count
            case .text: count + 1
            }
        }
        let now = now
        return try store.write { tx in
            var report = ImportReport()
            let settings = try tx.requireSettings()
            var texts = Set(try tx.liveTextKeys())
            var done = 0
            func advance() {
                done += 1
                if done % 500 == 0 || done == total { progress?(done, total) }
            }
            var highest: FlakeID?
            for item in items {
                switch item {
                case .export(let export):
                    for note in export.notes {
                        defer { advance() }
                        if try tx.hasNote(clientID: note.clientID, origin: note.origin) {
                            report.alreadyHere += 1
                            continue
                        }
                        if note.text.allSatisfy(\.isWhitespace) {
                            report.empty += 1
                            continue
                        }
                        try Self.requireFits(note.text, baseText: nil, settings: settings)
                        let edited = WireTime.parse(note.editedAt ?? "") ?? now
                        try tx.importNote(clientID: note.clientID, origin: note.origin, text: note.text, createdAt: note.clientID.unixMilliseconds, editedAt: edited)
                        texts.insert(Self.importKey(note.text))
                        if note.origin == origin { highest = max(highest ?? note.clientID, note.clientID) }
                        report.added += 1
                    }
                case .text(let text, _):
                    defer { advance() }
                    let text = Self.trimmingTrailingNewlines(text)
                    if text.allSatisfy(\.isWhitespace) {
                        report.empty += 1
                        continue
                    }
                    guard texts.insert(Self.importKey(text)).inserted else {
                        report.sameText += 1
                        continue
                    }
                    try Self.requireFits(text, baseText: nil, settings: settings)
                    let clientID = try tx.mintClientID(with: minter, createdAt: now)
                    _ = try tx.insertNote(clientID: clientID, origin: origin, text: text, now: now)
                    report.added += 1
                }
            }
            // Client IDs of this installation's origin, imported from its own export: never mint them again.
            if let highest { try tx.raiseHighWaterMark(to: highest) }
            return report
        }
    }

    /// What decides that a plain text is already here: the text without trailing newlines.
    static func importKey(_ text: String) -> String { trimmingTrailingNewlines(text) }

    static func trimmingTrailingNewlines(_ text: String) -> String {
        var text = Substring(text)
        while let last = text.last, last == "\n" || last == "\r\n" || last == "\r" { text.removeLast() }
        return String(text)
    }
}

/// A `notes export --format json` document.
public struct NotesExport: Codable, Sendable, Equatable {
    /// Always ``formatName``: what tells an export from any other JSON.
    public var format: String
    public var version: Int
    public var exportedAt: String
    public var notes: [ExportedNote]

    public static let formatName = "flakenotes-export"

    public init(exportedAt: String, notes: [ExportedNote]) {
        format = Self.formatName
        version = 1
        self.exportedAt = exportedAt
        self.notes = notes
    }
}

/// One note of an export: its identity (client ID and origin, which the server reconciles by), text and times.
public struct ExportedNote: Codable, Sendable, Equatable {
    public var clientID: FlakeID
    public var origin: FlakeID
    public var text: String
    /// A conflict copy (informational: an imported copy is an ordinary note until a sync says otherwise).
    public var conflict: Bool
    public var createdAt: String?
    public var editedAt: String?
    /// It had changes no server had when exported (informational).
    public var pending: Bool?

    public init(
        clientID: FlakeID, origin: FlakeID, text: String, conflict: Bool = false, createdAt: String? = nil,
        editedAt: String? = nil, pending: Bool? = nil
    ) {
        self.clientID = clientID
        self.origin = origin
        self.text = text
        self.conflict = conflict
        self.createdAt = createdAt
        self.editedAt = editedAt
        self.pending = pending
    }
}

/// Something `notes import` reads.
public enum ImportItem: Sendable {
    /// A JSON export.
    case export(NotesExport)
    /// A Markdown or text file's content: one note.
    case text(String, source: String)
}

/// What an import did.
public struct ImportReport: Sendable, Equatable, Codable {
    /// Notes added.
    public var added = 0
    /// Exported notes this device already had (same client ID and origin), left as they are.
    public var alreadyHere = 0
    /// Plain texts a live note already holds, not added again.
    public var sameText = 0
    /// Empty texts, skipped.
    public var empty = 0
}
