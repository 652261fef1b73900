import ArgumentParser
import MiniFlake
import NoteMerge
import NotesClient

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve a conflict: keep the note, the copy or both, or merge them in the editor.",
        discussion: """
            COPY is a conflict copy's ID (see `notes conflicts`). --keep note keeps the note as it is; --keep copy \\
            gives the note the copy's text; --keep both makes the copy an ordinary note; --merge opens $VISUAL or \\
            $EDITOR on the note with each differing stretch between conflict markers, and the saved text becomes \\
            the note's. In every case the copy is deleted, on every device once synced.
            """)

    enum Keep: String, ExpressibleByArgument, CaseIterable {
        case note, copy, both
    }

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The conflict copy's ID (any unique prefix).") var id: String
    @Option(name: .long, help: "What to keep: note, copy or both.") var keep: Keep?
    @Flag(name: .long, help: "Merge the two texts in the editor.") var merge = false

    func validate() throws {
        if (keep == nil) == !merge { throw ValidationError("Say what to keep with --keep note|copy|both, or --merge.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let copy = try client.note(byPrefix: id)
        let copyID = try client.displayID(of: copy)
        guard copy.isConflict && !copy.isDeleted else {
            throw CommandFailure(message: "\(copyID) is not a conflict copy (see `notes conflicts`)")
        }
        let result: LocalNote?
        switch keep {
        case .note: result = try client.resolveConflict(copy: copy.id, .keepNote)
        case .copy: result = try client.resolveConflict(copy: copy.id, .keepCopy)
        case .both: result = try client.resolveConflict(copy: copy.id, .keepBoth)
        case nil:
            guard let original = try client.original(ofConflictCopy: copy), !original.isDeleted else {
                throw CommandFailure(message: "the note \(copyID) was split from is not on this device; use --keep both")
            }
            let originalID = try client.displayID(of: original)
            let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
            let draft = LineDiff.mergeDraft(
                original.text, copy.text, oldLabel: "\(originalID) (the note)", newLabel: "\(copyID) (the copy: \(whose))")
            try Terminal.requireEditor()
            result = try Editor.edit(draft) { text in
                if LineDiff.hasConflictMarkers(text) {
                    throw CommandFailure(message: "the merged text still has conflict markers (<<<<<<<, =======, >>>>>>>); nothing changed")
                }
                return try client.resolveConflict(copy: copy.id, .merged(text))
            }
        }
        if options.json {
            try Console.json(result.map { NoteOutput($0, id: (try? client.displayID(of: $0)) ?? $0.clientID.base32) })
            return
        }
        let kept = try result.map { note throws(NotesError) in try client.displayID(of: note) }
        switch keep {
        case .note: Console.out("Kept the note" + (kept.map { " \($0)" } ?? "") + "; deleted the copy \(copyID).")
        case .copy: Console.out("\(kept ?? "The note") now has the copy's text; deleted the copy \(copyID).")
        case .both: Console.out("The copy's text is now the note \(kept ?? "?"); deleted the copy \(copyID).")
        case nil: Console.out("Merged into \(kept ?? "the note"); deleted the copy \(copyID).")
        }
    }
}
