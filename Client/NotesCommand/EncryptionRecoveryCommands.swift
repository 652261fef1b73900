import ArgumentParser
import Foundation
import NotesClient

/// What `notes login` and `notes encryption recover` say of an account the operator reset, before asking for the
/// recovery key.
let resetExplanation = """
    The server's operator reset this account's password (`notesyncd users reset-password`). Your notes on the server \
    are end-to-end encrypted: the new password cannot open them, only your recovery key can (you were shown it when \
    encryption was set up, or by `notes encryption recovery-key`).
    """

/// What is said when no recovery key is given.
let withoutRecoveryKey =
    "Without the recovery key the notes on the server are unreadable, by you and by the operator; the notes on this device are still here."

/// `notes encryption recover`.
struct EncryptionRecover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Get an encrypted account back with its recovery key after the operator reset its password.",
        discussion: """
            Asks for the temporary password the operator gave, the recovery key, then a new password twice (echo \
            off), opens the account's key with the recovery key and wraps it with the new password (no note is \
            re-uploaded), then signs in and syncs. For scripts: --recovery-key-file FILE reads the key from a file \
            (- for standard input) and --password-stdin reads the temporary password and the new one from the first \
            two lines of standard input.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var credentials: CredentialOptions
    @OptionGroup var owners: OwnerOptions
    @Option(name: .long, help: ArgumentHelp("Read the recovery key from this file (- for standard input).", valueName: "file"))
    var recoveryKeyFile: String?

    func validate() throws {
        if recoveryKeyFile == "-" && credentials.passwordStdin {
            throw ValidationError("--recovery-key-file - and --password-stdin both read standard input; put the key in a file.")
        }
    }

    func run() async throws {
        let client = try options.openClient()
        let (server, username) = try credentials.account(client)
        let unowned = try owners.ask(client: client, username: username, server: server)
        let temporary =
            try credentials.passwordStdin
            ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Temporary password for \(username) (from the operator): ")
        let recoveryKey = try Self.recoveryKey(file: recoveryKeyFile)
        let new = try Terminal.readNewPassword(stdin: credentials.passwordStdin)
        let report = try await ProgressLine.around { progress in
            try await client.recoverAccount(
                server: server, username: username, temporaryPassword: temporary, recoveryKey: recoveryKey, newPassword: new,
                unowned: unowned, wipe: owners.wipe, progress: progress)
        }
        if !options.json { Console.out("Recovered \(username): the recovery key opened the account's notes; the new password wraps their key.") }
        try printSignIn(report, verb: "Signed in as", client: client, json: options.json)
    }

    /// The recovery key: from `file` (`-`: standard input), else asked on the terminal (echo off).
    static func recoveryKey(file: String?) throws -> String {
        guard let file else {
            guard Console.stdinIsTerminal else {
                throw CommandFailure(message: "no terminal to read the recovery key from; pass --recovery-key-file FILE", status: .usage)
            }
            let key = try Terminal.readSecret(prompt: "Recovery key: ")
            guard !key.trimmingCharacters(in: .whitespaces).isEmpty else { throw CommandFailure(message: withoutRecoveryKey) }
            return key
        }
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: file) else {
                throw CommandFailure(message: "cannot read the recovery key file \(file)", status: .usage)
            }
            data = contents
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// `notes encryption recovery-key`.
struct EncryptionRecoveryKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recovery-key",
        abstract: "Make a new recovery key for this encrypted account (shown once); the old one stops working.",
        discussion: """
            The new key rides on a rotation of the account key (as signing a device out does): the server keeps only \
            what the new recovery key opens. The old recovery key opens nothing the server serves from then on; with \
            a copy of the server's store made before (a backup), it still opens what was written before the new key \
            was made (Docs/SECURITY.md, "Recovery").
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let renewed = try await client.renewRecoveryKey()
        if options.json {
            try Console.json(["keyGeneration": Int64(renewed.keyGeneration)])
        } else {
            Console.out("Made a new recovery key; the account key is now generation \(renewed.keyGeneration). The old recovery key no longer works.")
        }
        // Shown once, on standard error (as at sign-up): nothing keeps it.
        Console.warn(
            """
            Your new recovery key (shown only now; write it down and keep it safe):

                \(renewed.recoveryKey)

            """)
    }
}
