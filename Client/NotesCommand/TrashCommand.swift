import ArgumentParser
import NotesClient

struct Trash: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List deleted notes that can be restored.",
        discussion: """
            The trash keeps the text of every note deleted on this device or another for 30 days (on this device \\
            only; the server keeps only the delete). `notes restore ID` brings one back on every device.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let trashed = try client.trash()
        if options.json {
            var outputs: [NoteOutput] = []
            for item in trashed {
                var output = NoteOutput(item.note, id: try client.displayID(of: item.note))
                output.text = item.text
                outputs.append(output)
            }
            try Console.json(outputs)
            return
        }
        if trashed.isEmpty {
            Console.out("The trash is empty.")
            return
        }
        var ids: [Int64: String] = [:]
        for item in trashed { ids[item.note.id] = try client.displayID(of: item.note) }
        let width = ids.values.reduce(0) { max($0, $1.count) }
        let now = nowMilliseconds
        let lines = trashed.map { item in
            let id = ids[item.note.id]!
            return id + String(repeating: " ", count: width - id.count + 2) + "deleted \(LocalTime.relative(item.deletedAt, now: now))  "
                + NoteSummary.title(of: item.text)
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a deleted note back from the trash, or a note back to an earlier version.",
        discussion: """
            The note comes back with the text it had when deleted, and on every device at the next sync. With \
            --version N, version N from the note's history (`notes history ID`) becomes the note's text, tags and \
            flags, as a new edit that syncs and merges like any other; this brings back a deleted note too, even \
            one deleted on another device that this device's trash never held.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (see `notes trash` for deleted notes).") var id: String
    @Option(name: .long, help: ArgumentHelp("Restore this version from the note's history.", valueName: "n")) var version: Int64?

    func validate() throws {
        if let version, version < 1 { throw ValidationError("Versions are numbered from 1.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let restored: LocalNote
        if let version {
            restored = try await client.restore(note.id, version: version)
        } else {
            restored = try client.restore(note.id)
        }
        let shortID = try client.displayID(of: restored)
        if options.json {
            try Console.json(NoteOutput(restored, id: shortID))
        } else if let version {
            Console.out(restored.revision == note.revision ? "\(shortID) is already as version \(version) was" : "Restored \(shortID) to version \(version)")
        } else {
            Console.out("Restored \(shortID)")
        }
    }
}
