import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol

/// Accounts and sign-up: `POST /v1/accounts` under the sign-up policy (open, closed, with an invite code),
/// `notesyncd users add`, and `GET /v1/account`.
public final class AccountService: Sendable {
    public let store: any NoteStore
    /// Who may sign up (`POST /v1/accounts`).
    public let signUpPolicy: SignUpPolicy
    /// The per-account limits `GET /v1/account` reports.
    public let quota: AccountQuota
    let clock: any FlakeClock
    let mintID: @Sendable () throws -> FlakeID
    /// Counts failed sign-ups with an invite code, per address.
    let throttle: any SignInThrottling
    /// How new passwords are hashed.
    let passwords: PasswordHashing
    let logger: Logger

    public init(_ context: ServiceContext, configuration: ServiceConfiguration) {
        store = context.store
        clock = context.clock
        mintID = context.mintID
        logger = context.logger
        signUpPolicy = configuration.signUpPolicy
        quota = configuration.quota
        throttle = configuration.throttle
        passwords = configuration.passwords
    }

    /// Creates an account (`POST /v1/accounts`) as the sign-up policy allows: open, closed, or with an invite code
    /// (``signUpWithInvite(_:peer:)``). Under `open` an invite code is ignored.
    ///
    /// - Throws: `sign_up_closed` when the policy is closed (before anything else, so a closed server tells nothing
    ///   about its usernames, whatever code the request holds), `invite_required`, `invalid_invite`,
    ///   `too_many_attempts` (policy `invite`), `invalid_field` (username or password breaks ``CredentialRules``),
    ///   `username_taken`.
    public func signUp(_ request: SignUpRequest, peer: Peer = Peer()) async throws -> AccountResponse {
        switch signUpPolicy {
        case .open:
            return try await createAccount(request)
        case .closed:
            throw SyncError(.signUpClosed, "This server does not take sign-ups; ask its operator for an account.")
        case .invite:
            return try await signUpWithInvite(request, peer: peer)
        }
    }

    /// Creates an account whatever the sign-up policy (`POST /v1/accounts` when open, `notesyncd users add`).
    ///
    /// - Throws: `invalid_field` (username or password breaks ``CredentialRules``; with `encryption`, a password that
    ///   is not an AuthKey or key material that is not of its form: ``EncryptionService/setup(_:password:prefix:passwordField:)``),
    ///   `username_taken`.
    public func createAccount(_ request: SignUpRequest) async throws -> AccountResponse {
        try await createAccount(request, consuming: nil)
    }

    /// Creates an account; with `invite`, consumes one use of that invite in the transaction inserting the account.
    ///
    /// - Throws: `invalid_field`, `username_taken`, `invalid_invite` (the invite's last use went meanwhile).
    private func createAccount(
        _ request: SignUpRequest, consuming invite: (store: any InviteStore, codeHash: String, id: Int64)?
    ) async throws -> AccountResponse {
        guard let username = CredentialRules.canonicalUsername(request.username) else {
            throw Self.invalidUsername
        }
        guard CredentialRules.isAcceptablePassword(request.password) else {
            throw Self.invalidPassword
        }
        let keys = try request.encryption.map {
            try EncryptionService.setup(
                $0, password: request.password, prefix: SignUpRequest.CodingKeys.encryption.stringValue + ".",
                passwordField: SignUpRequest.CodingKeys.password.stringValue)
        }
        if try await store.account(byUsername: username) != nil { throw Self.usernameTaken }
        if let setup = request.encryption { try await checkAccountID(setup.accountID) }
        let password = request.password
        let hash = try await passwords.run { $0.hash(password) }
        let account = AccountRecord(
            id: try request.encryption?.accountID ?? mintID(), username: username, passwordHash: hash, createdAt: clock.unixMilliseconds(),
            encryption: keys == nil ? .plaintext : .encrypted, keyGeneration: keys == nil ? 0 : 1, keys: keys)
        do {
            if let invite {
                try await invite.store.createAccount(account, consumingInvite: invite.codeHash, now: clock.unixMilliseconds())
            } else {
                try await store.createAccount(account)
            }
        } catch NoteStoreError.usernameTaken {
            throw Self.usernameTaken
        } catch NoteStoreError.inviteNotUsable {
            throw Self.invalidInvite
        }
        var metadata: Logger.Metadata = ["account_id": "\(account.id)", "encryption": "\(account.encryption.rawValue)"]
        if let invite { metadata["invite_id"] = "\(invite.id)" }
        logger.info("account created", metadata: metadata)
        return AccountResponse(accountID: account.id, username: account.username, encryption: account.encryption)
    }

    /// Sign-up under the policy `invite`: the request must hold a usable invite code (``InviteCode``), one use of
    /// which the account takes (in the transaction inserting it, so of two sign-ups racing for a last use exactly
    /// one gets it).
    ///
    /// Order: no code → `invite_required`; a code that is not of the form → `invalid_invite` without a lookup; then
    /// the attempt is counted by the sign-in throttle under the key `invite@ADDRESS` (the peer's address; usernames
    /// hold no `@`): each sign-up that does not create an account is a failure, five in fifteen minutes refuse the
    /// next (`too_many_attempts`), so a client cannot try codes at full speed. A sign-up that creates an account does
    /// not count, and does not clear the address's earlier failures either (``AttemptOutcome/successKeepingFailures``). Only then is the code looked up: an
    /// unknown, used-up, expired or revoked one is `invalid_invite` (one answer for all four). The username and the
    /// password are checked only with a usable code, so a request without one learns nothing about usernames.
    private func signUpWithInvite(_ request: SignUpRequest, peer: Peer) async throws -> AccountResponse {
        guard let invites = store as? any InviteStore else {
            throw SyncError(.internalError, "This server's store keeps no invite codes.")
        }
        guard let text = request.invite else {
            throw SyncError(
                .inviteRequired, "This server takes sign-ups only with an invite code; ask its operator for one.",
                field: SignUpRequest.CodingKeys.invite.stringValue)
        }
        var log = logger
        log[metadataKey: "remote_address"] = .string(peer.address ?? "-")
        log[metadataKey: "request_id"] = .string(peer.requestID ?? "-")
        guard let code = InviteCode.canonical(text) else {
            log.warning("sign-up refused: invalid invite code")
            throw Self.invalidInvite
        }
        let key = "invite@" + (peer.address ?? "-")
        if let wait = try await throttle.begin(username: key, now: clock.unixMilliseconds()) {
            log.warning("sign-up refused: too many failed attempts", metadata: ["retry_after": "\(wait)"])
            throw SyncError(
                .tooManyAttempts, "Too many failed sign-ups from this address; retry in \(wait) seconds.",
                headers: [SyncError.retryAfterHeader: String(wait)]
            )
        }
        do {
            let codeHash = InviteCodes.hash(code)
            guard let invite = try await invites.invite(byCodeHash: codeHash), invite.isUsable(at: clock.unixMilliseconds()) else {
                throw Self.invalidInvite
            }
            let response = try await createAccount(request, consuming: (invites, codeHash, invite.id))
            // A success does not clear the address's failures: a code good for several sign-ups must not let its
            // holder guess between them without end.
            try await throttle.finish(username: key, outcome: .successKeepingFailures, now: clock.unixMilliseconds())
            return response
        } catch {
            try? await throttle.finish(username: key, succeeded: false, now: clock.unixMilliseconds())
            if (error as? SyncError)?.code == .invalidInvite { log.warning("sign-up refused: invalid invite code") }
            throw error
        }
    }

    /// Checks a client-minted account ID (``EncryptionSetup/accountID``): minted within
    /// ``EncryptionLimits/accountIDWindow`` of the server's clock, and no account's yet.
    ///
    /// - Throws: `invalid_field` (`encryption.accountID`).
    private func checkAccountID(_ id: FlakeID) async throws {
        let field = "\(SignUpRequest.CodingKeys.encryption.stringValue).\(EncryptionSetup.CodingKeys.accountID.stringValue)"
        let skew = id.unixMilliseconds - clock.unixMilliseconds()
        guard EncryptionLimits.accountIDWindow.contains(skew) else {
            throw SyncError(
                .invalidField, "The account ID was minted \(skew / 1000) s from the server's time; mint it now (is the device's clock right?).",
                field: field)
        }
        if try await store.account(byID: id) != nil {
            throw SyncError(.invalidField, "The account ID is taken; mint another.", field: field)
        }
    }

    private static let invalidInvite = SyncError(
        .invalidInvite, "The invite code is not valid: unknown, used up, expired or revoked; ask the server's operator for a new one.",
        field: SignUpRequest.CodingKeys.invite.stringValue)

    private static let usernameTaken = SyncError(.usernameTaken, "That username is already registered.", field: SignUpRequest.CodingKeys.username.stringValue)
    private static let invalidUsername = SyncError(
        .invalidField,
        "A username is \(CredentialRules.usernameLength.lowerBound)–\(CredentialRules.usernameLength.upperBound) characters from a–z, 0–9, '.', '_' and '-'.",
        field: SignUpRequest.CodingKeys.username.stringValue
    )
    private static let invalidPassword = SyncError(
        .invalidField,
        "A password is \(CredentialRules.passwordBytes.lowerBound)–\(CredentialRules.passwordBytes.upperBound) UTF-8 bytes, without NUL characters.",
        field: SignUpRequest.CodingKeys.password.stringValue
    )

    /// The authenticated account (`GET /v1/account`), with its usage and limits.
    public func account(_ session: SessionRecord) async throws -> AccountResponse {
        guard let account = try await store.account(byID: session.accountID),
            let usage = try await store.usage(accountID: session.accountID)
        else {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
        return AccountResponse(
            accountID: account.id, username: account.username,
            usage: StorageUsage(
                notes: usage.noteCount, textBytes: usage.textBytes, replayTextBytes: usage.replayTextBytes,
                historyBytes: usage.historyBytes, chunkBytes: usage.chunkBytes, maxNotes: quota.maxNotes,
                maxTextBytes: quota.maxTextBytes),
            encryption: account.encryption,
            plaintextNotes: account.encryption == .converting ? try await (store as? any EncryptionStore)?.plaintextNoteCount(accountID: account.id) : nil)
    }
}
