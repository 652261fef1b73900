import ArgumentParser
import Foundation
import NoteMerge
import NotesClient

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the versions of a note the server kept.",
        discussion: """
            Every version the server accepted (edits from any device, merges, deletes, restores), newest first: \
            its number, when it was edited, on which device, its size, and what changed from the version before. \
            The server keeps versions for the days its operator sets (90 by default); a deleted note's history is \
            kept too. Fetched from the server the first time, then kept on this device: asking again fetches only \
            newer versions. `notes show ID --version N` shows one, `notes diff ID N M` compares two, and \
            `notes restore ID --version N` makes one the note's text, tags and flags again.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    struct Output: Encodable {
        var id: String
        /// Oldest first.
        var versions: [VersionOutput]
        /// Versions this run fetched from the server.
        var fetched: Int
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let shortID = try client.displayID(of: note)
        let history = try await client.history(note.id)
        if options.json {
            try Console.json(Output(id: shortID, versions: history.versions.map { VersionOutput($0, id: shortID) }, fetched: history.fetched))
            return
        }
        guard !history.versions.isEmpty else {
            Console.out("The server keeps no version of \(shortID).")
            return
        }
        var rows: [[String]] = []
        for (index, version) in history.versions.enumerated().reversed() {
            let previous = index > 0 ? history.versions[index - 1] : nil
            rows.append([
                "v\(version.version)", LocalTime.format(version.editedAt), version.device ?? "-",
                Self.size(version.text.utf8.count), Self.summary(of: version, after: previous),
            ])
        }
        let widths = (0..<4).map { column in rows.reduce(0) { max($0, $1[column].count) } }
        var lines = rows.map { row in
            (0..<4).map { row[$0] + String(repeating: " ", count: widths[$0] - row[$0].count) }.joined(separator: "  ") + "  " + row[4]
        }
        if !history.askedServer, try client.account() == nil {
            lines.append(Screen.styled("(signed out: the versions kept on this device)", Screen.dim))
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }

    /// `812 B`, `4.1 KB`, `1.2 MB`.
    static func size(_ bytes: Int) -> String {
        if bytes < 1000 { return "\(bytes) B" }
        if bytes < 1_000_000 { return String(format: "%.1f KB", Double(bytes) / 1000) }
        return String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }

    /// What a version changed from the one before, in one line: `created`, `+3 -1 lines`, `+#work -#home`,
    /// `pinned`, `deleted`, ... (`no change` when only its time moved).
    static func summary(of version: NoteHistory.Version, after previous: NoteHistory.Version?) -> String {
        guard let previous else {
            return version.isDeleted ? "created deleted" : "created, \(plural(lineCount(version.text), "line"))"
        }
        if version.isDeleted { return "deleted" }
        var parts: [String] = []
        if previous.isDeleted { parts.append("restored") }
        let (added, removed) = lineChanges(from: previous.isDeleted ? "" : previous.text, to: version.text)
        if added > 0 || removed > 0 { parts.append("+\(added) -\(removed) lines") }
        let tags = TagChange(from: previous.tags, to: version.tags)
        if !tags.isEmpty { parts.append(tags.description) }
        if previous.isPinned != version.isPinned { parts.append(version.isPinned ? "pinned" : "unpinned") }
        if previous.isArchived != version.isArchived { parts.append(version.isArchived ? "archived" : "unarchived") }
        return parts.isEmpty ? "no change" : parts.joined(separator: ", ")
    }

    /// How many lines ``LineDiff/lines(from:to:)`` adds and removes from `old` to `new`, diffing only what lies
    /// between the lines both start and end with (the usual version changes a few lines: a history of 1,000 versions
    /// diffed whole took most of `notes history`'s time).
    static func lineChanges(from old: String, to new: String) -> (added: Int, removed: Int) {
        var a = lines(old)[...]
        var b = lines(new)[...]
        while let x = a.first, let y = b.first, x.utf8.elementsEqual(y.utf8) {
            a.removeFirst()
            b.removeFirst()
        }
        while let x = a.last, let y = b.last, x.utf8.elementsEqual(y.utf8) {
            a.removeLast()
            b.removeLast()
        }
        if a.isEmpty || b.isEmpty { return (b.count, a.count) }
        var added = 0
        var removed = 0
        // A final newline ends the last line, so an empty last line survives the round trip.
        for line in LineDiff.lines(from: a.joined(separator: "\n") + "\n", to: b.joined(separator: "\n") + "\n") {
            switch line {
            case .added: added += 1
            case .removed: removed += 1
            case .same: break
            }
        }
        return (added, removed)
    }

    /// The text's lines as ``LineDiff`` reads them (a final newline ends the last line), split on its UTF-8 bytes:
    /// splitting by `Character` walked every grapheme, most of the time of a long history.
    static func lines(_ text: String) -> [Substring] {
        guard !text.isEmpty else { return [] }
        var lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            text[$0.startIndex..<$0.endIndex]
        }
        if text.utf8.last == UInt8(ascii: "\n") { lines.removeLast() }
        return lines
    }

    static func lineCount(_ text: String) -> Int {
        text.isEmpty ? 0 : text.split(separator: "\n", omittingEmptySubsequences: false).count - (text.hasSuffix("\n") ? 1 : 0)
    }
}
