import ArgumentParser
import Foundation
import NotesClient

/// `notes account delete`: talks to the signed-in account's server; a revoked session or a deleted account signs
/// this device out like a sync would (its notes stay).
struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account", abstract: "Manage the account itself.", subcommands: [AccountDelete.self])
}

struct AccountDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete the signed-in account on its server, with all its notes there.",
        discussion: """
            Asks for the password, then for the username to be typed to confirm. Every device of the account is \
            signed out. The notes on this device stay, as notes of no account (like notes written while signed \
            out): signing in to an account later asks whether to add them to it. Other devices keep theirs too. \
            For scripts: --yes skips the typed username, and the password comes from the first line of standard \
            input with --password-stdin; without a terminal and without both, nothing is deleted.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the password from the first line of standard input.") var passwordStdin = false
    @Flag(name: .shortAndLong, help: "Do not ask for the username to be typed (needs the password on a terminal or --password-stdin).")
    var yes = false

    struct Output: Encodable {
        var deleted: String
        var keptNotes: Int
        /// Attachments of the kept notes this device never downloaded: their bytes went with the account.
        var attachmentsDropped: Int
    }

    func run() async throws {
        let client = try options.openClient()
        guard let account = try client.account() else {
            throw CommandFailure(message: "not signed in; sign in to the account to delete first (`notes login`)", status: .authentication)
        }
        if !Console.stdinIsTerminal && !(yes && passwordStdin) {
            throw CommandFailure(
                message: "refusing to delete \(account.username) without a terminal to confirm on; pass --yes and --password-stdin to do it from a script",
                status: .usage)
        }
        let password = try passwordStdin ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Password for \(account.username): ")
        if !yes {
            let notes = try client.status().notes
            Console.writeError(
                "This deletes the account \(account.username) on \(account.serverURL) and all its notes there, for every device. "
                    + "This device keeps its \(plural(notes, "note")) as notes of no account.\n")
            Console.writeError("Type the username (\(account.username)) to delete it: ")
            guard let typed = readLine(strippingNewline: true), typed.trimmingCharacters(in: .whitespaces) == account.username else {
                throw CommandFailure(message: "the username does not match; nothing was deleted")
            }
        }
        let report = try await client.deleteAccount(password: password)
        if options.json {
            try Console.json(Output(deleted: report.account.display, keptNotes: report.keptNotes, attachmentsDropped: report.attachmentsDropped))
        } else {
            Console.out("Deleted the account \(report.account.display) on \(account.serverURL); this device is signed out.")
            Console.out(
                "Kept \(plural(report.keptNotes, "note")) on this device as notes of no account; `notes login` to another account asks whether to add them.")
            if report.attachmentsDropped > 0 {
                Console.out(
                    "Left out \(plural(report.attachmentsDropped, "attachment")) this device never downloaded: their bytes went with the account.")
            }
        }
    }
}
