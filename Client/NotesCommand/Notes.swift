import ArgumentParser
import Foundation
import NotesClient

/// The `notes` command: keep notes in the terminal, offline or online, and sync them with a FlakeNotes server.
public struct Notes: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "notes",
        abstract: "Keep notes in your terminal, offline or online, and sync them between machines.",
        discussion: """
            Every command but those that talk to the server (sync, watch, signup, login, logout, devices, password, \
            account, the history's: history, diff, show --version and restore --version, which fetch a note's \
            versions once and keep them, and save of an attachment that is not on this device) works offline and never touches the network. \
            Notes get a permanent ID when they are created; IDs are shown in a short base32 form and any unique \
            prefix of one is accepted (case-insensitive).

            Data lives in --home, else $NOTES_HOME, else $XDG_DATA_HOME/notes, else ~/.local/share/notes.

            Shell completions: notes --generate-completion-script bash|zsh|fish (see the README).

            Exit status: 0 success; 1 error (unknown or ambiguous ID, empty or invalid note, a note the server \
            refuses, local storage); 2 usage (bad arguments or server URL, or a confirmation that cannot be asked); \
            3 server unreachable or failing (try again later); 4 not signed in, wrong password, locked out after \
            too many attempts, or signed out by the server.
            """,
        version: NotesClient.version,
        subcommands: [
            Add.self, List.self, Show.self, Edit.self, Remove.self, Search.self, TagNote.self, TagList.self, Pin.self, Unpin.self,
            Archive.self, Unarchive.self, Attach.self, Attachments.self, Save.self, Detach.self, History.self, Diff.self, Conflicts.self, Resolve.self, Trash.self, Restore.self,
            Export.self, Import.self, Sync.self, Watch.self, SignUp.self, Login.self, Logout.self, Status.self, Copy.self,
            Devices.self, Password.self, AccountCommand.self, EncryptionCommand.self,
        ]
    )

    public init() {}

    /// Parses the arguments, runs the command and exits with a documented status (see the discussion above).
    public static func main(_ arguments: [String]?) async -> Never {
        do {
            if arguments == nil { try checkArgumentEncoding() }
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            Console.flush()
            exit(withError: nil)
        } catch let error as NotesError {
            Console.flush()
            Console.error(error.description)
            Foundation.exit(ExitStatus.for(error).rawValue)
        } catch let error as CommandFailure {
            Console.flush()
            Console.error(error.message)
            Foundation.exit(error.status.rawValue)
        } catch {
            Console.flush()
            if exitCode(for: error) == .validationFailure {
                Console.writeError(fullMessage(for: error) + "\n")
                Foundation.exit(ExitStatus.usage.rawValue)
            }
            exit(withError: error)
        }
    }

    public static func main() async {
        await main(nil)
    }

    /// Refuses arguments that are not UTF-8 (Swift's `CommandLine.arguments` would replace the bad bytes with
    /// U+FFFD, and a note would be stored changed).
    static func checkArgumentEncoding() throws {
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { continue }
            let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer)))
            if let offset = TextInput.firstInvalidOffset(bytes) {
                throw NotesError(.invalidText, "Argument \(index) is not valid UTF-8 at byte offset \(offset); nothing was stored.")
            }
        }
    }
}

/// The exit statuses of `notes`.
public enum ExitStatus: Int32, Sendable {
    case success = 0
    case failure = 1
    case usage = 2
    case unavailable = 3
    case authentication = 4

    static func `for`(_ error: NotesError) -> ExitStatus {
        switch error.code {
        case .serverUnreachable, .badResponse: .unavailable
        // 429: locked out after too many failed sign-ins: an authentication problem, like a wrong password.
        case .serverError where error.httpStatus == 429: .authentication
        case .serverError: (error.httpStatus ?? 500) >= 500 ? .unavailable : .failure
        case .notSignedIn, .signedOutByServer, .invalidCredentials: .authentication
        case .invalidInput: .usage
        case .invalidText: .failure
        default: .failure
        }
    }
}

/// An error of the command itself (not the client library): one line and a status.
struct CommandFailure: Error {
    var message: String
    var status: ExitStatus = .failure
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The data directory (overrides $NOTES_HOME).", valueName: "dir"))
    var home: String?

    @Flag(name: .long, help: "Print JSON for scripts instead of text for people.")
    var json = false

    /// The data directory this invocation uses.
    var homeURL: URL {
        if let home, !home.isEmpty {
            return URL(fileURLWithPath: (home as NSString).expandingTildeInPath, isDirectory: true)
        }
        return NotesClient.defaultHome()
    }

    func openClient() throws(NotesError) -> NotesClient {
        try NotesClient.open(home: homeURL)
    }

    /// The client of a command that acts on the signed-in account, and that account.
    ///
    /// - Throws: ``CommandFailure`` (status `authentication`) when no account is signed in; the client's errors.
    func openSignedIn() throws -> (client: NotesClient, account: AccountInfo) {
        let client = try openClient()
        guard let account = try client.account() else {
            throw CommandFailure(message: "not signed in; sign in to the account first (`notes login`)", status: .authentication)
        }
        return (client, account)
    }
}
