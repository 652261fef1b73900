import ArgumentParser
import Foundation
import MiniFlake
import NoteSyncProtocol

/// `notesyncd users ...`: accounts, for the operator. Each subcommand opens the store with
/// ``OperatorStoreOptions`` and works while the daemon runs.
public struct UsersCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "List, create, reset, disable, enable and delete accounts.",
        discussion: OperatorStoreOptions.help,
        subcommands: [List.self, Add.self, ResetPassword.self, Disable.self, Enable.self, Delete.self]
    )

    public init() {}

    /// `users list [--json]`.
    public struct List: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "List the accounts: username, ID, created, status, notes, devices.", discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
        @Flag(help: "One JSON array, for scripts.") var json = false
        public init() {}

        public func run() async throws {
            let summaries = try await store.withStore { try await $0.store.accountSummaries() }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                OperatorOutput.line(String(decoding: try encoder.encode(summaries), as: UTF8.self))
                return
            }
            var rows = [["USERNAME", "ID", "CREATED", "STATUS", "NOTES", "DEVICES"]]
            for summary in summaries {
                rows.append([
                    summary.username, "\(summary.id)", WireTime.format(unixMilliseconds: summary.createdAt),
                    summary.disabledAt.map { "disabled \(WireTime.format(unixMilliseconds: $0))" } ?? "enabled",
                    "\(summary.notes)", "\(summary.sessions)",
                ])
            }
            OperatorOutput.table(rows)
        }
    }

    /// `users add USERNAME [--password-stdin]`.
    public struct Add: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Create an account (whatever the sign-up policy).",
            discussion: "Without --password-stdin a random password is made and printed once. " + OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
        @Argument(help: "The username (3-32 of a-z, 0-9, '.', '_', '-'; case-insensitive).") var username: String
        @Flag(name: .customLong("password-stdin"), help: "Read the password from the first line of standard input.")
        var passwordStdin = false
        public init() {}

        public func run() async throws {
            let (password, generated) = try OperatorOutput.password(fromStdin: passwordStdin)
            let created = try await store.withStore { opened in
                try await OperatorOutput.mapped { try await opened.service().createAccount(SignUpRequest(username: username, password: password)) }
            }
            OperatorOutput.line("created account \(created.username) (\(created.accountID))")
            if generated { OperatorOutput.line("password: \(password)") }
        }
    }

    /// `users reset-password USERNAME [--password-stdin]`.
    public struct ResetPassword: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            commandName: "reset-password",
            abstract: "Set a new password and sign out every device of the account.",
            discussion: "Without --password-stdin a random password is made and printed once. " + OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
        @Argument(help: "The account's username.") var username: String
        @Flag(name: .customLong("password-stdin"), help: "Read the password from the first line of standard input.")
        var passwordStdin = false
        public init() {}

        public func run() async throws {
            let (password, generated) = try OperatorOutput.password(fromStdin: passwordStdin)
            guard CredentialRules.isAcceptablePassword(password) else {
                throw OperatorError(
                    "a password is \(CredentialRules.passwordBytes.lowerBound)-\(CredentialRules.passwordBytes.upperBound) UTF-8 bytes, without NUL characters")
            }
            let name = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                let hashing = PasswordHashing.bcrypt(cost: opened.bcryptCost)
                let hash = try await hashing.run { $0.hash(password) }
                guard try await opened.store.resetPassword(accountID: account.id, passwordHash: hash) else {
                    throw OperatorError("no account named '\(username)'")
                }
                return account.username
            }
            OperatorOutput.line("password of \(name) reset; every device of it is signed out")
            if generated { OperatorOutput.line("password: \(password)") }
        }
    }

    /// `users disable USERNAME`.
    public struct Disable: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Stop an account: its devices are signed out and sign-in answers 403 account_disabled.",
            discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
        @Argument(help: "The account's username.") var username: String
        public init() {}

        public func run() async throws {
            let name = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                guard try await opened.store.setDisabled(accountID: account.id, disabledAt: SystemFlakeClock.coarse.unixMilliseconds())
                else { throw OperatorError("no account named '\(username)'") }
                return account.username
            }
            OperatorOutput.line("disabled \(name); its devices are signed out")
        }
    }

    /// `users enable USERNAME`.
    public struct Enable: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Let a disabled account sign in again.", discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
        @Argument(help: "The account's username.") var username: String
        public init() {}

        public func run() async throws {
            let name = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                guard try await opened.store.setDisabled(accountID: account.id, disabledAt: nil) else {
                    throw OperatorError("no account named '\(username)'")
                }
                return account.username
            }
            OperatorOutput.line("enabled \(name)")
        }
    }
}

extension UsersCommand {
    /// `users delete USERNAME --yes`.
    public struct Delete: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Delete an account with its notes, edits and sessions, in one transaction; the username is free again.",
            discussion: """
                Its devices learn it at their next request (401) and keep their notes as signed out. There is no undo                 but a backup: --yes is required. \(OperatorStoreOptions.help)
                """)
        @ParentCommand var daemon: NotesyncdCommand
        var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
        @Argument(help: "The account's username.") var username: String
        @Flag(help: "Really delete it (required).") var yes = false
        public init() {}

        public func validate() throws {
            if !yes { throw ValidationError("Deleting '\(username)' removes its notes for good: pass --yes.") }
        }

        public func run() async throws {
            let (name, notes) = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                let notes = try await opened.store.usage(accountID: account.id)?.noteCount ?? 0
                guard try await opened.store.deleteAccount(id: account.id) else {
                    throw OperatorError("no account named '\(username)'")
                }
                return (account.username, notes)
            }
            OperatorOutput.line("deleted \(name) with its \(notes) note\(notes == 1 ? "" : "s"); the username is free again")
        }
    }
}

/// What the operator commands print, and how they read passwords.
enum OperatorOutput {
    /// One line on standard output.
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Rows as left-aligned columns separated by two spaces.
    static func table(_ rows: [[String]]) {
        let widths = (0..<(rows.first?.count ?? 0)).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let padded = row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }
            line(padded.joined(separator: "  "))
        }
    }

    /// The password from standard input's first line, or a new random one (20 characters from a 56-letter alphabet
    /// without look-alikes: about 116 bits). Returns whether it was generated.
    static func password(fromStdin: Bool) throws -> (String, Bool) {
        if fromStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw OperatorError("--password-stdin: standard input has no password line")
            }
            return (line, false)
        }
        let alphabet = Array("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var generator = SystemRandomNumberGenerator()
        return (String((0..<20).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }), true)
    }

    /// Runs `body`, turning the service's request errors into one operator line (`invalid_field: ...` →
    /// the message).
    static func mapped<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as SyncError {
            throw OperatorError(error.body.message)
        }
    }
}
