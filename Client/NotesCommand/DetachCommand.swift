import ArgumentParser
import NotesClient

struct Detach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Take an attachment off a note.",
        discussion: """
            The change syncs like an edit (another device's attachment added meanwhile stays). The note's history \
            keeps the versions that had it.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Argument(help: "The attachment's name (`notes attachments ID` lists them).") var name: String

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let detached = try client.detach(name, from: note.id)
        let shortID = try client.displayID(of: detached)
        if options.json {
            try Console.json(NoteOutput(detached, id: shortID))
        } else {
            Console.out("Detached \(name) from \(shortID)")
        }
    }
}
