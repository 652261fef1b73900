import ArgumentParser
import Foundation
import NotesClient

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find notes containing every word, best match first.",
        discussion: """
            Words match whole words, ignoring case and accents; end a word with * to match words starting with it \
            (meet* finds meeting). tag:NAME finds only notes with that tag (tag:work milk: notes tagged work that \
            hold milk; tag:work alone: every note tagged work, most recently edited first). Archived notes are \
            searched too, and marked [archived]. Each result shows the note's ID, when it was edited, its title and \
            the first line that matches, with the words highlighted on a terminal. On a terminal the 20 best by \
            default; --limit 0 shows all.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(name: .shortAndLong, help: "Show at most N results (0: all; default: 20 on a terminal, else all).")
    var limit: Int?
    @Argument(help: "Words that must all appear, and tag:NAME for tags the notes must have.") var words: [String]

    func validate() throws {
        if !SearchQuery.hasTerms(words) {
            throw ValidationError("Give at least one word (with a letter or a digit) or tag:NAME to search for.")
        }
        if let limit, limit < 0 { throw ValidationError("--limit is 0 (all) or more.") }
    }

    struct Output: Encodable {
        var note: NoteOutput
        /// The first matching line, as stored.
        var line: String
    }

    func run() async throws {
        let client = try options.openClient()
        let limit = limit.map { $0 == 0 ? nil : $0 } ?? (Screen.isTerminal && !options.json ? 20 : nil)
        let results = try client.search(words, limit: limit)
        if options.json {
            var outputs: [Output] = []
            for hit in results.hits {
                outputs.append(Output(note: NoteOutput(hit.note, id: try client.displayID(of: hit.note)), line: Self.plain(hit.matchingLine)))
            }
            try Console.json(outputs)
            return
        }
        if results.hits.isEmpty {
            Console.out("No note matches.")
            return
        }
        var ids: [Int64: String] = [:]
        for hit in results.hits { ids[hit.note.id] = try client.displayID(of: hit.note) }
        let width = ids.values.reduce(ShortID.minimumLength) { max($0, $1.count) }
        let now = nowMilliseconds
        var lines: [String] = []
        let columns = Screen.size?.columns ?? 100
        for hit in results.hits {
            let id = ids[hit.note.id]!
            let head = id + String(repeating: " ", count: width - id.count + 2) + LocalTime.relative(hit.note.updatedAt, now: now) + "  "
            let marks = (hit.note.isArchived ? "  [archived]" : "") + (hit.note.tags.isEmpty ? "" : "  " + shownTags(hit.note.tags))
            let title = hit.note.title
            let line = Self.trimmed(hit.matchingLine.trimmingCharacters(in: .whitespaces), width: max(30, columns - width - 4))
            if Self.plain(line).trimmingCharacters(in: .whitespaces) == title {
                lines.append(head + Self.render(line) + marks)
            } else {
                lines.append(head + Screen.styled(title, Screen.bold) + marks)
                lines.append(String(repeating: " ", count: width + 2) + Self.render(line))
            }
        }
        if results.total > results.hits.count {
            lines.append(Screen.styled("… and \(results.total - results.hits.count) more (--limit 0 shows all)", Screen.dim))
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }

    /// A marked line without its marks.
    static func plain(_ line: String) -> String {
        line.replacingOccurrences(of: SearchHit.markStart, with: "").replacingOccurrences(of: SearchHit.markEnd, with: "")
    }

    /// A marked line with its matches highlighted on a terminal, plain otherwise.
    static func render(_ line: String) -> String {
        guard Screen.colors else { return plain(line) }
        return line.replacingOccurrences(of: SearchHit.markStart, with: Screen.highlight)
            .replacingOccurrences(of: SearchHit.markEnd, with: Screen.reset)
    }

    /// A long line cut around its first match to about `width` characters, with `…` where it was cut.
    static func trimmed(_ line: String, width: Int) -> String {
        let visible = plain(line)
        guard visible.count > width else { return line }
        let characters = Array(line)
        let marks: Set<Character> = [Character(SearchHit.markStart), Character(SearchHit.markEnd)]
        let first = characters.firstIndex(of: Character(SearchHit.markStart)) ?? 0
        var start = max(0, first - width / 3)
        // Do not start inside a match.
        while start > 0 && marks.contains(characters[start]) { start -= 1 }
        var shown = 0
        var end = start
        var open = false
        while end < characters.count && shown < width {
            if characters[end] == Character(SearchHit.markStart) { open = true } else if characters[end] == Character(SearchHit.markEnd) { open = false } else { shown += 1 }
            end += 1
        }
        var result = (start > 0 ? "…" : "") + String(characters[start..<end])
        if open { result += SearchHit.markEnd }
        return result + (end < characters.count ? "…" : "")
    }
}
