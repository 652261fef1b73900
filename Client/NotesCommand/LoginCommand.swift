import ArgumentParser
import Foundation
import NotesClient

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

    /// The server (``server(remembered:)``) and the username (`--username`, else the remembered account's) a
    /// sign-in talks to.
    ///
    /// - Throws: a usage failure when either is unknown.
    func account(_ client: NotesClient) throws -> (server: String, username: String) {
        let remembered = try client.remembered()
        let server = try server(remembered: remembered.serverURL)
        guard let username = username ?? remembered.account?.username else {
            throw CommandFailure(message: "missing --username", status: .usage)
        }
        return (server, username)
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

    /// What a sign-in to `username` on `server` does with the notes: the choice for the unowned ones
    /// (``unowned(client:username:)``), after confirming a wipe (``confirmWipe(client:username:server:)``). Asked
    /// before the password, so nothing is typed for a sign-in that will not happen.
    func ask(client: NotesClient, username: String, server: String) throws -> UnownedNotes {
        let unowned = try unowned(client: client, username: username)
        try confirmWipe(client: client, username: username, server: server)
        return unowned
    }

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
    if owners.attachmentsDropped > 0 {
        parts.append(
            "\(plural(owners.attachmentsDropped, "attachment")) left out of the notes added: not whole on this device to encrypt for \(account) (attach the file again)")
    }
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
    var attachmentsDropped: Int

    init(_ report: OwnerReport) {
        previousAccount = report.previous?.display
        setAside = report.setAside
        wiped = report.wiped
        restored = report.restored
        carried = report.carried
        keptAside = report.keptAside
        attachmentsDropped = report.attachmentsDropped
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
        let (server, username) = try credentials.account(client)
        let unowned = try owners.ask(client: client, username: username, server: server)
        let password = try credentials.passwordStdin ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Password for \(username): ")
        let report: SignInReport
        do {
            report = try await ProgressLine.around { progress in
                try await client.signIn(
                    server: server, username: username, password: password, unowned: unowned, wipe: owners.wipe, progress: progress)
            }
        } catch let error as NotesError where error.code == .accountReset && Console.stdinIsTerminal && !credentials.passwordStdin {
            // The operator reset the password: what was typed is the temporary one. Ask for the recovery key here.
            Console.warn(resetExplanation)
            Console.warn("Type the recovery key to get the notes back (or just Enter if you do not have it).")
            let recoveryKey = try EncryptionRecover.recoveryKey(file: nil)
            let new = try Terminal.readNewPassword(stdin: false)
            report = try await ProgressLine.around { progress in
                try await client.recoverAccount(
                    server: server, username: username, temporaryPassword: password, recoveryKey: recoveryKey, newPassword: new,
                    unowned: unowned, wipe: owners.wipe, progress: progress)
            }
            Console.out("Recovered \(username): the recovery key opened the account's notes; the new password wraps their key.")
        }
        if report.setUpEncryption {
            Console.warn("This account had no note yet: it is now end-to-end encrypted (the server will hold no readable note).")
            if let recoveryKey = report.recoveryKey { showRecoveryKey(recoveryKey) }
        }
        try printSignIn(report, verb: "Signed in as", client: client, json: options.json)
    }
}
