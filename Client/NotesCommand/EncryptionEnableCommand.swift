import ArgumentParser
import NotesClient
import NoteSyncProtocol

/// `notes encryption enable`: converts the signed-in plaintext account (``NotesClient/enableEncryption(password:progress:)``).
struct EncryptionEnable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable",
        abstract: "Convert this plaintext account to end-to-end encryption.",
        discussion: """
            Asks for the account's password (with echo off; --password-stdin reads it from the first line of standard \
            input), sets up the keys, shows the recovery key once, then sends every note as its ciphertext (a new \
            version each). Every other device is signed out: sign in there again with the same password. When the last \
            note is sent, the server deletes what it kept in the clear (older versions, texts kept for retries). \
            Interrupted, `notes sync` or this command again carries on where it stopped.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the password from the first line of standard input instead of the terminal.")
    var passwordStdin = false

    func run() async throws {
        let (client, account) = try options.openSignedIn()
        let password = try passwordStdin ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Password for \(account.username): ")
        let report = try await ProgressLine.around { progress in try await client.enableEncryption(password: password, progress: progress) }
        if let recoveryKey = report.recoveryKey { showRecoveryKey(recoveryKey) }
        if options.json {
            try Console.json(
                Output(
                    encryption: report.state.rawValue, plaintextNotes: report.left, converted: report.converted, missing: report.missing))
        } else {
            Console.out(Self.summary(report, username: account.username))
        }
        if report.state == .converting { throw ExitCode(ExitStatus.failure.rawValue) }
    }

    struct Output: Encodable {
        var encryption: String
        var plaintextNotes: Int64
        var converted: Int
        var missing: Int
    }

    /// The one summary line.
    static func summary(_ report: ConversionReport, username: String) -> String {
        switch report.state {
        case .encrypted where report.converted == 0 && report.recoveryKey == nil:
            return "\(username)'s account is already end-to-end encrypted; nothing to do."
        case .encrypted, .reset:
            return "Encrypted \(plural(report.converted, "note")); \(username)'s account is end-to-end encrypted: the server holds no readable note."
        case .converting:
            var line = "Encrypted \(plural(report.converted, "note")); \(plural(Int(report.left), "note")) still in the clear on the server"
            if report.missing > 0 { line += " (\(report.missing) not on this device: sync them from a device that has them)" }
            return line + "; run `notes encryption enable` or `notes sync` again to finish."
        case .plaintext:
            return "\(username)'s account is still plaintext."
        }
    }
}

/// Shows a recovery key once, on standard error (so `--json` output stays the report): nothing keeps it.
func showRecoveryKey(_ recoveryKey: String) {
    Console.warn(
        """
        Your notes are end-to-end encrypted. Your recovery key (shown only now; write it down and keep it safe):

            \(recoveryKey)

        Without your password and this key, nobody can read your notes on the server, not even its operator.
        """)
}
