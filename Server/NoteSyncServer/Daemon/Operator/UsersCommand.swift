import ArgumentParser
import Foundation
import MiniFlake
import NoteCrypto
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
    public struct List: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "List the accounts: username, ID, created, status, notes, devices.", discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Flag(help: "One JSON array, for scripts.") var json = false
        public init() {}

        public func run() async throws {
            let listed = try await store.withStore { try await $0.store.accountSummaries() }.map(Listed.init)
            try OperatorOutput.print(listed, json: json) {
                [["USERNAME", "ID", "CREATED", "STATUS", "NOTES", "DEVICES"]]
                    + listed.map { user in
                        [
                            user.username, user.id, user.createdAt, user.disabledAt.map { "disabled \($0)" } ?? "enabled", "\(user.notes)",
                            "\(user.sessions)",
                        ]
                    }
            }
        }
    }

    /// One account as `users list --json` prints it (Docs/OPERATIONS.md, "Operator JSON"): the ID as a decimal
    /// string, times in the wire's ISO 8601 form (``WireTime``).
    struct Listed: Encodable {
        var id: String
        var username: String
        var createdAt: String
        var disabled: Bool
        /// Absent while enabled.
        var disabledAt: String?
        /// Notes that are not deleted.
        var notes: Int
        /// Signed-in devices.
        var sessions: Int

        init(_ summary: AccountSummary) {
            id = "\(summary.id)"
            username = summary.username
            createdAt = WireTime.format(unixMilliseconds: summary.createdAt)
            disabled = summary.disabledAt != nil
            disabledAt = summary.disabledAt.map { WireTime.format(unixMilliseconds: $0) }
            notes = summary.notes
            sessions = summary.sessions
        }
    }

    /// `users add USERNAME [--password-stdin]`.
    public struct Add: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Create an account (whatever the sign-up policy).",
            discussion: PasswordOptions.discussion + " " + OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The username (\(CredentialRules.usernameRule)).") var username: String
        @OptionGroup var password: PasswordOptions
        public init() {}

        public func run() async throws {
            let password = try self.password.read()
            let created = try await store.withStore { opened in
                try await OperatorOutput.mapped {
                    try await opened.service().createAccount(SignUpRequest(username: username, password: password.text))
                }
            }
            OperatorOutput.line("created account \(created.username) (\(created.accountID))")
            password.printIfGenerated()
        }
    }

    /// `users reset-password USERNAME [--password-stdin]`.
    public struct ResetPassword: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            commandName: "reset-password",
            abstract: "Set a new password and sign out every device of the account.",
            discussion: PasswordOptions.discussion + " " + OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The account's username.") var username: String
        @OptionGroup var password: PasswordOptions
        public init() {}

        public func run() async throws {
            let password = try self.password.read()
            let (name, encrypted) = try await store.withStore { opened in
                let account = try await opened.account(named: username)
                let hashing = PasswordHashing.bcrypt(cost: opened.bcryptCost)
                guard account.encryption == .plaintext else {
                    // The credential of an encrypted account is the AuthKey of its password, with its own salt.
                    let authKey = try await EncryptedReset.authKey(of: password.text, account: account, store: opened.store)
                    let hash = try await hashing.run { $0.hash(authKey) }
                    guard let keys = opened.store as? any EncryptionStore,
                        try await keys.resetEncryptedPassword(accountID: account.id, passwordHash: hash)
                    else {
                        throw OperatorError("no account named '\(username)'")
                    }
                    return (account.username, true)
                }
                let hash = try await hashing.run { $0.hash(password.text) }
                guard try await opened.store.resetPassword(accountID: account.id, passwordHash: hash) else {
                    throw OperatorError("no account named '\(username)'")
                }
                return (account.username, false)
            }
            if encrypted {
                OperatorOutput.line(
                    "password of \(name) reset; every device of it is signed out; the account is end-to-end encrypted: "
                        + "its notes open again only with its recovery key (notes encryption recover), not with this password alone")
            } else {
                OperatorOutput.line("password of \(name) reset; every device of it is signed out")
            }
            password.printIfGenerated()
        }
    }

    /// `users disable USERNAME`.
    public struct Disable: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Stop an account: its devices are signed out and sign-in answers 403 account_disabled.",
            discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The account's username.") var username: String
        public init() {}

        public func run() async throws {
            let name = try await store.withStore { opened in
                try await opened.setDisabled(named: username, at: SystemFlakeClock.coarse.unixMilliseconds())
            }
            OperatorOutput.line("disabled \(name); its devices are signed out")
        }
    }

    /// `users enable USERNAME`.
    public struct Enable: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Let a disabled account sign in again.", discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The account's username.") var username: String
        public init() {}

        public func run() async throws {
            let name = try await store.withStore { opened in try await opened.setDisabled(named: username, at: nil) }
            OperatorOutput.line("enabled \(name)")
        }
    }
}

extension OpenedStore {
    /// Disables the account named `username` as of `disabledAt` (Unix milliseconds), or enables it (nil); returns its
    /// username as stored.
    ///
    /// - Throws: ``OperatorError`` when there is no such account.
    fileprivate func setDisabled(named username: String, at disabledAt: Int64?) async throws -> String {
        let account = try await account(named: username)
        guard try await store.setDisabled(accountID: account.id, disabledAt: disabledAt) else {
            throw OperatorError("no account named '\(username)'")
        }
        return account.username
    }
}

extension UsersCommand {
    /// `users delete USERNAME --yes`.
    public struct Delete: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Delete an account with its notes, edits and sessions, in one transaction; the username is free again.",
            discussion: """
                Its devices learn it at their next request (401) and keep their notes as signed out. There is no undo but a backup: --yes is required. \(OperatorStoreOptions.help)
                """)
        @ParentCommand var daemon: NotesyncdCommand
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

/// The operator's reset of an end-to-end encrypted account's password (`notesyncd users reset-password`).
enum EncryptedReset {
    /// The AuthKey (its wire form) `password` gives under the account's KDF parameters: what the account's devices
    /// will send when they sign in with it. The account's own cost is followed, whatever it is (the simulation's
    /// testing cost included), up to NoteCrypto's maximum.
    ///
    /// - Throws: ``OperatorError`` when the store has no keys for the account or the KDF cannot run.
    static func authKey(of password: String, account: AccountRecord, store: any NoteStore) async throws -> String {
        guard let keys = try await (store as? any EncryptionStore)?.encryptionKeys(accountID: account.id) else {
            throw OperatorError("the encrypted account '\(account.username)' has no keys in the store")
        }
        do {
            return try PasswordKDF.deriveKeys(password: password, parameters: keys.kdf, policy: .allowInsecureForTesting).authKey.serverPassword
        } catch {
            throw OperatorError("cannot derive the new password's key: \(error)")
        }
    }
}
