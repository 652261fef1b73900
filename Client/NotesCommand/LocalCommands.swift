import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

/// A note as `--json` prints it.
struct NoteOutput: Encodable {
    /// The short ID people type.
    var id: String
    /// The full client ID, decimal (the wire form) and base32.
    var clientID: String
    var clientIDBase32: String
    var origin: String
    var serverID: String?
    var text: String
    var deleted: Bool
    /// Has changes not yet acknowledged by a server.
    var pending: Bool
    var conflict: Bool
    /// For a conflict copy: the short ID of the note it was split from, when that note is on this device.
    var conflictOf: String?
    var error: PushError?
    var createdAt: String
    var updatedAt: String

    init(_ note: LocalNote, id: String, conflictOf: String? = nil) {
        self.id = id
        clientID = note.clientID.description
        clientIDBase32 = note.clientID.base32
        origin = note.origin.description
        serverID = note.serverID?.description
        text = note.text
        deleted = note.isDeleted
        pending = note.isDirty
        conflict = note.isConflict
        self.conflictOf = conflictOf
        error = note.pushError
        createdAt = NotesTime.iso8601(unixMilliseconds: note.createdAt)
        updatedAt = NotesTime.iso8601(unixMilliseconds: note.updatedAt)
    }
}

/// A listing, one line a note: `ID  2026-11-22 10:15  first line  [tags]`, built as one UTF-8 buffer (no newline at
/// the end).
///
/// - Parameter suffixes: text added to the end of a note's line, keyed by local ID.
func listing(_ notes: [NoteSummary], ids: [Int64: String], suffixes: [Int64: String] = [:]) -> [UInt8] {
    let width = notes.reduce(ShortID.minimumLength) { max($0, ids[$1.id]?.utf8.count ?? 13) }
    var times = LocalTime.Cache()
    var output: [UInt8] = []
    output.reserveCapacity(notes.count * 72)
    let space = UInt8(ascii: " ")
    for (index, note) in notes.enumerated() {
        if index > 0 { output.append(UInt8(ascii: "\n")) }
        let id = ids[note.id] ?? note.clientID.base32
        output.append(contentsOf: id.utf8)
        output.append(contentsOf: repeatElement(space, count: width - id.utf8.count + 2))
        output.append(contentsOf: times.format(note.updatedAt).utf8)
        output.append(space)
        output.append(space)
        if note.isDeleted {
            output.append(contentsOf: "(deleted)".utf8)
        } else {
            output.append(contentsOf: note.title.utf8)
            if note.isConflict { output.append(contentsOf: "  [conflict copy]".utf8) }
        }
        if let code = note.pushErrorCode { output.append(contentsOf: "  [not synced: \(code)]".utf8) }
        if let suffix = suffixes[note.id] { output.append(contentsOf: suffix.utf8) }
    }
    return output
}

/// Prints notes as a listing or JSON.
func printNotes(_ notes: [LocalNote], ids: [Int64: String], json: Bool, empty: String) throws {
    if json {
        try Console.json(notes.map { NoteOutput($0, id: ids[$0.id] ?? $0.clientID.base32) })
    } else if notes.isEmpty {
        Console.out(empty)
    } else {
        Console.out(bytes: listing(notes.map(NoteSummary.init), ids: ids))
    }
}

/// Text for `add`/`edit`: the arguments, else stdin when it is not a terminal, else the editor.
func noteText(arguments: [String], initial: String = "") throws -> String {
    if !arguments.isEmpty { return arguments.joined(separator: " ") }
    if !Console.stdinIsTerminal { return Terminal.trimmingTrailingNewlines(Terminal.readAllStdin()) }
    return Terminal.trimmingTrailingNewlines(try Terminal.edit(initial))
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a note.",
        discussion: """
            The text is the arguments joined by spaces; with none, it is read from standard input when that is not \
            a terminal, else written in $VISUAL or $EDITOR (default vi). Empty notes are refused.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's text.") var text: [String] = []

    func run() async throws {
        let text = try noteText(arguments: text)
        let client = try options.openClient()
        let note = try client.add(text)
        let id = try client.displayID(of: note)
        if options.json { try Console.json(NoteOutput(note, id: id)) } else { Console.out("Added \(id)") }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List notes, most recently changed first.")

    @OptionGroup var options: GlobalOptions
    @Flag(name: .shortAndLong, help: "Include deleted notes.") var all = false

    func run() async throws {
        let client = try options.openClient()
        if options.json {
            try printNotes(try client.notes(includeDeleted: all), ids: try client.displayIDs(), json: true, empty: "")
            return
        }
        let listing = try client.listing(includeDeleted: all)
        if let header = try signedOutHeader(client) { Console.out(header) }
        if listing.notes.isEmpty {
            Console.out("No notes yet. Add one with `notes add TEXT`.")
            return
        }
        Console.out(bytes: NotesCommand.listing(listing.notes, ids: listing.displayIDs))
    }
}

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a note in full.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let shortID = try client.displayID(of: note)
        var original: String?
        if let conflictOf = note.conflictOf, let source = try client.note(serverID: conflictOf) {
            original = try client.displayID(of: source)
        }
        if options.json {
            try Console.json(NoteOutput(note, id: shortID, conflictOf: original))
            return
        }
        Console.out("ID:       \(shortID)")
        Console.out("Created:  \(LocalTime.format(note.createdAt))")
        Console.out("Updated:  \(LocalTime.format(note.updatedAt))")
        var state: [String] = []
        if note.isDeleted { state.append("deleted") }
        if let error = note.pushError {
            state.append("not synced: \(error.message) (\(error.code)); edit the note to try again")
        } else if note.isDirty {
            state.append("changes not synced yet")
        } else if note.serverID != nil {
            state.append("synced")
        } else {
            state.append("local only")
        }
        if note.isConflict { state.append("conflict copy" + (original.map { " of \($0)" } ?? "")) }
        Console.out("Status:   \(state.joined(separator: "; "))")
        Console.out()
        Console.out(note.text)
    }
}

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change a note's text.",
        discussion: """
            With --text the note gets that text; otherwise standard input when it is not a terminal, else \
            $VISUAL or $EDITOR on the current text. Editing a deleted note restores it. Empty text is refused \
            (use `notes rm ID`).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Option(name: .long, help: "The new text (instead of the editor).") var text: String?

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let newText = try text ?? noteText(arguments: [], initial: note.text)
        let edited = try client.edit(note.id, text: newText)
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

struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete a note.",
        discussion: "The delete syncs to your other devices; if another device edited the note meanwhile, the edit wins.")

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

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find notes containing every word (case-insensitive).")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "Words that must all appear.") var words: [String]

    func validate() throws {
        if words.allSatisfy({ $0.allSatisfy(\.isWhitespace) }) {
            throw ValidationError("Give at least one word to search for.")
        }
    }

    func run() async throws {
        let client = try options.openClient()
        let notes = try client.search(words)
        try printNotes(notes, ids: try client.displayIDs(), json: options.json, empty: "No note matches.")
    }
}

struct Conflicts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List conflict copies.",
        discussion: """
            When two devices change the same lines of a note, the server keeps one version in the note and saves \
            the other as a conflict copy. Merge by hand with `notes edit`, then `notes rm` the copy.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let copies = try client.conflicts()
        let ids = try client.displayIDs()
        var originals: [Int64: String] = [:]
        for copy in copies {
            if let source = copy.conflictOf, let original = try client.note(serverID: source) {
                originals[copy.id] = ids[original.id]
            }
        }
        if options.json {
            try Console.json(copies.map { NoteOutput($0, id: ids[$0.id] ?? $0.clientID.base32, conflictOf: originals[$0.id]) })
            return
        }
        if copies.isEmpty {
            Console.out("No conflicts.")
            return
        }
        let suffixes = originals.mapValues { "  (copy of \($0))" }
        Console.out(bytes: listing(copies.map(NoteSummary.init), ids: ids, suffixes: suffixes))
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the account, pending changes and last sync.")

    @OptionGroup var options: GlobalOptions

    struct Output: Encodable {
        var signedIn: Bool
        var username: String?
        var accountID: String?
        var server: String?
        var notes: Int
        var deletedNotes: Int
        var pending: Int
        var failed: Int
        var conflicts: Int
        var lastSync: String?
        var home: String
        var origin: String
    }

    func run() async throws {
        let client = try options.openClient()
        let status = try client.status()
        if options.json {
            try Console.json(
                Output(
                    signedIn: status.account != nil, username: status.account?.username,
                    accountID: status.account?.accountID.description, server: status.serverURL, notes: status.notes,
                    deletedNotes: status.deletedNotes, pending: status.pending, failed: status.failed,
                    conflicts: status.conflicts, lastSync: status.lastSyncAt.map { NotesTime.iso8601(unixMilliseconds: $0) },
                    home: options.homeURL.path, origin: status.origin.base32))
            return
        }
        if let account = status.account {
            Console.out("Account:    \(account.username) on \(account.serverURL)")
        } else if let server = status.serverURL {
            Console.out("Account:    not signed in (last server: \(server)); sign in with `notes login`")
        } else {
            Console.out("Account:    not signed in; create an account with `notes signup` or sign in with `notes login`")
        }
        Console.out("Notes:      \(status.notes)" + (status.deletedNotes > 0 ? " (and \(status.deletedNotes) deleted)" : ""))
        Console.out("Pending:    " + (status.pending == 0 ? "nothing to sync" : plural(status.pending, "note") + " with unsynced changes"))
        if status.failed > 0 {
            Console.out("Refused:    \(plural(status.failed, "note")) the server refused (see `notes list`); edit them to retry")
        }
        if status.conflicts > 0 {
            Console.out("Conflicts:  \(status.conflicts) (see `notes conflicts`)")
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        Console.out("Last sync:  " + (status.lastSyncAt.map { LocalTime.relative($0, now: now) } ?? "never"))
        Console.out("Data:       \(options.homeURL.path)")
    }
}
