import ArgumentParser
import Foundation
import MiniFlake
import NoteSyncProtocol

/// `notesyncd sessions ...`: an account's signed-in devices, for the operator (the same sessions `notes devices`
/// lists). A revoked device learns it at its next request (401 `unauthorized`) and behaves as signed out: its notes
/// stay on it and sync, without duplicates, at its next sign-in.
public struct SessionsCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "List and revoke an account's signed-in devices.",
        discussion: OperatorStoreOptions.help,
        subcommands: [List.self, Revoke.self]
    )

    public init() {}

    /// The most sessions `sessions list` shows (the most recently signed-in first).
    static let listLimit = 1000

    /// One session as `sessions list --json` prints it (Docs/OPERATIONS.md, "Operator JSON": IDs as decimal
    /// strings, times in the wire's ISO 8601 form, an absent key for a missing value).
    struct Listed: Encodable {
        var id: String
        var device: String?
        var origin: String?
        var signedIn: String
        var lastSeen: String?
    }

    /// `sessions list USERNAME [--json]`.
    public struct List: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "List an account's sessions: ID, device name, signed in, last seen.", discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The account's username.") var username: String
        @Flag(help: "One JSON array, for scripts.") var json = false
        public init() {}

        public func run() async throws {
            let sessions = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                return try await opened.store.sessions(accountID: account.id, limit: SessionsCommand.listLimit)
            }
            let listed = sessions.map { session in
                Listed(
                    id: "\(session.id)", device: session.deviceName, origin: session.origin.map { "\($0)" },
                    signedIn: WireTime.format(unixMilliseconds: session.createdAt),
                    lastSeen: session.lastSeenAt.map { WireTime.format(unixMilliseconds: $0) })
            }
            try OperatorOutput.print(listed, json: json) {
                [["ID", "DEVICE", "SIGNED IN", "LAST SEEN"]]
                    + listed.map { [$0.id, $0.device ?? "-", $0.signedIn, $0.lastSeen ?? "-"] }
            }
        }
    }

    /// `sessions revoke USERNAME (SESSION_ID | --all)`.
    public struct Revoke: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Sign a device of an account out (its next request answers 401), or all of them with --all.",
            discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The account's username.") var username: String
        @Argument(help: "The session's ID, as `sessions list` shows it.") var session: String?
        @Flag(help: "Revoke every session of the account.") var all = false
        public init() {}

        public func validate() throws {
            if all == (session != nil) { throw ValidationError("Name one session ID, or pass --all (not both).") }
            if let session, FlakeID(session) == nil { throw ValidationError("'\(session)' is not a session ID.") }
        }

        public func run() async throws {
            let (name, count) = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                if let session, let id = FlakeID(session) {
                    guard try await opened.store.deleteSession(id: id, accountID: account.id) else {
                        throw OperatorError("\(account.username) has no session \(session)")
                    }
                    return (account.username, 1)
                }
                return (account.username, try await opened.store.deleteSessions(accountID: account.id, except: nil))
            }
            OperatorOutput.line("revoked \(count) session\(count == 1 ? "" : "s") of \(name); \(count == 1 ? "that device" : "those devices") must sign in again")
        }
    }
}
