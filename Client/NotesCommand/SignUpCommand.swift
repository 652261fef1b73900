import ArgumentParser
import NotesClient

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account on a server and sign in to it.",
        discussion: """
            The password is asked twice on the terminal, or read from standard input with --password-stdin. Without \
            --server, the server this device last used. A server that takes sign-ups only by invitation needs \
            --invite with the code its operator gave you.

            The account is end-to-end encrypted: the server never holds a readable note, and the password never \
            leaves this device. Its recovery key is shown once: keep it somewhere safe; with it your notes come back \
            if the server's operator resets your password. --no-encryption creates a plaintext account instead.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var credentials: CredentialOptions
    @OptionGroup var owners: OwnerOptions
    @Option(help: ArgumentHelp("The invite code from the server's operator (for a server that takes sign-ups by invitation).", valueName: "code"))
    var invite: String?
    @Flag(
        name: .customLong("no-encryption"),
        help: "Create a plaintext account: the server's operator, and anyone with a copy of its database, can read the notes.")
    var noEncryption = false

    func validate() throws {
        if credentials.username == nil { throw ValidationError("Missing --username.") }
    }

    func run() async throws {
        let client = try options.openClient()
        // Like login: the remembered server when none is given.
        let server = try credentials.server(remembered: try client.remembered().serverURL)
        let unowned = try owners.ask(client: client, username: credentials.username!, server: server)
        let password: String
        if credentials.passwordStdin {
            password = try Terminal.readPasswordFromStdin()
        } else {
            password = try Terminal.readSecret(prompt: "Choose a password: ")
            guard try Terminal.readSecret(prompt: "Repeat the password: ") == password else {
                throw CommandFailure(message: "the passwords differ; nothing was created")
            }
        }
        let report = try await ProgressLine.around { progress in
            try await client.signUp(
                server: server, username: credentials.username!, password: password, invite: invite, encrypted: !noEncryption,
                unowned: unowned,
                wipe: owners.wipe, progress: progress)
        }
        if noEncryption {
            Console.warn("This account is not end-to-end encrypted: the server's operator can read its notes.")
        }
        try printSignIn(report, verb: "Created the account", client: client, json: options.json)
        if let recoveryKey = report.recoveryKey { showRecoveryKey(recoveryKey) }
    }
}
