import Foundation

// Search: the full-text index (`notes_search`, SQLite FTS5), read in one transaction.

extension NotesClient {
    /// Live notes (archived ones too) containing every word (case and accents ignored; `word*` matches words
    /// starting with `word`) and having every tag named by a `tag:NAME` word (``SearchQuery``), best match first
    /// (FTS5's bm25 rank; with tags only, the most recently edited first), at most `limit` of them (nil: all), and how
    /// many match in all.
    ///
    /// The index (`notes_search`, SQLite FTS5) is kept in step with the notes in the same transactions, so a search
    /// costs what the matches cost, not what the store holds. No words and no tags: no results.
    public func search(_ words: [String], limit: Int?) throws(NotesError) -> SearchResults {
        let (plain, tags) = SearchQuery.split(words)
        let query = SearchQuery.fts5(plain)
        guard query != nil || !tags.isEmpty else { return SearchResults(hits: [], total: 0) }
        let keys = TagFilter.keys(tags)
        return try store.read { tx in
            let hits = try tx.search(query, tagKeys: keys, limit: limit)
            let total = limit == nil || hits.count < (limit ?? 0) ? hits.count : try tx.searchCount(query, tagKeys: keys)
            return SearchResults(hits: hits, total: total)
        }
    }

    /// Every live note containing every word (and having every `tag:` tag), best first (see ``search(_:limit:)``).
    public func search(_ words: [String]) throws(NotesError) -> [LocalNote] {
        try search(words, limit: nil).hits.map(\.note)
    }
}
