import ArgumentParser
import NoteMerge
import NotesClient

struct Conflicts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List conflict copies, and show how they differ.",
        discussion: """
            When two devices change the same lines of a note, the server keeps one version in the note and saves \
            the other as a conflict copy, which every device receives. Each copy says whose text it holds (this \
            device's, or another device's). --diff shows each copy against its note. Resolve one with \
            `notes resolve COPY --keep note|copy|both` or `notes resolve COPY --merge` (the editor opens on both \
            texts); the copy is then deleted everywhere.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Show each copy's differences from its note.") var diff = false

    func run() async throws {
        let client = try options.openClient()
        let copies = try client.conflicts()
        var originals: [Int64: LocalNote] = [:]
        var ids: [Int64: String] = [:]
        for copy in copies {
            ids[copy.id] = try client.displayID(of: copy)
            if let original = try client.original(ofConflictCopy: copy) {
                originals[copy.id] = original
                ids[original.id] = try client.displayID(of: original)
            }
        }
        if options.json {
            try Console.json(copies.map { copy in
                var output = NoteOutput(copy, id: ids[copy.id]!, conflictOf: originals[copy.id].flatMap { ids[$0.id] })
                output.conflictFrom = copy.isConflictFromThisDevice ? "this device" : "another device"
                return output
            })
            return
        }
        if copies.isEmpty {
            Console.out("No conflicts.")
            return
        }
        var lines: [String] = []
        let now = nowMilliseconds
        for copy in copies {
            let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
            let of = originals[copy.id].map { "copy of \(ids[$0.id]!)" } ?? "copy of a note not on this device"
            lines.append("\(ids[copy.id]!)  \(LocalTime.relative(copy.updatedAt, now: now))  \(copy.title)  [\(of), \(whose)]")
            if diff, let original = originals[copy.id] {
                lines += conflictDiff(note: original, noteID: ids[original.id]!, copy: copy, copyID: ids[copy.id]!)
                lines.append("")
            }
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }
}

/// A copy against its note, line by line: `-` lines only in the note, `+` lines only in the copy, with three lines
/// of context around each change (red and green on a terminal).
func conflictDiff(note: LocalNote, noteID: String, copy: LocalNote, copyID: String) -> [String] {
    let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
    var output = [
        Screen.styled("--- \(noteID) (the note, as the server kept it)", Screen.bold),
        Screen.styled("+++ \(copyID) (the conflict copy: \(whose))", Screen.bold),
    ]
    let lines = LineDiff.lines(from: note.text, to: copy.text)
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
