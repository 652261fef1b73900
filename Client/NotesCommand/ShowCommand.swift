import ArgumentParser
import NotesClient

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a note in full.",
        discussion: "For a conflict copy, --diff shows how it differs from its note instead of its text.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Flag(name: .long, help: "For a conflict copy: its differences from its note.") var diff = false

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let shortID = try client.displayID(of: note)
        let source = try client.original(ofConflictCopy: note)
        let original = try source.map { source throws(NotesError) in try client.displayID(of: source) }
        if diff && !note.isConflict {
            throw CommandFailure(message: "\(shortID) is not a conflict copy; --diff compares a copy with its note (see `notes conflicts`)")
        }
        if options.json {
            try Console.json(NoteOutput(note, id: shortID, conflictOf: original))
            return
        }
        let now = nowMilliseconds
        Console.out("ID:       \(shortID)")
        Console.out("Created:  \(LocalTime.format(note.createdAt))")
        Console.out("Edited:   \(LocalTime.format(note.updatedAt)) (\(LocalTime.relative(note.updatedAt, now: now)))")
        var state: [String] = []
        if note.isDeleted { state.append("deleted (`notes restore \(shortID)` brings it back)") }
        if let error = note.pushError {
            state.append("not synced: \(error.message) (\(error.code)); \(error.remedy)")
        } else if note.isDirty {
            state.append("changes not synced yet")
        } else if note.serverID != nil {
            state.append("synced")
        } else {
            state.append("local only")
        }
        if note.isConflict {
            let whose = note.isConflictFromThisDevice ? "this device's text" : "another device's text"
            state.append("conflict copy" + (original.map { " of \($0)" } ?? "") + ", \(whose)")
        }
        Console.out("Status:   \(state.joined(separator: "; "))")
        Console.out()
        if diff {
            guard let source, let original else {
                throw CommandFailure(message: "the note \(shortID) was split from is not on this device")
            }
            Console.out(conflictDiff(note: source, noteID: original, copy: note, copyID: shortID).joined(separator: "\n"))
        } else {
            Console.out(note.text)
        }
    }
}
