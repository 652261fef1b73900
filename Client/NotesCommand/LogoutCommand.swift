import ArgumentParser
import NotesClient

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
        /// The account key's generation after `--everywhere` rotated it (an encrypted account).
        var keyGeneration: UInt32?
        var pending: Int
        var wiped: Int
        /// The account whose notes stay on show (nil: none was ever signed in to here).
        var account: String?
        var kept: Int
        var unowned: Int
    }

    func run() async throws {
        let client = try options.openClient()
        let account = try client.remembered().account
        if wipe && !yes {
            let status = try client.status()
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
                    revoked: report.revoked, otherDevices: others?.count, keyGeneration: others?.keyGeneration, pending: report.pending, wiped: report.wiped, account: report.account?.display,
                    kept: report.kept, unowned: report.unowned))
            return
        }
        if let account {
            Console.out("Signed out of \(account.username) on \(account.serverURL).")
            if let others {
                Console.out("Signed out \(plural(others.count, "other device")) too; they keep their notes.")
                if let generation = others.keyGeneration { Console.out(rotatedLine(generation)) }
            }
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
