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

    /// The condition on `column` (a note's ID) taking `keys` as its arguments; nil for no keys.
    static func hasEvery(_ keys: [String], column: String = "id") -> String? {
        switch keys.count {
        case 0: return nil
        case 1: return "\(column) IN (SELECT note_id FROM note_tags WHERE key = ?)"
        default:
            let marks = repeatElement("?", count: keys.count).joined(separator: ", ")
            return "\(column) IN (SELECT note_id FROM note_tags WHERE key IN (\(marks)) GROUP BY note_id HAVING COUNT(*) = \(keys.count))"
        }
    }
}

extension LocalStore.Transaction {
    /// Adds the `note_tags` rows of a live note's tags (one statement; none for no tags): what `list --tag` and
    /// `notes tags` read. Every statement that gives a live note tags, or brings a tombstone back, calls this, and
    /// ``unindexTags(ofNote:)`` before when the note had rows; a tombstone has none (migration `v-tags-flags-history`).
    func indexTags(ofNote id: Int64, _ names: [String]) throws {
        guard !names.isEmpty else { return }
        let sql = "INSERT INTO note_tags (key, note_id, name) VALUES " + repeatElement("(?, ?, ?)", count: names.count).joined(separator: ", ")
        var arguments = StatementArguments()
        for name in names { arguments += [Tags.key(name), id, name] }
        try db.cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// Removes the `note_tags` rows of a note.
    func unindexTags(ofNote id: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM note_tags WHERE note_id = ?").execute(arguments: [id])
    }

    /// Makes a note's `note_tags` rows those of `names` when `live`, none otherwise.
    func reindexTags(ofNote id: Int64, _ names: [String], live: Bool) throws {
        try unindexTags(ofNote: id)
        if live { try indexTags(ofNote: id, names) }
    }
}
