import ArgumentParser
import NotesClient

/// `notes pin`, `unpin`, `archive`, `unarchive`: one flag of a note set or cleared.
protocol FlagCommand: AsyncParsableCommand {
    var options: GlobalOptions { get }
    var id: String { get }
    /// Sets the flag (or clears it) on the note and returns it.
    func change(_ note: LocalNote, in client: NotesClient) throws -> LocalNote
    /// What the command says it did, and what it says when the note was so already.
    static var done: String { get }
    static var already: String { get }
}

extension FlagCommand {
    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let changed = try change(note, in: client)
        let shortID = try client.displayID(of: changed)
        if options.json {
            try Console.json(NoteOutput(changed, id: shortID))
        } else {
            Console.out(changed.revision == note.revision ? "\(shortID) \(Self.already)" : "\(Self.done) \(shortID)")
        }
    }
}

struct Pin: FlagCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pin a note: `notes list` shows pinned notes first.",
        discussion: "The pin syncs to your other devices like an edit; a text edited elsewhere meanwhile is kept too.")
    static let done = "Pinned"
    static let already = "was already pinned"

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func change(_ note: LocalNote, in client: NotesClient) throws -> LocalNote { try client.pin(note.id) }
}

struct Unpin: FlagCommand {
    static let configuration = CommandConfiguration(abstract: "Unpin a note.")
    static let done = "Unpinned"
    static let already = "was not pinned"

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func change(_ note: LocalNote, in client: NotesClient) throws -> LocalNote { try client.pin(note.id, false) }
}
