import ArgumentParser
import NotesClient

/// `notes password`: talks to the signed-in account's server; a revoked session signs this device out like a sync
/// would (its notes stay).
struct Password: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change this account's password; every other device is signed out.",
        discussion: """
            Asks for the current password, then the new one twice, with echo off. With --password-stdin, reads the \
            current password from the first line of standard input and the new one from the second.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the current and the new password from the first two lines of standard input.")
    var passwordStdin = false

    func run() async throws {
        let (client, account) = try options.openSignedIn()
        let current =
            try passwordStdin
            ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Current password for \(account.username): ")
        let new = try Terminal.readNewPassword(stdin: passwordStdin, unchanged: "the password was not changed")
        let revoked = try await client.changePassword(current: current, new: new)
        if options.json {
            try Console.json(["revokedDevices": revoked])
        } else {
            Console.out("Password changed for \(account.username); \(plural(revoked, "other device")) signed out.")
        }
    }
}
