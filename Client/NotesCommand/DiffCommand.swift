import ArgumentParser
import NoteMerge
import NotesClient

struct Diff: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show how versions of a note differ.",
        discussion: """
            From the note's history (`notes history ID`): with no version, the last change the server kept (the \
            version before the latest against the latest); with N, version N against the note as it is on this \
            device; with N and M, version N against version M. Lines only in the older are marked -, lines only \
            in the newer +, with three lines of context; tag and flag changes are listed first.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Argument(help: "The version to compare from (default: the one before the latest).") var from: Int64?
    @Argument(help: "The version to compare to (default: the note as it is here, when a version is given).") var to: Int64?

    func validate() throws {
        for version in [from, to].compactMap({ $0 }) where version < 1 {
            throw ValidationError("Versions are numbered from 1.")
        }
    }

    /// One side of the comparison.
    struct Side: Encodable {
        /// The version number; nil for the note as it is on this device.
        var version: Int64?
        var text: String
        var deleted: Bool
        var tags: [String]
        var pinned: Bool
        var archived: Bool

        var label: String { version.map { "version \($0)" } ?? "the note on this device" }
    }

    struct Output: Encodable {
        var id: String
        var from: Side
        var to: Side
        /// The line diff: each line with `-`, `+` or a space in front.
        var lines: [String]
        /// The tag and flag changes in words.
        var changes: [String]
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let shortID = try client.displayID(of: note)
        let history = try await client.history(note.id)
        func version(_ number: Int64) throws -> NoteHistory.Version {
            guard let found = history.version(number) else {
                let range = history.versions.first.map { " (it holds versions \($0.version)–\(history.versions.last!.version))" } ?? ""
                throw CommandFailure(message: "the history of \(shortID) has no version \(number)\(range)")
            }
            return found
        }
        let old: Side
        let new: Side
        switch (from, to) {
        case (let from?, let to?):
            (old, new) = (Side(try version(from)), Side(try version(to)))
        case (let from?, nil):
            (old, new) = (Side(try version(from)), Side(note))
        default:
            guard history.versions.count >= 2 else {
                throw CommandFailure(
                    message: "\(shortID) has \(plural(history.versions.count, "version")) in its history: nothing to compare (`notes diff ID N` compares version N with the note)")
            }
            let last = history.versions.count - 1
            (old, new) = (Side(history.versions[last - 1]), Side(history.versions[last]))
        }
        let changes = stateChanges(from: old, to: new)
        if options.json {
            let lines = LineDiff.lines(from: old.text, to: new.text).map { line in
                switch line {
                case .same(let text): " " + text
                case .removed(let text): "-" + text
                case .added(let text): "+" + text
                }
            }
            try Console.json(Output(id: shortID, from: old, to: new, lines: lines, changes: changes))
            return
        }
        var output = changes.map { Screen.styled($0, Screen.bold) }
        output += textDiff(from: old.text, to: new.text, oldLabel: "\(shortID) \(old.label)", newLabel: "\(shortID) \(new.label)")
        Pager.show(Array(output.joined(separator: "\n").utf8))
    }

    /// The tag and flag changes between two sides, one line each.
    func stateChanges(from old: Side, to new: Side) -> [String] {
        var lines: [String] = []
        let change = TagChange(from: old.tags, to: new.tags)
        if !change.isEmpty { lines.append("tags: \(change)") }
        if old.pinned != new.pinned { lines.append(new.pinned ? "pinned" : "unpinned") }
        if old.archived != new.archived { lines.append(new.archived ? "archived" : "unarchived") }
        if old.deleted != new.deleted { lines.append(new.deleted ? "deleted" : "restored") }
        return lines
    }
}

/// The tags one set adds to another and takes off it (by key): `+#work -#home`.
struct TagChange: CustomStringConvertible {
    var added: [String]
    var removed: [String]

    init(from old: [String], to new: [String]) {
        let oldKeys = Set(old.map(Tags.key))
        let newKeys = Set(new.map(Tags.key))
        added = new.filter { !oldKeys.contains(Tags.key($0)) }
        removed = old.filter { !newKeys.contains(Tags.key($0)) }
    }

    var isEmpty: Bool { added.isEmpty && removed.isEmpty }
    var description: String { (added.map { "+#" + $0 } + removed.map { "-#" + $0 }).joined(separator: " ") }
}

/// Two texts line by line: `-` lines only in the old, `+` lines only in the new, with three lines of context around
/// each change (red and green on a terminal), under a `---`/`+++` header naming both.
func textDiff(from old: String, to new: String, oldLabel: String, newLabel: String) -> [String] {
    var output = [Screen.styled("--- \(oldLabel)", Screen.bold), Screen.styled("+++ \(newLabel)", Screen.bold)]
    let lines = LineDiff.lines(from: old, to: new)
    let changed = lines.indices.filter { if case .same = lines[$0] { false } else { true } }
    guard !changed.isEmpty else { return output + ["  (the texts are the same)"] }
    var shown = Set<Int>()
    for index in changed { for near in max(0, index - 3)...min(lines.count - 1, index + 3) { shown.insert(near) } }
    var previous: Int?
    for index in shown.sorted() {
        if let previous, index > previous + 1 { output.append(Screen.styled("  …", Screen.dim)) }
        switch lines[index] {
        case .same(let text): output.append("  " + text)
        case .removed(let text): output.append(Screen.styled("- " + text, Screen.red))
        case .added(let text): output.append(Screen.styled("+ " + text, Screen.green))
        }
        previous = index
    }
    return output
}

extension Diff.Side {
    init(_ version: NoteHistory.Version) {
        self.init(
            version: version.version, text: version.text, deleted: version.isDeleted, tags: version.tags, pinned: version.isPinned,
            archived: version.isArchived)
    }

    init(_ note: LocalNote) {
        self.init(
            version: nil, text: note.isDeleted ? "" : note.text, deleted: note.isDeleted, tags: note.tags, pinned: note.isPinned,
            archived: note.isArchived)
    }
}
