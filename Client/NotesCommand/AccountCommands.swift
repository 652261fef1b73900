import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

/// `--json` form of a sync report.
struct SyncOutput: Encodable {
    struct Failure: Encodable {
        var id: String
        var code: String
        var message: String
    }

    var pushed: Int
    var created: Int
    var reconciled: Int
    var matched: Int
    var updated: Int
    var unchanged: Int
    var merged: Int
    var conflicts: Int
    var deleted: Int
    var kept: Int
    var replayed: Int
    var pulled: Int
    var applied: Int
    var pending: Int
    /// Refused by this sync.
    var failures: [Failure]
    /// Every note the server refuses (this sync's and earlier ones not edited since).
    var refused: [Failure]
    /// Notes whose edit overlapped another device's: this device's text is in a conflict copy.
    var conflictNotes: [String]
    /// Conflict copies that arrived from other devices.
    var pulledConflictCopies: Int
    /// Notes deleted here that came back because another device edited them.
    var undeleted: [String]

    init(_ report: SyncReport, ids: [Int64: String]) {
        pushed = report.pushed
        created = report.created
        reconciled = report.reconciled
        matched = report.matched
        updated = report.updated
        unchanged = report.unchanged
        merged = report.merged
        conflicts = report.conflicts
        deleted = report.deleted
        kept = report.kept
        replayed = report.replayed
        pulled = report.pulled
        applied = report.applied
        pending = report.pending
        func failure(_ failure: PushFailure) -> Failure {
            Failure(id: ids[failure.noteID] ?? failure.clientID.base32, code: failure.error.code, message: failure.error.message)
        }
        failures = report.failures.map(failure)
        refused = report.refused.map(failure)
        conflictNotes = report.conflictNotes.map { ids[$0] ?? String($0) }
        pulledConflictCopies = report.pulledConflictCopies
        undeleted = report.undeleted.map { ids[$0] ?? String($0) }
    }
}

/// The display IDs a report names, looked up one by one (a sync may touch few of many notes).
func reportIDs(_ report: SyncReport, client: NotesClient) throws -> [Int64: String] {
    var ids: [Int64: String] = [:]
    let named = report.failures.map(\.noteID) + report.refused.map(\.noteID) + report.conflictNotes + report.undeleted
    for noteID in Set(named) {
        if let note = try? client.note(noteID) { ids[noteID] = try client.displayID(of: note) }
    }
    return ids
}

/// What a push did, in words whose counts add up to the changes sent.
func pushSummary(_ report: SyncReport) -> String {
    guard report.pushed > 0 else { return "nothing to send" }
    var details: [String] = []
    if report.created > 0 { details.append("\(report.created) new") }
    if report.reconciled > 0 { details.append("\(report.reconciled) matched to notes the server had") }
    if report.updated > 0 { details.append("\(report.updated) updated") }
    if report.unchanged > 0 { details.append("\(report.unchanged) already up to date") }
    if report.merged > 0 { details.append("\(report.merged) merged") }
    if report.deleted > 0 { details.append("\(report.deleted) deleted") }
    if report.kept > 0 { details.append("\(report.kept) delete\(report.kept == 1 ? "" : "s") undone (edited elsewhere)") }
    if report.conflicts > 0 { details.append(plural(report.conflicts, "conflict")) }
    var text = "sent " + plural(report.pushed, "change") + " (\(details.joined(separator: ", "))"
    if report.replayed > 0 { text += "; \(report.replayed) of them already applied by an earlier, interrupted sync" }
    return text + ")"
}

/// Prints what a sync did: a summary line on stdout; refusals, conflicts and undone deletes on stderr.
///
/// - Throws: a failure (exit 1) when the server refuses a note, this sync or an earlier one: such a note is not
///   synced until it is edited (refused for the account's quota: every sync tries it again), and every sync says so.
func printSyncReport(_ report: SyncReport, client: NotesClient, json: Bool) throws {
    let ids = try reportIDs(report, client: client)
    if json {
        try Console.json(SyncOutput(report, ids: ids))
    } else {
        let received = report.applied == 0 ? "nothing new from the server" : plural(report.applied, "note") + " added or changed from the server"
        let found = report.matched == 0 ? "" : "; " + plural(report.matched, "note") + " of this device already on the server"
        Console.out("Synced: \(pushSummary(report)); \(received)\(found).")
        func id(_ noteID: Int64) -> String { ids[noteID] ?? "a note" }
        for noteID in report.conflictNotes {
            Console.warn(
                "\(id(noteID)): your edit overlapped another device's: the note keeps the other device's text, and this device's text is in a conflict copy; see `notes conflicts --diff`, then `notes resolve`.")
        }
        if report.pulledConflictCopies > 0 {
            Console.warn(
                "\(plural(report.pulledConflictCopies, "conflict copy", "conflict copies")) arrived from another device (its text, where its edit overlapped another); see `notes conflicts --diff`.")
        }
        for noteID in report.undeleted {
            Console.warn("\(id(noteID)): your delete was undone because another device edited the note meanwhile; it is back (`notes rm \(id(noteID))` to delete it again).")
        }
        for failure in report.refused {
            let remedy =
                failure.error.isOverQuota
                ? "every sync tries it again: free space (shorten or empty notes) or ask the server's operator for more"
                : "edit it to try again"
            Console.warn("\(ids[failure.noteID] ?? failure.clientID.base32) is not synced: \(failure.error.message) (\(failure.error.code)); \(remedy).")
        }
        if report.pending > 0 {
            Console.warn("\(plural(report.pending, "note")) changed during the sync; run `notes sync` again to send them.")
        }
    }
    if !report.refused.isEmpty {
        throw CommandFailure(
            message: report.refused.allSatisfy(\.error.isOverQuota)
                ? "\(plural(report.refused.count, "note")) over the account's quota \(report.refused.count == 1 ? "is" : "are") not synced; every sync tries again"
                : "\(plural(report.refused.count, "note")) refused by the server \(report.refused.count == 1 ? "is" : "are") not synced; edit \(report.refused.count == 1 ? "it" : "them") to try again")
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send local changes to the server and receive the others.",
        discussion: """
            Safe to interrupt at any point: nothing is lost, nothing is applied twice, and the next sync resumes \
            where this one stopped.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let progress = ProgressLine()
        defer { progress.finish() }
        let report = try await client.sync(progress: progress.callback)
        progress.finish()
        try printSyncReport(report, client: client, json: options.json)
    }
}

/// Options for commands that talk to an account.
struct CredentialOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The server, e.g. http://notes.example.org:8080.", valueName: "url"))
    var server: String?

    @Option(name: .shortAndLong, help: "The account's username.")
    var username: String?

    @Flag(name: .long, help: "Read the password from the first line of standard input instead of the terminal.")
    var passwordStdin = false

    /// The server to talk to: `--server`, else the remembered one, checked the way a person types it.
    ///
    /// - Throws: a usage failure (exit 2) when none is known or it is not an `http://` or `https://` URL with a host.
    func server(remembered: String?) throws -> String {
        guard let server = server ?? remembered else {
            throw CommandFailure(message: "no server known yet; pass --server URL", status: .usage)
        }
        return try checkedServerURL(server)
    }
}

/// `text` when it is an `http://` or `https://` URL with a host (and a valid port, if any); a usage failure
/// otherwise, so that a typo (`htp://`, `http//host`) is reported as one instead of as an unreachable server.
func checkedServerURL(_ text: String) throws -> String {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    let usage = CommandFailure(message: "'\(text)' is not a server URL; expected http://HOST:PORT or https://HOST:PORT", status: .usage)
    guard let components = URLComponents(string: trimmed), let scheme = components.scheme?.lowercased(),
        scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
    else { throw usage }
    if let port = components.port, !(1...65535).contains(port) { throw usage }
    if components.query != nil || components.fragment != nil || components.user != nil { throw usage }
    return trimmed
}

/// What a sign-in does with the notes of other accounts and the unowned ones (see `OwnerPlanner` in NotesClient).
struct OwnerOptions: ParsableArguments {
    @Flag(
        inversion: .prefixedNo,
        help: ArgumentHelp(
            "Add the notes written while signed out (never synced) to this account, or keep them off it.",
            discussion: "Without either flag, asks on the terminal; without a terminal, refuses to sign in."))
    var carry: Bool?

    @Flag(name: .long, help: "Delete the previous account's notes from this device instead of setting them aside.")
    var wipe = false

    @Flag(name: .shortAndLong, help: "With --wipe, do not ask for confirmation.") var yes = false

    /// With `--wipe` and without `--yes`: asks before the sign-in whether the notes on show may be deleted, when
    /// they are another account's than `username` on `server` (the same account again wipes nothing).
    ///
    /// - Throws: a usage failure without a terminal to ask on; a failure when the answer is not yes.
    func confirmWipe(client: NotesClient, username: String, server: String) throws {
        guard wipe, !yes, let preview = try client.wipePreview(server: server, username: username) else { return }
        let owner = preview.account.display
        guard Console.stdinIsTerminal else {
            throw CommandFailure(
                message: "refusing to wipe without confirmation; pass --yes to delete \(owner)'s notes from this device (not signed in)",
                status: .usage)
        }
        var question = "Delete \(owner)'s \(plural(preview.notes, "note")) from this device"
        if preview.unsynced > 0 { question += " (\(preview.unsynced) with changes no server has: they will be lost)" }
        guard Terminal.confirm(question + "? Type 'yes' to confirm: ") else {
            throw CommandFailure(message: "nothing deleted; not signed in")
        }
    }

    /// The choice for the unowned notes: the flag, else the answer on the terminal; nothing to choose when there
    /// are none.
    ///
    /// - Throws: a usage failure when there are some, no flag was given and stdin is not a terminal.
    func unowned(client: NotesClient, username: String) throws -> UnownedNotes {
        let count = try client.unownedNoteCount()
        if let carry { return carry ? .carry : .keepAside }
        guard count > 0 else { return .keepAside }
        let notes = count == 1 ? "1 note" : "\(count) notes"
        guard Console.stdinIsTerminal else {
            throw CommandFailure(
                message: "\(notes) written while signed out: pass --carry to add them to \(username) or --no-carry to keep them off it (no terminal to ask on; not signed in)",
                status: .usage)
        }
        return Terminal.confirm("\(notes) written while signed out: add \(count == 1 ? "it" : "them") to \(username)? [y/N] ") ? .carry : .keepAside
    }
}

/// One line: what a sign-in did to which notes.
func ownersLine(_ owners: OwnerReport, account: String) -> String? {
    var parts: [String] = []
    if let previous = owners.previous?.display {
        if owners.wiped > 0 {
            parts.append("\(previous)'s \(plural(owners.wiped, "note")) deleted from this device")
        } else if owners.setAside > 0 {
            parts.append("\(previous)'s \(plural(owners.setAside, "note")) set aside (back when \(previous) signs in)")
        }
    }
    if owners.restored > 0 { parts.append("\(plural(owners.restored, "note")) of \(account) back") }
    if owners.carried > 0 { parts.append("\(plural(owners.carried, "note")) written while signed out added to \(account)") }
    if owners.keptAside > 0 { parts.append("\(plural(owners.keptAside, "note")) written while signed out kept off \(account)") }
    return parts.isEmpty ? nil : "Notes: " + parts.joined(separator: "; ") + "."
}

/// Reports a sign-in and the sync that followed.
func printSignIn(_ report: SignInReport, verb: String, client: NotesClient, json: Bool) throws {
    let owners = OwnersOutput(report.owners)
    switch report.sync {
    case .success(let sync):
        if json {
            try Console.json(
                SignInOutput(
                    username: report.account.username, server: report.account.serverURL, sync: SyncOutput(sync, ids: [:]),
                    notes: owners))
            return
        }
        Console.out("\(verb) \(report.account.username) on \(report.account.serverURL).")
        if let line = ownersLine(report.owners, account: report.account.username) { Console.out(line) }
        try printSyncReport(sync, client: client, json: false)
    case .failure(let error):
        if json {
            try Console.json(
                SignInOutput(
                    username: report.account.username, server: report.account.serverURL, sync: nil, syncError: error.message,
                    notes: owners))
        } else {
            Console.out("\(verb) \(report.account.username) on \(report.account.serverURL).")
            if let line = ownersLine(report.owners, account: report.account.username) { Console.out(line) }
        }
        Console.warn("The first sync did not finish: \(error.description) Your notes are safe; run `notes sync` to finish.")
        throw ExitCode(ExitStatus.for(error).rawValue)
    }
}

struct SignInOutput: Encodable {
    var username: String
    var server: String
    var sync: SyncOutput?
    var syncError: String?
    var notes: OwnersOutput
}

/// `--json` form of what a sign-in did to which notes (live notes counted).
struct OwnersOutput: Encodable {
    var previousAccount: String?
    var setAside: Int
    var wiped: Int
    var restored: Int
    var carried: Int
    var keptAside: Int

    init(_ report: OwnerReport) {
        previousAccount = report.previous?.display
        setAside = report.setAside
        wiped = report.wiped
        restored = report.restored
        carried = report.carried
        keptAside = report.keptAside
    }
}

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account on a server and sign in to it.",
        discussion: """
            The password is asked twice on the terminal, or read from standard input with --password-stdin. Without \
            --server, the server this device last used. A server that takes sign-ups only by invitation needs \
            --invite with the code its operator gave you.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var credentials: CredentialOptions
    @OptionGroup var owners: OwnerOptions
    @Option(help: ArgumentHelp("The invite code from the server's operator (for a server that takes sign-ups by invitation).", valueName: "code"))
    var invite: String?

    func validate() throws {
        if credentials.username == nil { throw ValidationError("Missing --username.") }
    }

    func run() async throws {
        let client = try options.openClient()
        // Like login: the remembered server when none is given.
        let server = try credentials.server(remembered: try client.status().serverURL)
        let unowned = try owners.unowned(client: client, username: credentials.username!)
        try owners.confirmWipe(client: client, username: credentials.username!, server: server)
        let password: String
        if credentials.passwordStdin {
            password = try Terminal.readPasswordFromStdin()
        } else {
            password = try Terminal.readSecret(prompt: "Choose a password: ")
            guard try Terminal.readSecret(prompt: "Repeat the password: ") == password else {
                throw CommandFailure(message: "the passwords differ; nothing was created")
            }
        }
        let progress = ProgressLine()
        defer { progress.finish() }
        let report = try await client.signUp(
            server: server, username: credentials.username!, password: password, invite: invite, unowned: unowned,
            wipe: owners.wipe, progress: progress.callback)
        progress.finish()
        try printSignIn(report, verb: "Created the account", client: client, json: options.json)
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to an account (the same one or another) and sync.",
        discussion: """
            The server is remembered: later commands need no --server. Every note on this device belongs to one \
            account: the one it was written in or synced with. Signing in to the same account again sends it the \
            notes changed meanwhile (ones it has are matched up: no duplicates). Signing in to another account sends \
            it nothing of the previous one: the previous account's notes are set aside, hidden, and come back when \
            it signs in again (--wipe deletes them from this device instead, after asking unless --yes). Notes written while signed out and \
            never synced belong to no account: you are asked whether to add them to the account signing in \
            (--carry or --no-carry answer for scripts; without a terminal and without either, the sign-in is \
            refused). To put a note in another account, copy it: `notes copy ID --to USER`.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var credentials: CredentialOptions
    @OptionGroup var owners: OwnerOptions

    func run() async throws {
        let client = try options.openClient()
        let status = try client.status()
        let server = try credentials.server(remembered: status.serverURL)
        guard let username = credentials.username ?? status.account?.username else {
            throw CommandFailure(message: "missing --username", status: .usage)
        }
        let unowned = try owners.unowned(client: client, username: username)
        try owners.confirmWipe(client: client, username: username, server: server)
        let password = try credentials.passwordStdin ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Password for \(username): ")
        let progress = ProgressLine()
        defer { progress.finish() }
        let report = try await client.signIn(
            server: server, username: username, password: password, unowned: unowned, wipe: owners.wipe,
            progress: progress.callback)
        progress.finish()
        try printSignIn(report, verb: "Signed in as", client: client, json: options.json)
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign out (--everywhere: every device); your notes stay on this device unless --wipe.",
        discussion: """
            The account's notes stay on this device, shown while signed out with the notes written then; those \
            with unsynced changes sync at this account's next sign-in, never to another account. --wipe deletes \
            the notes this device shows from it (the account's and those written while signed out; other accounts' \
            notes, set aside, stay): it asks for confirmation unless --yes, and refuses without a terminal to ask on.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Also delete the notes this device shows (the account's and unowned ones).") var wipe = false
    @Flag(name: .shortAndLong, help: "Do not ask for confirmation.") var yes = false
    @Flag(name: .long, help: "Sign out every other device of the account too (they keep their notes).") var everywhere = false

    struct Output: Encodable {
        var revoked: Bool
        /// Other devices signed out (`--everywhere`).
        var otherDevices: Int?
        var pending: Int
        var wiped: Int
        /// The account whose notes stay on show (nil: none was ever signed in to here).
        var account: String?
        var kept: Int
        var unowned: Int
    }

    func run() async throws {
        let client = try options.openClient()
        let status = try client.status()
        if wipe && !yes {
            guard Console.stdinIsTerminal else {
                throw CommandFailure(message: "refusing to wipe without confirmation; pass --yes to delete the notes this device shows", status: .usage)
            }
            var question = "Delete \(status.notes == 1 ? "the only note" : "all \(status.notes) notes") shown on this device"
            if status.pending > 0 { question += " (\(status.pending) with changes no server has: they will be lost)" }
            guard Terminal.confirm(question + "? Type 'yes' to confirm: ") else {
                throw CommandFailure(message: "nothing deleted")
            }
        }
        // Every other device first, while this session can still ask.
        let others = everywhere ? try await client.signOutOtherDevices() : nil
        let report = try await client.signOut(wipe: wipe)
        if options.json {
            try Console.json(
                Output(
                    revoked: report.revoked, otherDevices: others, pending: report.pending, wiped: report.wiped, account: report.account?.display,
                    kept: report.kept, unowned: report.unowned))
            return
        }
        if let account = status.account {
            Console.out("Signed out of \(account.username) on \(account.serverURL).")
            if let others { Console.out("Signed out \(plural(others, "other device")) too; they keep their notes.") }
            if !report.revoked {
                Console.warn("The server could not be reached; the session was forgotten on this device only.")
            }
        } else {
            Console.out("Not signed in.")
        }
        let owner = report.account?.display ?? "no account"
        if wipe {
            Console.out("Deleted \(plural(report.wiped, "note")) (\(owner)'s and those written while signed out) from this device.")
        } else {
            var line = "Kept \(owner)'s \(plural(report.kept, "note")) on this device"
            if report.unowned > 0 { line += "; \(plural(report.unowned, "note")) written while signed out, on no account" }
            Console.out(line + ".")
        }
        if !wipe && report.pending > 0 {
            Console.warn(
                "\(plural(report.pending, "note")) \(report.pending == 1 ? "has" : "have") unsynced changes; they stay on this device and will sync at \(owner)'s next sign-in.")
        }
    }
}
