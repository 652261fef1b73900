import ArgumentParser
import NotesClient

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List notes: pinned ones first, then the most recently edited.",
        discussion: """
            Each line: the note's ID, when it was last edited (on whichever device), its title (first line), \
            [pinned] and the like, and its tags. Archived notes are left out: --archived lists only them, --all \
            every note, archived and deleted ones too. --tag TAG (repeated: every one of them) lists the notes \
            with those tags. On a terminal, one screenful by default and through $PAGER (default less -FRX) when \
            longer; piped, every note. --limit 0 lists every note.
            """,
        aliases: ["ls"])

    @OptionGroup var options: GlobalOptions
    @Flag(name: .shortAndLong, help: "Every note: archived and deleted ones too.") var all = false
    @Flag(name: .long, help: "Only archived notes.") var archived = false
    @Option(name: [.customShort("t"), .customLong("tag")], help: ArgumentHelp("Only notes with this tag (repeat: all of them).", valueName: "tag"))
    var tags: [String] = []
    @Option(name: .shortAndLong, help: "Show at most N notes (0: all; default: a screenful on a terminal, else all).")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit is 0 (all) or more.") }
        if all && archived { throw ValidationError("--all lists archived notes already; give one of --all and --archived.") }
    }

    /// Which notes the options select.
    var filter: ListingFilter {
        ListingFilter(archived: all ? .included : archived ? .only : .hidden, includeDeleted: all, tags: tags)
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
            var notes = try client.notes(filter)
            if let limit = effectiveLimit { notes = Array(notes.prefix(limit)) }
            try printNotes(notes, ids: try client.displayIDs(), json: true, empty: "")
            return
        }
        let listing: Listing
        var more = 0
        if let limit = effectiveLimit {
            let page = try client.recent(limit: limit, filter: filter)
            listing = page.listing
            more = page.total - page.listing.notes.count
        } else {
            listing = try client.listing(filter)
        }
        if let header = try signedOutHeader(client) { Console.out(header) }
        if listing.notes.isEmpty {
            Console.out(emptyMessage)
            return
        }
        var output = NotesCommand.listing(listing.notes, ids: listing.displayIDs, now: nowMilliseconds)
        if more > 0 {
            output += Array("\n\(Screen.styled("… and \(more) more (notes list --limit 0 shows all)", Screen.dim))".utf8)
        }
        Pager.show(output)
    }

    /// What an empty listing says.
    var emptyMessage: String {
        if !tags.isEmpty { return "No note has \(tags.count == 1 ? "the tag" : "every one of the tags") \(shownTags(tags))." }
        if archived { return "No archived notes." }
        return "No notes yet. Add one with `notes add TEXT`."
    }
}

/// The line a listing starts with while signed out: whose notes are on show (nil when signed in, or when no account
/// was ever signed in to here and every note is unowned).
func signedOutHeader(_ client: NotesClient) throws -> String? {
    guard try client.account() == nil, let shown = try client.shownAccount() else { return nil }
    let aside = try client.setAsideNoteCount()
    let others = aside > 0 ? " (\(plural(aside, "note")) of other accounts set aside)" : ""
    return "Signed out: showing \(shown.display)'s notes and those written while signed out\(others)."
}
