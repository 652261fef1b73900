import ArgumentParser
import NotesClient

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change a note's text.",
        discussion: """
            With --text the note gets that text; with --stdin, or when standard input is a pipe or a file (as for \
            `notes add`), what standard input holds; otherwise $VISUAL or $EDITOR (default vi) opens on the current \
            text. Editing a deleted note restores it. Empty text is refused (use `notes rm ID`), an empty pipe \
            included, and so is text that is not UTF-8 or is larger than the server's limit; a refused text \
            changes nothing.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Option(name: .long, help: "The new text (instead of the editor).") var text: String?
    @Flag(name: .long, help: "Read the new text from standard input (instead of the editor).") var stdin = false

    func validate() throws {
        if stdin && text != nil { throw ValidationError("Give the text with --text or --stdin, not both.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let edited: LocalNote
        if let text {
            edited = try client.edit(note.id, text: text)
        } else if stdin || Terminal.stdinIsPipeOrFile {
            edited = try client.edit(note.id, text: Terminal.trimmingTrailingNewlines(try Terminal.readAllStdin()))
        } else {
            try Terminal.requireEditor()
            edited = try Editor.edit(note.text) { text in try client.edit(note.id, text: text) }
        }
        let shortID = try client.displayID(of: edited)
        if options.json {
            try Console.json(NoteOutput(edited, id: shortID))
        } else if edited.revision == note.revision {
            Console.out("No changes to \(shortID)")
        } else {
            Console.out((note.isDeleted ? "Restored " : "Updated ") + shortID)
        }
    }
}
