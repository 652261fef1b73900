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
    /// When the note was last edited (by the editing device's clock; the same on every device).
    var editedAt: String
    /// The same time as `editedAt` (kept for scripts written before `editedAt`).
    var updatedAt: String
    /// For a conflict copy: whose text it holds (`this device`, `another device`).
    var conflictFrom: String?

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
        editedAt = NotesTime.iso8601(unixMilliseconds: note.updatedAt)
        updatedAt = editedAt
        if note.isConflict { conflictFrom = note.isConflictFromThisDevice ? "this device" : "another device" }
    }
}

/// A listing, one line a note: `ID  2 hours ago  first line  [tags]`, built as one UTF-8 buffer (no newline at
/// the end).
///
/// - Parameters:
///   - suffixes: text added to the end of a note's line, keyed by local ID.
///   - now: show times relative to this (Unix milliseconds) when given, else as dates.
func listing(_ notes: [NoteSummary], ids: [Int64: String], suffixes: [Int64: String] = [:], now: Int64? = nil) -> [UInt8] {
    let width = notes.reduce(ShortID.minimumLength) { max($0, ids[$1.id]?.utf8.count ?? 13) }
    var times = LocalTime.Cache()
    let shownTimes = notes.map { note in now.map { LocalTime.relative(note.updatedAt, now: $0) } ?? times.format(note.updatedAt) }
    let timeWidth = shownTimes.reduce(0) { max($0, $1.count) }
    var output: [UInt8] = []
    output.reserveCapacity(notes.count * 72)
    let space = UInt8(ascii: " ")
    for (index, note) in notes.enumerated() {
        if index > 0 { output.append(UInt8(ascii: "\n")) }
        let id = ids[note.id] ?? note.clientID.base32
        output.append(contentsOf: id.utf8)
        output.append(contentsOf: repeatElement(space, count: width - id.utf8.count + 2))
        output.append(contentsOf: shownTimes[index].utf8)
        output.append(contentsOf: repeatElement(space, count: timeWidth - shownTimes[index].count + 2))
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

/// Now, in Unix milliseconds (for relative times on screen; the library's clock stamps notes).
var nowMilliseconds: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

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

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a note.",
        discussion: """
            The text is the arguments joined by spaces; with none, standard input when --stdin is given or it is a \
            pipe or a file, else written in $VISUAL or $EDITOR (default vi). Text is stored byte for byte (a NUL \
            included); text that is not UTF-8 is refused with the offset of the first bad byte, and so are empty \
            notes and notes larger than the server's limit.
            """,
        aliases: ["new"])

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the text from standard input.") var stdin = false
    @Argument(help: "The note's text.") var text: [String] = []

    func validate() throws {
        if stdin && !text.isEmpty { throw ValidationError("Give the text as arguments or with --stdin, not both.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let note: LocalNote
        if !text.isEmpty {
            note = try client.add(text.joined(separator: " "))
        } else if stdin || Terminal.stdinIsPipeOrFile {
            note = try client.add(Terminal.trimmingTrailingNewlines(try Terminal.readAllStdin()))
        } else {
            try Terminal.requireEditor()
            note = try Editor.edit("") { text in try client.add(text) }
        }
        let id = try client.displayID(of: note)
        if options.json { try Console.json(NoteOutput(note, id: id)) } else { Console.out("Added \(id)") }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List notes, most recently edited first.",
        discussion: """
            Each line: the note's ID, when it was last edited (on whichever device), and its title (first line). \
            On a terminal, one screenful by default and through $PAGER (default less -FRX) when longer; piped, \
            every note. --limit 0 lists every note.
            """,
        aliases: ["ls"])

    @OptionGroup var options: GlobalOptions
    @Flag(name: .shortAndLong, help: "Include deleted notes.") var all = false
    @Option(name: .shortAndLong, help: "Show at most N notes (0: all; default: a screenful on a terminal, else all).")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit is 0 (all) or more.") }
    }

    /// The number of notes to show: `--limit`, else what fits the terminal, else all (nil).
    var effectiveLimit: Int? {
        if let limit { return limit == 0 ? nil : limit }
        guard !options.json, let size = Screen.size else { return nil }
        return max(10, size.rows - 3)
    }

    func run() async throws {
        let client = try options.openClient()
        if options.json {
            var notes = try client.notes(includeDeleted: all)
            if let limit = effectiveLimit { notes = Array(notes.prefix(limit)) }
            try printNotes(notes, ids: try client.displayIDs(), json: true, empty: "")
            return
        }
        let listing: Listing
        var more = 0
        if let limit = effectiveLimit {
            let page = try client.recent(limit: limit, includeDeleted: all)
            listing = page.listing
            more = page.total - page.listing.notes.count
        } else {
            listing = try client.listing(includeDeleted: all)
        }
        if let header = try signedOutHeader(client) { Console.out(header) }
        if listing.notes.isEmpty {
            Console.out("No notes yet. Add one with `notes add TEXT`.")
            return
        }
        var output = NotesCommand.listing(listing.notes, ids: listing.displayIDs, now: nowMilliseconds)
        if more > 0 {
            output += Array("\n\(Screen.styled("… and \(more) more (notes list --limit 0 shows all)", Screen.dim))".utf8)
        }
        Pager.show(output)
    }
}

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
            state.append("not synced: \(error.message) (\(error.code)); edit the note to try again")
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

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change a note's text.",
        discussion: """
            With --text the note gets that text, with --stdin what standard input holds; otherwise $VISUAL or \
            $EDITOR (default vi) opens on the current text. Editing a deleted note restores it. Empty text is \
            refused (use `notes rm ID`), and so is text that is not UTF-8 or is larger than the server's limit.
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
        } else if stdin {
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

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find notes containing every word, best match first.",
        discussion: """
            Words match whole words, ignoring case and accents; end a word with * to match words starting with it \
            (meet* finds meeting). Each result shows the note's ID, when it was edited, its title and the first \
            line that matches, with the words highlighted on a terminal. On a terminal the 20 best by default; \
            --limit 0 shows all.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(name: .shortAndLong, help: "Show at most N results (0: all; default: 20 on a terminal, else all).")
    var limit: Int?
    @Argument(help: "Words that must all appear.") var words: [String]

    func validate() throws {
        if SearchQuery.fts5(words) == nil {
            throw ValidationError("Give at least one word (with a letter or a digit) to search for.")
        }
        if let limit, limit < 0 { throw ValidationError("--limit is 0 (all) or more.") }
    }

    struct Output: Encodable {
        var note: NoteOutput
        /// The first matching line, as stored.
        var line: String
    }

    func run() async throws {
        let client = try options.openClient()
        let limit = limit.map { $0 == 0 ? nil : $0 } ?? (Screen.isTerminal && !options.json ? 20 : nil)
        let results = try client.search(words, limit: limit)
        if options.json {
            var outputs: [Output] = []
            for hit in results.hits {
                outputs.append(Output(note: NoteOutput(hit.note, id: try client.displayID(of: hit.note)), line: Self.plain(hit.matchingLine)))
            }
            try Console.json(outputs)
            return
        }
        if results.hits.isEmpty {
            Console.out("No note matches.")
            return
        }
        var ids: [Int64: String] = [:]
        for hit in results.hits { ids[hit.note.id] = try client.displayID(of: hit.note) }
        let width = ids.values.reduce(ShortID.minimumLength) { max($0, $1.count) }
        let now = nowMilliseconds
        var lines: [String] = []
        let columns = Screen.size?.columns ?? 100
        for hit in results.hits {
            let id = ids[hit.note.id]!
            let head = id + String(repeating: " ", count: width - id.count + 2) + LocalTime.relative(hit.note.updatedAt, now: now) + "  "
            let title = hit.note.title
            let line = Self.trimmed(hit.matchingLine.trimmingCharacters(in: .whitespaces), width: max(30, columns - width - 4))
            if Self.plain(line).trimmingCharacters(in: .whitespaces) == title {
                lines.append(head + Self.render(line))
            } else {
                lines.append(head + Screen.styled(title, Screen.bold))
                lines.append(String(repeating: " ", count: width + 2) + Self.render(line))
            }
        }
        if results.total > results.hits.count {
            lines.append(Screen.styled("… and \(results.total - results.hits.count) more (--limit 0 shows all)", Screen.dim))
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }

    /// A marked line without its marks.
    static func plain(_ line: String) -> String {
        line.replacingOccurrences(of: SearchHit.markStart, with: "").replacingOccurrences(of: SearchHit.markEnd, with: "")
    }

    /// A marked line with its matches highlighted on a terminal, plain otherwise.
    static func render(_ line: String) -> String {
        guard Screen.colors else { return plain(line) }
        return line.replacingOccurrences(of: SearchHit.markStart, with: Screen.highlight)
            .replacingOccurrences(of: SearchHit.markEnd, with: Screen.reset)
    }

    /// A long line cut around its first match to about `width` characters, with `…` where it was cut.
    static func trimmed(_ line: String, width: Int) -> String {
        let visible = plain(line)
        guard visible.count > width else { return line }
        let characters = Array(line)
        let marks: Set<Character> = [Character(SearchHit.markStart), Character(SearchHit.markEnd)]
        let first = characters.firstIndex(of: Character(SearchHit.markStart)) ?? 0
        var start = max(0, first - width / 3)
        // Do not start inside a match.
        while start > 0 && marks.contains(characters[start]) { start -= 1 }
        var shown = 0
        var end = start
        var open = false
        while end < characters.count && shown < width {
            if characters[end] == Character(SearchHit.markStart) { open = true } else if characters[end] == Character(SearchHit.markEnd) { open = false } else { shown += 1 }
            end += 1
        }
        var result = (start > 0 ? "…" : "") + String(characters[start..<end])
        if open { result += SearchHit.markEnd }
        return result + (end < characters.count ? "…" : "")
    }
}

struct Conflicts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List conflict copies, and show how they differ.",
        discussion: """
            When two devices change the same lines of a note, the server keeps one version in the note and saves \
            the other as a conflict copy, which every device receives. Each copy says whose text it holds (this \
            device's, or another device's). --diff shows each copy against its note. Resolve one with \
            `notes resolve COPY --keep note|copy|both` or `notes resolve COPY --merge` (the editor opens on both \
            texts); the copy is then deleted everywhere.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Show each copy's differences from its note.") var diff = false

    func run() async throws {
        let client = try options.openClient()
        let copies = try client.conflicts()
        var originals: [Int64: LocalNote] = [:]
        var ids: [Int64: String] = [:]
        for copy in copies {
            ids[copy.id] = try client.displayID(of: copy)
            if let original = try client.original(ofConflictCopy: copy) {
                originals[copy.id] = original
                ids[original.id] = try client.displayID(of: original)
            }
        }
        if options.json {
            try Console.json(copies.map { copy in
                var output = NoteOutput(copy, id: ids[copy.id]!, conflictOf: originals[copy.id].flatMap { ids[$0.id] })
                output.conflictFrom = copy.isConflictFromThisDevice ? "this device" : "another device"
                return output
            })
            return
        }
        if copies.isEmpty {
            Console.out("No conflicts.")
            return
        }
        var lines: [String] = []
        let now = nowMilliseconds
        for copy in copies {
            let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
            let of = originals[copy.id].map { "copy of \(ids[$0.id]!)" } ?? "copy of a note not on this device"
            lines.append("\(ids[copy.id]!)  \(LocalTime.relative(copy.updatedAt, now: now))  \(copy.title)  [\(of), \(whose)]")
            if diff, let original = originals[copy.id] {
                lines += conflictDiff(note: original, noteID: ids[original.id]!, copy: copy, copyID: ids[copy.id]!)
                lines.append("")
            }
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }
}

/// A copy against its note, line by line: `-` lines only in the note, `+` lines only in the copy, with three lines
/// of context around each change (red and green on a terminal).
func conflictDiff(note: LocalNote, noteID: String, copy: LocalNote, copyID: String) -> [String] {
    let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
    var output = [
        Screen.styled("--- \(noteID) (the note, as the server kept it)", Screen.bold),
        Screen.styled("+++ \(copyID) (the conflict copy: \(whose))", Screen.bold),
    ]
    let lines = LineDiff.lines(from: note.text, to: copy.text)
    let changed = lines.indices.filter { if case .same = lines[$0] { false } else { true } }
    guard !changed.isEmpty else { return output + ["  (the texts are the same)"] }
    var shown = Set<Int>()
    for index in changed { for near in max(0, index - 3)...min(lines.count - 1, index + 3) { shown.insert(near) } }
    var previous: Int?
    for index in shown.sorted() {
        if let previous, index > previous + 1 { output.append(Screen.styled("  …", Screen.dim)) }
        switch lines[index] {
        case .same(let text): output.append("  " + text)
        case .removed(let text): output.append(Screen.styled("- " + text, Screen.red))
        case .added(let text): output.append(Screen.styled("+ " + text, Screen.green))
        }
        previous = index
    }
    return output
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
        /// Live notes kept on this device but hidden: other accounts' (and, signed in, those written signed out).
        var setAside: Int
        var pending: Int
        var failed: Int
        var conflicts: Int
        var lastSync: String?
        /// The last sync stopped with changes still waiting on the server.
        var syncUnfinished: Bool
        var home: String
        var origin: String
        /// The account's storage on its server (signed in and the server answered).
        var storage: Storage?

        struct Storage: Encodable {
            var notes: Int64
            var textBytes: Int64
            var replayTextBytes: Int64
            var maxNotes: Int64
            var maxTextBytes: Int64
        }
    }

    func run() async throws {
        let client = try options.openClient()
        let status = try client.status()
        let aside = try client.setAsideNoteCount()
        // The account's usage and limits, from its server (one try; status stays useful offline).
        var storage: Result<StorageReport?, NotesError>?
        if status.account != nil {
            do {
                storage = .success(try await client.storageUsage())
            } catch {
                storage = .failure(error)
            }
        }
        if options.json {
            try Console.json(
                Output(
                    signedIn: status.account != nil, username: status.account?.username,
                    accountID: status.account?.accountID.description, server: status.serverURL, notes: status.notes,
                    deletedNotes: status.deletedNotes, setAside: aside, pending: status.pending, failed: status.failed,
                    conflicts: status.conflicts, lastSync: status.lastSyncAt.map { NotesTime.iso8601(unixMilliseconds: $0) },
                    syncUnfinished: status.pullUnfinished, home: options.homeURL.path, origin: status.origin.base32,
                    storage: (try? storage?.get())??.map {
                        Output.Storage(
                            notes: $0.notes, textBytes: $0.textBytes, replayTextBytes: $0.replayTextBytes, maxNotes: $0.maxNotes,
                            maxTextBytes: $0.maxTextBytes)
                    }))
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
        if aside > 0 {
            Console.out("Set aside:  \(plural(aside, "note")) hidden on this device (other accounts', or written while signed out)")
        }
        let waiting = status.pending - status.failed
        var pending = waiting == 0 ? "nothing to send" : plural(waiting, "note") + " with changes to send"
        if status.pullUnfinished { pending += "; more changes waiting on the server" }
        Console.out("Pending:    " + pending)
        if status.failed > 0 {
            Console.out("Refused:    \(plural(status.failed, "note")) the server refused, not synced (see `notes sync`); edit them to retry")
        }
        if status.conflicts > 0 {
            Console.out("Conflicts:  \(status.conflicts) (see `notes conflicts`)")
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let last = status.lastSyncAt.map { LocalTime.relative($0, now: now) }
        if status.pullUnfinished {
            Console.out("Last sync:  not finished (interrupted while receiving" + (last.map { "; last complete one \($0)" } ?? "") + "); run `notes sync` to finish")
        } else {
            Console.out("Last sync:  " + (last ?? "never"))
        }
        switch storage {
        case .success(let report?):
            let bytes = ByteCountFormatter.string(fromByteCount: report.textBytes, countStyle: .binary)
            let maxBytes = ByteCountFormatter.string(fromByteCount: report.maxTextBytes, countStyle: .binary)
            var line = "Server:     \(report.notes) of \(report.maxNotes) notes (deleted ones included), \(bytes) of \(maxBytes) of text"
            if report.replayTextBytes > 0 {
                // Kept to answer retried pushes exactly; counted in the same limit, freed as they expire.
                line += " (and " + ByteCountFormatter.string(fromByteCount: report.replayTextBytes, countStyle: .binary)
                    + " kept for replays)"
            }
            Console.out(line)
        case .failure(let error) where error.code == .signedOutByServer:
            Console.out("Server:     signed out by the server (session revoked or account deleted); your notes are kept")
        case .failure(let error):
            Console.out("Server:     usage unknown (\(error.message))")
        case .success(nil), nil:
            break
        }
        Console.out("Data:       \(options.homeURL.path)")
    }
}
