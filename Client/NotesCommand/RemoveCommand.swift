import ArgumentParser
import NotesClient

struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete a note.",
        discussion: """
            The delete syncs to your other devices; if another device edited the note meanwhile, the edit wins and \
            the sync says so. The text stays in the trash for 30 days: `notes trash`, `notes restore ID`.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let deleted = try client.delete(note.id)
        let shortID = try client.displayID(of: deleted)
        if options.json {
            try Console.json(NoteOutput(deleted, id: shortID))
        } else {
            Console.out(note.isDeleted ? "\(shortID) was already deleted" : "Deleted \(shortID)")
        }
    }
}
