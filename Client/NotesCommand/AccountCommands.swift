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
    var failures: [Failure]

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
        failures = report.failures.map {
            Failure(id: ids[$0.noteID] ?? $0.clientID.base32, code: $0.error.code, message: $0.error.message)
        }
    }
}

/// Prints what a sync did: a summary line on stdout, refusals and conflicts on stderr.
func printSyncReport(_ report: SyncReport, client: NotesClient, json: Bool) throws {
    let ids = report.failures.isEmpty ? [:] : try client.displayIDs()
    if json {
        try Console.json(SyncOutput(report, ids: ids))
        return
    }
    var details: [String] = []
    if report.created > 0 { details.append("\(report.created) new") }
    if report.reconciled > 0 { details.append("\(report.reconciled) reconciled") }
    if report.updated > 0 { details.append("\(report.updated) updated") }
    if report.merged > 0 { details.append("\(report.merged) merged") }
    if report.deleted > 0 { details.append("\(report.deleted) deleted") }
    if report.kept > 0 { details.append("\(report.kept) kept (edited elsewhere)") }
    if report.conflicts > 0 { details.append(plural(report.conflicts, "conflict")) }
    let sent = report.pushed == 0 ? "nothing to send" : "sent " + plural(report.pushed, "change") + (details.isEmpty ? "" : " (\(details.joined(separator: ", ")))")
    let received = report.applied == 0 ? "nothing new from the server" : plural(report.applied, "note") + " added or changed from the server"
    let found = report.matched == 0 ? "" : "; " + plural(report.matched, "note") + " of this device already on the server"
    Console.out("Synced: \(sent); \(received)\(found).")
    if report.conflicts > 0 {
        Console.warn("\(plural(report.conflicts, "note")) changed on another device too: the other text was kept as a conflict copy; see `notes conflicts`.")
    }
    for failure in report.failures {
        Console.warn("\(ids[failure.noteID] ?? failure.clientID.base32) was not synced: \(failure.error.message) (\(failure.error.code)); edit it to try again.")
    }
    if report.pending > 0 {
        Console.warn("\(plural(report.pending, "note")) changed during the sync; run `notes sync` again to send them.")
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
        discussion: "The password is asked twice on the terminal, or read from standard input with --password-stdin.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var credentials: CredentialOptions
    @OptionGroup var owners: OwnerOptions

    func validate() throws {
        if credentials.server == nil { throw ValidationError("Missing --server URL.") }
        if credentials.username == nil { throw ValidationError("Missing --username.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let unowned = try owners.unowned(client: client, username: credentials.username!)
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
            server: credentials.server!, username: credentials.username!, password: password, unowned: unowned,
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
            it signs in again (--wipe deletes them from this device instead). Notes written while signed out and \
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
        guard let server = credentials.server ?? status.serverURL else {
            throw CommandFailure(message: "no server known yet; pass --server URL", status: .usage)
        }
        guard let username = credentials.username ?? status.account?.username else {
            throw CommandFailure(message: "missing --username", status: .usage)
        }
        let unowned = try owners.unowned(client: client, username: username)
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
        abstract: "Sign out; your notes stay on this device unless --wipe.",
        discussion: """
            The account's notes stay on this device, shown while signed out with the notes written then; those \
            with unsynced changes sync at this account's next sign-in, never to another account. --wipe deletes \
            the notes this device shows from it (the account's and those written while signed out; other accounts' \
            notes, set aside, stay): it asks for confirmation unless --yes, and refuses without a terminal to ask on.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Also delete the notes this device shows (the account's and unowned ones).") var wipe = false
    @Flag(name: .shortAndLong, help: "Do not ask for confirmation.") var yes = false

    struct Output: Encodable {
        var revoked: Bool
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
        let report = try await client.signOut(wipe: wipe)
        if options.json {
            try Console.json(
                Output(
                    revoked: report.revoked, pending: report.pending, wiped: report.wiped, account: report.account?.display,
                    kept: report.kept, unowned: report.unowned))
            return
        }
        if let account = status.account {
            Console.out("Signed out of \(account.username) on \(account.serverURL).")
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
