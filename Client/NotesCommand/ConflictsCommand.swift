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

/// A copy against its note, line by line (``textDiff(from:to:oldLabel:newLabel:)``).
func conflictDiff(note: LocalNote, noteID: String, copy: LocalNote, copyID: String) -> [String] {
    let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
    return textDiff(
        from: note.text, to: copy.text, oldLabel: "\(noteID) (the note, as the server kept it)",
        newLabel: "\(copyID) (the conflict copy: \(whose))")
}
