import GRDB
import NoteSyncProtocol

/// A set of tags as the store keeps it (`notes.tags` and `base_tags`, the outbox's, the history cache's): the
/// display forms in the order of their keys, joined by "\n" (a tag holds no newline, ``TagRules``), '' for none.
/// Equal sets are always stored as equal texts, so SQL compares them (`tags IS NOT base_tags`).
enum StoredTags {
    /// The stored form of tags already in canonical order (``Tags/canonical(_:)``).
    static func text(_ names: [String]) -> String { names.joined(separator: "\n") }

    /// The tags of a stored form ([] for '' and NULL).
    static func names(_ text: String?) -> [String] {
        guard let text, !text.isEmpty else { return [] }
        return text.split(separator: "\n").map(String.init)
    }
}

/// The condition that a note has every one of some tags, spelled once for `notes list --tag` and `notes search
/// tag:`: its ID among those of the index `note_tags`, which holds the tags of live notes only.
enum TagFilter {
    /// The keys of `tags`, each once, sorted: the arguments of ``hasEvery(_:column:)``.
    static func keys(_ tags: [String]) -> [String] { Array(Set(tags.map(Tags.key))).sorted() }

    /// The IDs (`note_id`) of the notes that have every one of the tags `keys` (its arguments); nil for no keys.
    static func notesWithEvery(_ keys: [String]) -> String? {
        switch keys.count {
        case 0: return nil
        case 1: return "SELECT note_id FROM note_tags WHERE key = ?"
        default:
            let marks = repeatElement("?", count: keys.count).joined(separator: ", ")
            return "SELECT note_id FROM note_tags WHERE key IN (\(marks)) GROUP BY note_id HAVING COUNT(*) = \(keys.count)"
        }
    }

    /// The condition on `column` (a note's ID) taking `keys` as its arguments; nil for no keys.
    static func hasEvery(_ keys: [String], column: String = "id") -> String? {
        notesWithEvery(keys).map { "\(column) IN (\($0))" }
    }
}

/// What a transaction's changes to `note_tags` add to `tag_counts`, per key: added up as the rows are written and
/// written in one statement before the transaction commits (``LocalStore/write(_:)``), so a pull page of tagged notes
/// costs one statement more, not one per note.
final class TagCountChanges {
    fileprivate var byKey: [String: Int] = [:]
}

extension LocalStore.Transaction {
    /// Adds the `note_tags` rows of a live note's tags (one statement; none for no tags): what `list --tag` and
    /// `notes tags` read. Every statement that gives a live note tags, or brings a tombstone back, calls this, and
    /// ``unindexTags(ofNote:)`` before when the note had rows; a tombstone has none (migration `v-tags-flags-history`).
    func indexTags(ofNote id: Int64, _ names: [String]) throws {
        guard !names.isEmpty else { return }
        let sql = "INSERT INTO note_tags (key, note_id, name) VALUES " + repeatElement("(?, ?, ?)", count: names.count).joined(separator: ", ")
        var arguments = StatementArguments()
        for name in names {
            let key = Tags.key(name)
            arguments += [key, id, name]
            tagCountChanges.byKey[key, default: 0] += 1
        }
        try db.cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// Removes the `note_tags` rows of a note.
    func unindexTags(ofNote id: Int64) throws {
        let removed = try String.fetchAll(db.cachedStatement(sql: "DELETE FROM note_tags WHERE note_id = ? RETURNING key"), arguments: [id])
        for key in removed { tagCountChanges.byKey[key, default: 0] -= 1 }
    }

    /// Makes a note's `note_tags` rows those of `names` when `live`, none otherwise.
    func reindexTags(ofNote id: Int64, _ names: [String], live: Bool) throws {
        try unindexTags(ofNote: id)
        if live { try indexTags(ofNote: id, names) }
    }

    /// Writes what the transaction's tag changes add to `tag_counts` (one statement, none when they add nothing).
    func flushTagCounts() throws {
        let changes = tagCountChanges.byKey.filter { $0.value != 0 }.sorted { $0.key < $1.key }
        tagCountChanges.byKey = [:]
        guard !changes.isEmpty else { return }
        var arguments = StatementArguments()
        for (key, change) in changes { arguments += [key, change] }
        try db.execute(
            sql: "INSERT INTO tag_counts (key, notes) VALUES " + repeatElement("(?, ?)", count: changes.count).joined(separator: ", ")
                + " ON CONFLICT (key) DO UPDATE SET notes = notes + excluded.notes",
            arguments: arguments)
    }

    /// Counts every key of `note_tags` again: after a statement that deleted notes (their rows went with them, by
    /// `ON DELETE CASCADE`, which ``unindexTags(ofNote:)`` did not see). Wipes and the like, rare and whole.
    func recountTags() throws {
        tagCountChanges.byKey = [:]
        try db.execute(sql: "DELETE FROM tag_counts; INSERT INTO tag_counts (key, notes) SELECT key, COUNT(*) FROM note_tags GROUP BY key")
    }
}
