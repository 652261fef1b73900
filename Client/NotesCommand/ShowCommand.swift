import ArgumentParser
import NotesClient

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a note in full.",
        discussion: """
            For a conflict copy, --diff shows how it differs from its note instead of its text. --version N shows             version N of the note as the server kept it (`notes history ID` lists them; fetched from the server             when this device does not have it yet).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Flag(name: .long, help: "For a conflict copy: its differences from its note.") var diff = false
    @Option(name: .long, help: ArgumentHelp("Show this version from the note's history.", valueName: "n")) var version: Int64?

    func validate() throws {
        if diff && version != nil { throw ValidationError("Give one of --diff and --version.") }
        if let version, version < 1 { throw ValidationError("Versions are numbered from 1.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        if let version {
            try show(try await client.version(version, of: note.id), of: note, id: try client.displayID(of: note))
            return
        }
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
        let marks = (note.isPinned ? ["pinned"] : []) + (note.isArchived ? ["archived"] : [])
        if !marks.isEmpty { Console.out("Flags:    \(marks.joined(separator: ", "))") }
        if !note.tags.isEmpty { Console.out("Tags:     \(shownTags(note.tags))") }
        if !note.attachments.isEmpty {
            let lines = attachmentLines(try client.attachments(of: note.id))
            Console.out("Attached: " + lines.joined(separator: "\n          "))
        }
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

    /// A version of the note's history, as `show` shows a note.
    func show(_ version: NoteHistory.Version, of note: LocalNote, id shortID: String) throws {
        if options.json {
            try Console.json(VersionOutput(version, id: shortID))
            return
        }
        Console.out("ID:       \(shortID), version \(version.version)")
        Console.out("Edited:   \(LocalTime.format(version.editedAt))" + (version.device.map { " on \($0)" } ?? ""))
        Console.out("Saved:    \(LocalTime.format(version.savedAt)) (by the server)")
        let marks = (version.isDeleted ? ["deleted"] : []) + (version.isPinned ? ["pinned"] : []) + (version.isArchived ? ["archived"] : [])
        if !marks.isEmpty { Console.out("Flags:    \(marks.joined(separator: ", "))") }
        if !version.tags.isEmpty { Console.out("Tags:     \(shownTags(version.tags))") }
        Console.out()
        Console.out(version.isDeleted ? "(this version deleted the note)" : version.text)
    }
}
