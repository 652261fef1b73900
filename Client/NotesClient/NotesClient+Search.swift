import Foundation

// Search: the full-text index (`notes_search`, SQLite FTS5), read in one transaction.

extension NotesClient {
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
}
