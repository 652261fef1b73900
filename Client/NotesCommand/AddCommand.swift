import ArgumentParser
import NotesClient

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a note.",
        discussion: """
            The text is the arguments joined by spaces; with none, standard input when --stdin is given or it is a \
            pipe or a file, else written in $VISUAL or $EDITOR (default vi). Text is stored byte for byte (a NUL \
            included); text that is not UTF-8 is refused with the offset of the first bad byte, and so are empty \
            notes and notes larger than the server's limit. -t TAG (repeated) tags the note: \(Tags.rule).
            """,
        aliases: ["new"])

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the text from standard input.") var stdin = false
    @Option(name: [.customShort("t"), .customLong("tag")], help: ArgumentHelp("Tag the note (repeat for more).", valueName: "tag"))
    var tags: [String] = []
    @Argument(help: "The note's text.") var text: [String] = []

    func validate() throws {
        if stdin && !text.isEmpty { throw ValidationError("Give the text as arguments or with --stdin, not both.") }
    }

    func run() async throws {
        _ = try Tags.validatedSet(tags)  // before the editor opens
        let client = try options.openClient()
        let note: LocalNote
        if !text.isEmpty {
            note = try client.add(text.joined(separator: " "), tags: tags)
        } else if stdin || Terminal.stdinIsPipeOrFile {
            note = try client.add(Terminal.trimmingTrailingNewlines(try Terminal.readAllStdin()), tags: tags)
        } else {
            try Terminal.requireEditor()
            note = try Editor.edit("") { text in try client.add(text, tags: tags) }
        }
        let id = try client.displayID(of: note)
        if options.json { try Console.json(NoteOutput(note, id: id)) } else { Console.out("Added \(id)") }
    }
}
