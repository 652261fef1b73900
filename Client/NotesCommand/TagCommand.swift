import ArgumentParser
import NotesClient

struct TagNote: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tag", abstract: "Add tags to a note and take tags off it.",
        discussion: """
            `notes tag ID +work -home` adds the tag work and takes off home (a tag without + or - is added; \
            `notes tag ID -- -h` takes off a tag named h, which alone would ask for this help). Tags \
            are compared without case: a note has one tag per name, shown as first written. The change syncs like \
            an edit, and merges with other devices' changes: a tag added here and another taken off elsewhere both \
            take effect. Tags: \(Tags.rule).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("+TAG to add, -TAG to take off.", valueName: "+tag|-tag"))
    var changes: [String] = []

    /// The tags to add and to take off.
    var parsed: (adding: [String], removing: [String]) {
        var adding: [String] = []
        var removing: [String] = []
        var changes = self.changes
        if let terminator = changes.firstIndex(of: "--") { changes.remove(at: terminator) }  // kept by `.allUnrecognized`
        for change in changes {
            if change.hasPrefix("-") {
                removing.append(String(change.dropFirst()))
            } else {
                adding.append(change.hasPrefix("+") ? String(change.dropFirst()) : change)
            }
        }
        return (adding, removing)
    }

    func validate() throws {
        if changes.isEmpty { throw ValidationError("Give the tags to add (+TAG) or take off (-TAG).") }
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let (adding, removing) = parsed
        let tagged = try client.tag(note.id, adding: adding, removing: removing)
        let shortID = try client.displayID(of: tagged)
        if options.json {
            try Console.json(NoteOutput(tagged, id: shortID))
        } else if tagged.revision == note.revision {
            Console.out("No changes to \(shortID)" + (tagged.tags.isEmpty ? "" : ": \(shownTags(tagged.tags))"))
        } else {
            Console.out("Tagged \(shortID): " + (tagged.tags.isEmpty ? "no tags" : shownTags(tagged.tags)))
        }
    }
}

struct TagList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tags", abstract: "List every tag with how many notes have it.",
        discussion: """
            Tags of live notes (archived ones included), in alphabetical order, each shown as written on the \
            oldest note that has it. `notes list --tag TAG` lists a tag's notes; `notes search tag:TAG WORD` \
            searches them.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let counts = try client.tagCounts()
        if options.json {
            try Console.json(counts)
            return
        }
        if counts.isEmpty {
            Console.out("No tags yet. Tag a note with `notes tag ID +TAG` (or `notes add -t TAG ...`).")
            return
        }
        let width = counts.reduce(0) { max($0, $1.name.count) }
        Pager.show(Array(counts.map { $0.name + String(repeating: " ", count: width - $0.name.count + 2) + plural($0.notes, "note") }
            .joined(separator: "\n").utf8))
    }
}
