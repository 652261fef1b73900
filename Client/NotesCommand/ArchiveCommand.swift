import ArgumentParser
import NotesClient

struct Archive: FlagCommand {
    static let configuration = CommandConfiguration(
        abstract: "Archive a note: `notes list` leaves it out (`--archived` lists archived notes); searches find it.",
        discussion: "The change syncs to your other devices like an edit; a text edited elsewhere meanwhile is kept too.")
    static let done = "Archived"
    static let already = "was already archived"

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func change(_ note: LocalNote, in client: NotesClient) throws -> LocalNote { try client.archive(note.id) }
}

struct Unarchive: FlagCommand {
    static let configuration = CommandConfiguration(abstract: "Bring an archived note back into `notes list`.")
    static let done = "Unarchived"
    static let already = "was not archived"

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func change(_ note: LocalNote, in client: NotesClient) throws -> LocalNote { try client.archive(note.id, false) }
}
