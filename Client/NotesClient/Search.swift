import Foundation

/// One search result: a live note and its text with the matching words marked.
public struct SearchHit: Sendable, Equatable {
    /// Put before and after each matching word in ``marked`` (private-use characters, which notes do not hold).
    public static let markStart = "\u{E000}"
    public static let markEnd = "\u{E001}"

    public let note: LocalNote
    /// The note's text with ``markStart`` and ``markEnd`` around every word the search matched (FTS5's own
    /// tokenizer decided, so these are exactly the words that made the note match).
    public let marked: String

    /// The first line holding a match, marks included (the title's line when no line is marked).
    public var matchingLine: String {
        let lines = marked.split(separator: "\n", omittingEmptySubsequences: false)
        return String(lines.first { $0.contains(Self.markStart) } ?? lines.first ?? "")
    }
}

/// All live notes matching a search, best first: at most the limit asked for, and how many there are in all.
public struct SearchResults: Sendable, Equatable {
    public var hits: [SearchHit]
    public var total: Int
}

/// A deleted note whose text the trash keeps (see ``NotesClient/trash()``).
public struct TrashedNote: Sendable, Equatable {
    /// The tombstone.
    public let note: LocalNote
    /// Its text when it was deleted.
    public let text: String
    /// When it was deleted (Unix milliseconds; the deleting device's clock).
    public let deletedAt: Int64
}

/// Turns what a person types into an FTS5 query: every word must appear (in any order, case and accents ignored);
/// a word ending in `*` matches any word it starts. Each word is quoted, so FTS5's operators and punctuation in a
/// word (`e-mail`, `AND`, `"`) are plain text: `e-mail` matches the words `e` and `mail` next to each other.
///
/// A word `tag:NAME` is not searched for in the text: the notes must have the tag NAME (compared by key, like every
/// tag; several `tag:` words, all of them). `notes search tag:work milk` finds the notes tagged work that hold milk;
/// `notes search tag:work` every note tagged work.
public enum SearchQuery {
    /// The prefix of a word that names a tag.
    public static let tagPrefix = "tag:"

    /// The words of a search, apart: the tags `tag:` words name, and the other words.
    public static func split(_ words: [String]) -> (words: [String], tags: [String]) {
        var plain: [String] = []
        var tags: [String] = []
        for word in words.flatMap({ $0.split(whereSeparator: \.isWhitespace) }) {
            if word.lowercased().hasPrefix(tagPrefix), word.count > tagPrefix.count {
                tags.append(String(word.dropFirst(tagPrefix.count)))
            } else {
                plain.append(String(word))
            }
        }
        return (plain, tags)
    }

    /// Whether `words` hold something to search for: a word FTS5 can match, or a tag.
    public static func hasTerms(_ words: [String]) -> Bool {
        let (plain, tags) = split(words)
        return !tags.isEmpty || fts5(plain) != nil
    }

    /// The FTS5 query, or nil when `words` hold nothing to search for.
    public static func fts5(_ words: [String]) -> String? {
        var terms: [String] = []
        for word in words.flatMap({ $0.split(whereSeparator: \.isWhitespace) }) {
            var word = Substring(word)
            var prefix = false
            while word.hasSuffix("*") {
                word = word.dropLast()
                prefix = true
            }
            // FTS5 finds nothing in a word without letters or digits; leave it out rather than match nothing.
            guard word.contains(where: { $0.isLetter || $0.isNumber }) else { continue }
            terms.append("\"" + word.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (prefix ? "*" : ""))
        }
        return terms.isEmpty ? nil : terms.joined(separator: " ")
    }
}
