import Foundation
import Logging
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

/// Sessions and devices: sign-in (throttled), authentication of every other request, sign-out, the device list and
/// revocations, the password change and the account's deletion.
public final class SessionService: Sendable {
    public let store: any NoteStore
    /// How long a session may go unused (no request since its last-seen time, or since sign-in) before its token
    /// stops working, in milliseconds; nil: never.
    public let sessionIdleLimit: Int64?
    let clock: any FlakeClock
    let mintID: @Sendable () throws -> FlakeID
    let randomBytes: RandomBytes
    let throttle: any SignInThrottling
    /// How passwords are hashed and verified.
    let passwords: PasswordHashing
    /// A hash verified when the username is unknown, so a wrong username costs as much as a wrong password.
    let dummyHash: String
    let logger: Logger
    /// Woken when sessions end, so the account's waiting pulls re-check theirs.
    let changeFeed: ChangeFeed?
    /// What a sign-in answers of an encrypted account.
    let encryption: EncryptionService

    /// Computes one dummy hash with `configuration.passwords` (one bcrypt at the configured cost).
    public init(_ context: ServiceContext, configuration: ServiceConfiguration) {
        store = context.store
        clock = context.clock
        mintID = context.mintID
        logger = context.logger
        changeFeed = context.changeFeed
        sessionIdleLimit = configuration.sessionIdleDays.flatMap { $0 > 0 ? Int64($0) * 86_400_000 : nil }
        randomBytes = configuration.randomBytes
        throttle = configuration.throttle
        passwords = configuration.passwords
        dummyHash = configuration.passwords.hash("notesyncd timing-equalizer")
        encryption = EncryptionService(context, configuration: configuration)
    }

    // MARK: - Sign-in and authentication

    /// Signs in and registers the device (`POST /v1/sessions`).
    ///
    /// A failed sign-in and a refused one (too many attempts) are each logged at `warning`, one line with the
    /// username (only a well-formed one; else `-`), the peer's address and the request id, never the password: see
    /// OPERATIONS.md for a fail2ban filter.
    ///
    /// An account that is not plaintext answers its keys' parameters (``SignInResponse/encryption``); the device's
    /// public key, when given, is kept with the session.
    ///
    /// - Throws: `invalid_field` (device name too long or holding control characters, a password holding NUL, a
    ///   device public key that is not one),
    ///   `too_many_attempts` (with `Retry-After`), `invalid_credentials` (the same for an unknown username and a
    ///   wrong password).
    public func signIn(_ request: SignInRequest, peer: Peer = Peer()) async throws -> SignInResponse {
        if let deviceName = request.deviceName, !CredentialRules.isAcceptableDeviceName(deviceName) {
            throw SyncError(
                .invalidField, "A device name is at most \(SignInRequest.maxDeviceNameLength) characters, without control characters.",
                field: SignInRequest.CodingKeys.deviceName.stringValue
            )
        }
        let devicePublicKey = try request.devicePublicKey.map {
            try EncryptionService.publicKey($0, field: SignInRequest.CodingKeys.devicePublicKey.stringValue)
        }
        // bcrypt stops at a NUL byte: "secret\0anything" would verify as "secret". Refused outright, like at sign-up.
        if request.password.utf8.contains(0) {
            throw SyncError(
                .invalidField, "A password must not hold NUL characters.", field: SignInRequest.CodingKeys.password.stringValue
            )
        }
        // Only well-formed usernames can name an account, so only they are throttled.
        let canonical = CredentialRules.canonicalUsername(request.username)
        var log = logger
        log[metadataKey: "username"] = .string(canonical ?? "-")
        log[metadataKey: "remote_address"] = .string(peer.address ?? "-")
        log[metadataKey: "request_id"] = .string(peer.requestID ?? "-")
        if let canonical, let wait = try await throttle.begin(username: canonical, now: clock.unixMilliseconds()) {
            log.warning("sign-in refused: too many failed attempts", metadata: ["retry_after": "\(wait)"])
            throw SyncError(
                .tooManyAttempts, "Too many failed sign-ins for this username; retry in \(wait) seconds.",
                headers: [SyncError.retryAfterHeader: String(wait)]
            )
        }
        let account: AccountRecord
        do {
            account = try await verifiedAccount(request, canonical: canonical)
        } catch {
            if let canonical { try await throttle.finish(username: canonical, succeeded: false, now: clock.unixMilliseconds()) }
            if (error as? SyncError)?.code == .invalidCredentials { log.warning("sign-in failed: wrong username or password") }
            throw error
        }
        if let canonical { try await throttle.finish(username: canonical, succeeded: true, now: clock.unixMilliseconds()) }
        // Only after the password proved right, so the answer tells nothing to someone without it.
        guard account.disabledAt == nil else {
            log.warning("sign-in refused: account disabled")
            throw SyncError(.accountDisabled, "This account is disabled; ask the server's operator.")
        }

        let token = SessionToken.make(randomBytes: randomBytes)
        let session = SessionRecord(
            id: try mintID(), accountID: account.id, tokenHash: SessionToken.hash(token), deviceName: request.deviceName,
            origin: request.origin, createdAt: clock.unixMilliseconds(), devicePublicKey: devicePublicKey
        )
        let keys = try await encryption.signInAnswer(account)
        try await store.createSession(session)
        logger.info("signed in", metadata: ["account_id": "\(account.id)", "session_id": "\(session.id)"])
        return SignInResponse(token: token, accountID: account.id, username: account.username, sessionID: session.id, encryption: keys)
    }

    /// The account whose password `request` holds, after exactly one bcrypt verification whatever the outcome, so an
    /// unknown username or an unacceptable password answers as slowly as a wrong password (no timing oracle).
    ///
    /// - Throws: `invalid_credentials`, or a store error.
    private func verifiedAccount(_ request: SignInRequest, canonical: String?) async throws -> AccountRecord {
        let account = try await canonical.asyncFlatMap { try await store.account(byUsername: $0) }
        let acceptable = CredentialRules.isAcceptablePassword(request.password)
        let candidate = acceptable ? request.password : "-"
        let hash = (acceptable ? account?.passwordHash : nil) ?? dummyHash
        let verified = try await passwords.run { $0.verify(candidate, hash) }
        guard let account, acceptable, verified else {
            throw SyncError(.invalidCredentials, "Wrong username or password.")
        }
        return account
    }

    /// The session a bearer token stands for.
    ///
    /// - Throws: `unauthorized` when the token is missing, malformed, unknown, revoked or expired (unused for longer
    ///   than ``sessionIdleLimit``: the expired session is deleted then).
    public func authenticate(bearerToken: String?) async throws -> SessionRecord {
        guard let token = bearerToken else {
            throw SyncError(.unauthorized, "This endpoint needs Authorization: Bearer <token>.")
        }
        guard SessionToken.isWellFormed(token), let session = try await store.session(byTokenHash: SessionToken.hash(token))
        else {
            throw SyncError(.unauthorized, "The bearer token is not valid (unknown, revoked or malformed).")
        }
        if isExpired(session, now: clock.unixMilliseconds()) {
            _ = try? await store.deleteSession(id: session.id, accountID: session.accountID)
            logger.info("session expired", metadata: ["account_id": "\(session.accountID)", "session_id": "\(session.id)"])
            throw SyncError(.unauthorized, "The session expired after going unused; sign in again (nothing on the device is lost).")
        }
        await markSeen(session)
        return session
    }

    /// Whether `session` has gone unused (no request since its last-seen time, or since sign-in when it has none)
    /// for longer than ``sessionIdleLimit``. A server clock that went back expires nothing.
    public func isExpired(_ session: SessionRecord, now: Int64) -> Bool {
        guard let limit = sessionIdleLimit else { return false }
        return now - (session.lastSeenAt ?? session.createdAt) > limit
    }

    /// Signs out (`DELETE /v1/sessions/current`): the session's token stops working at once.
    public func signOut(_ session: SessionRecord) async throws {
        if try await store.deleteSession(id: session.id, accountID: session.accountID) { sessionsEnded(accountID: session.accountID) }
    }

    // MARK: - Devices, password, deletion

    /// How often a session's last-seen time is written at most (a request within it writes nothing).
    public static let lastSeenResolution: Int64 = 60_000

    /// Records a request of `session` when its last-seen time is a minute old or unset: at most one small write per
    /// session a minute. A failure to record it is logged and never fails the request.
    func markSeen(_ session: SessionRecord) async {
        let now = clock.unixMilliseconds()
        if let seen = session.lastSeenAt, now - seen < Self.lastSeenResolution { return }
        do {
            try await store.markSessionSeen(id: session.id, accountID: session.accountID, at: now, ifBefore: now - Self.lastSeenResolution)
        } catch {
            logger.debug("could not record a session's last-seen time", metadata: ["session_id": "\(session.id)", "error": "\(error)"])
        }
    }

    /// The account's signed-in devices (`GET /v1/sessions`), most recently signed in first, the asking one marked.
    public func sessions(_ session: SessionRecord) async throws -> SessionListResponse {
        let now = clock.unixMilliseconds()
        let records = try await store.sessions(accountID: session.accountID, limit: SessionListResponse.maxListed)
        return SessionListResponse(
            sessions: records.filter { !isExpired($0, now: now) }.map { record in
                SessionInfo(
                    sessionID: record.id, deviceName: record.deviceName, origin: record.origin,
                    signedInAt: WireTime.format(unixMilliseconds: record.createdAt),
                    lastSeenAt: record.lastSeenAt.map { WireTime.format(unixMilliseconds: $0) }, current: record.id == session.id,
                    publicKey: record.devicePublicKey?.text
                )
            })
    }

    /// Signs one device of the account out (`POST /v1/sessions/revoke`): its token stops working at once. Revoking the
    /// asking session is a sign-out.
    ///
    /// - Throws: `unknown_session` (404) when the ID is not a session of this account (another account's sessions
    ///   answer the same: nothing leaks).
    public func revokeSession(_ request: RevokeSessionRequest, session: SessionRecord) async throws {
        guard try await store.deleteSession(id: request.sessionID, accountID: session.accountID) else {
            throw SyncError(
                .unknownSession, "No session \(request.sessionID) in this account (already revoked?).",
                field: RevokeSessionRequest.CodingKeys.sessionID.stringValue)
        }
        sessionsEnded(accountID: session.accountID)
        logger.info("session revoked", metadata: ["account_id": "\(session.accountID)", "session_id": "\(request.sessionID)"])
    }

    /// Signs every other device of the account out (`POST /v1/sessions/revoke-others`).
    public func revokeOtherSessions(_ session: SessionRecord) async throws -> RevokedSessionsResponse {
        let count = try await store.deleteSessions(accountID: session.accountID, except: session.id)
        if count > 0 { sessionsEnded(accountID: session.accountID) }
        logger.info("other sessions revoked", metadata: ["account_id": "\(session.accountID)", "count": "\(count)"])
        return RevokedSessionsResponse(revokedSessions: count)
    }

    /// Changes the password (`POST /v1/account/password`) and signs every other device out, in one transaction.
    ///
    /// - Throws: `invalid_field` (the new password breaks ``CredentialRules``; the account is encrypted, whose password
    ///   change is not served yet), `too_many_attempts`,
    ///   `wrong_password` (403: the session stays valid), `unauthorized` (the account no longer exists).
    public func changePassword(_ request: ChangePasswordRequest, session: SessionRecord, peer: Peer = Peer()) async throws
        -> RevokedSessionsResponse
    {
        guard CredentialRules.isAcceptablePassword(request.newPassword) else {
            throw SyncError(
                .invalidField,
                "A password is \(CredentialRules.passwordBytes.lowerBound)–\(CredentialRules.passwordBytes.upperBound) UTF-8 bytes, without NUL characters.",
                field: ChangePasswordRequest.CodingKeys.newPassword.stringValue)
        }
        // An encrypted account's key is wrapped by its password: a new password comes with the key re-wrapped.
        // The forms are checked before the password, so a malformed request counts no failure.
        let encrypted = try await store.account(byID: session.accountID).map { $0.encryption != .plaintext } ?? false
        if encrypted || request.encryption != nil {
            return try await changeEncryptedPassword(request, session: session, peer: peer, encrypted: encrypted)
        }
        let account = try await verifyPassword(
            request.currentPassword, session: session, field: ChangePasswordRequest.CodingKeys.currentPassword.stringValue, peer: peer)
        let password = request.newPassword
        let hash = try await passwords.run { $0.hash(password) }
        let count: Int
        do {
            count = try await store.changePassword(accountID: account.id, passwordHash: hash, keepingSession: session.id)
        } catch NoteStoreError.accountNotFound {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
        if count > 0 { sessionsEnded(accountID: account.id) }
        logger.info("password changed", metadata: ["account_id": "\(account.id)", "revoked_sessions": "\(count)"])
        return RevokedSessionsResponse(revokedSessions: count)
    }

    /// The password change of an encrypted account: both passwords are AuthKeys, `encryption` carries the current
    /// generation (or the rotation's) wrapped by the new password, its KDF parameters and public key, and optionally a
    /// rotation; all of it, the new hash and the other sessions' end in one transaction.
    ///
    /// - Throws: `invalid_field` (`encryption` missing, or given for a plaintext account; a field not of its form),
    ///   `too_many_attempts`, `wrong_password`, `stale_generation` (409: the wrapped key or the rotation is not of the
    ///   account's generation), `unknown_session` (404).
    private func changeEncryptedPassword(
        _ request: ChangePasswordRequest, session: SessionRecord, peer: Peer, encrypted: Bool
    ) async throws -> RevokedSessionsResponse {
        typealias Key = ChangePasswordRequest.CodingKeys
        typealias Part = PasswordChangeEncryption.CodingKeys
        guard encrypted else {
            throw SyncError(.invalidField, "This account is not end-to-end encrypted: a password change carries no encryption.", field: Key.encryption.stringValue)
        }
        guard let change = request.encryption else {
            throw SyncError(
                .invalidField, "This account is end-to-end encrypted: a password change carries its key re-wrapped by the new password.",
                field: Key.encryption.stringValue)
        }
        guard EncryptionService.isAuthKeyForm(request.newPassword) else {
            throw SyncError(
                .invalidField, "An encrypted account's password is its AuthKey: 64 lowercase hexadecimal characters.",
                field: Key.newPassword.stringValue)
        }
        let prefix = Key.encryption.stringValue + "."
        let rotation = try change.rotation.map { try EncryptionService.rotation($0, prefix: prefix + Part.rotation.stringValue + ".") }
        if change.rotation?.recovery != nil {
            throw SyncError(
                .invalidField, "A password change keeps the recovery key; replace it with a rotation (POST /v1/account/keys/rotate).",
                field: prefix + Part.rotation.stringValue + "." + RotateKeysRequest.CodingKeys.recovery.stringValue)
        }
        let kdf = try EncryptionService.kdfParameters(change.kdf, field: prefix + Part.kdf.stringValue)
        let wrappedKey: WrappedAccountKey
        do {
            wrappedKey = try WrappedAccountKey(text: change.wrappedKey)
        } catch {
            throw SyncError(.invalidField, "Not a wrapped account key (\(error)).", field: prefix + Part.wrappedKey.stringValue)
        }
        guard wrappedKey.wrapper == .password, rotation.map({ $0.generation == wrappedKey.generation }) ?? true else {
            throw SyncError(
                .invalidField, "wrappedKey is the account's generation after the change (the rotation's, if any) wrapped by the new password.",
                field: prefix + Part.wrappedKey.stringValue)
        }
        let passwordPublicKey = try EncryptionService.publicKey(change.passwordPublicKey, field: prefix + Part.passwordPublicKey.stringValue)
        let account = try await verifyPassword(request.currentPassword, session: session, field: Key.currentPassword.stringValue, peer: peer)
        guard let keyStore = store as? any EncryptionStore, let stored = try await keyStore.encryptionKeys(accountID: account.id) else {
            throw SyncError(.internalError, "The encrypted account \(account.id) has no keys.")
        }
        let password = request.newPassword
        let hash = try await passwords.run { $0.hash(password) }
        let keys = AccountKeys(
            kdf: kdf, wrappedKey: wrappedKey, recoveryWrappedKey: stored.recoveryWrappedKey, recoveryPublicKey: stored.recoveryPublicKey,
            passwordPublicKey: passwordPublicKey)
        let (outcome, count) = try await keyStore.changeEncryptedPassword(
            accountID: account.id, passwordHash: hash, keys: keys, keepingSession: session.id, rotation: rotation)
        try EncryptionService.check(outcome, prefix: rotation == nil ? prefix : prefix + Part.rotation.stringValue + ".")
        if count > 0 { sessionsEnded(accountID: account.id) }
        logger.info(
            "password changed", metadata: ["account_id": "\(account.id)", "revoked_sessions": "\(count)", "key_generation": "\(wrappedKey.generation)"])
        return RevokedSessionsResponse(revokedSessions: count)
    }

    /// Sets up a plaintext account as end-to-end encrypted (`POST /v1/account/encryption`): an account the operator
    /// made, at its first sign-in by a client that supports encryption (it holds no note: encrypted at once), or an
    /// account that holds notes (`notes encryption enable`: it starts `converting`, see
    /// ``EncryptionStore/setUpEncryption(accountID:passwordHash:keys:keepingSession:)``). The current password proves
    /// the request; the AuthKey becomes the credential; every other device is signed out.
    ///
    /// - Throws: `invalid_field` (the new password not an AuthKey, key material not of its form, an `accountID` that
    ///   is not the account's), `too_many_attempts`, `wrong_password` (403), `already_encrypted` (409).
    public func setUpEncryption(_ request: AccountEncryptionRequest, session: SessionRecord, peer: Peer = Peer()) async throws
        -> AccountEncryptionResponse
    {
        typealias Key = AccountEncryptionRequest.CodingKeys
        let prefix = Key.encryption.stringValue + "."
        let keys = try EncryptionService.setup(
            request.encryption, password: request.newPassword, prefix: prefix, passwordField: Key.newPassword.stringValue)
        guard request.encryption.accountID == session.accountID else {
            throw SyncError(
                .invalidField, "The keys must be bound to this account's ID (\(session.accountID)).",
                field: prefix + EncryptionSetup.CodingKeys.accountID.stringValue)
        }
        let account = try await verifyPassword(request.currentPassword, session: session, field: Key.currentPassword.stringValue, peer: peer)
        guard let keyStore = store as? any EncryptionStore else {
            throw SyncError(.internalError, "This server's store keeps no encryption keys.")
        }
        let password = request.newPassword
        let hash = try await passwords.run { $0.hash(password) }
        switch try await keyStore.setUpEncryption(accountID: account.id, passwordHash: hash, keys: keys, keepingSession: session.id) {
        case .done(let count, let left):
            if count > 0 { sessionsEnded(accountID: account.id) }
            logger.info(
                left > 0 ? "account converting to encrypted" : "account set up as encrypted",
                metadata: ["account_id": "\(account.id)", "revoked_sessions": "\(count)", "plaintext_notes": "\(left)"])
            return AccountEncryptionResponse(revokedSessions: count, encryption: left > 0 ? .converting : .encrypted, plaintextNotes: left)
        case .notPlaintext:
            throw SyncError(.alreadyEncrypted, "This account is already end-to-end encrypted.")
        }
    }

    /// Deletes the account (`POST /v1/account/delete`): its notes, applied edits and sessions, in one transaction; the
    /// username is free again. Every device's token stops working (401 `unauthorized`).
    ///
    /// - Throws: `too_many_attempts`, `wrong_password` (403), `unauthorized` (already deleted).
    public func deleteAccount(_ request: DeleteAccountRequest, session: SessionRecord, peer: Peer = Peer()) async throws {
        let account = try await verifyPassword(
            request.password, session: session, field: DeleteAccountRequest.CodingKeys.password.stringValue, peer: peer)
        guard try await store.deleteAccount(id: account.id) else {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
        sessionsEnded(accountID: account.id)
        logger.info("account deleted", metadata: ["account_id": "\(account.id)"])
    }

    /// Sessions of the account ended (a sign-out, a revocation, a password change, the account's deletion): wakes the
    /// account's waiting pulls on this daemon, so that each re-checks its own session and a device signed out learns it
    /// at once (401) instead of when its wait ends. Other daemons on PostgreSQL hear the store's NOTIFY; the operator's
    /// commands on SQLite run in another process, which the daemon notices on its feed's next sweep
    /// (``ExternalCommitWatch``). Never with a change: ``PullDriver`` re-checks the session before each re-read, and at
    /// the wait's deadline.
    func sessionsEnded(accountID: FlakeID) {
        changeFeed?.signal(account: accountID)
    }

    /// The session's account, when `password` is its password: one bcrypt verification, counted by the sign-in
    /// throttle of the account's username like a sign-in (so a stolen token cannot be used to guess the password).
    ///
    /// - Throws: `too_many_attempts` (with `Retry-After`), `wrong_password` (403, `field` names the password field),
    ///   `unauthorized` when the account no longer exists.
    private func verifyPassword(_ password: String, session: SessionRecord, field: String, peer: Peer) async throws -> AccountRecord {
        guard let account = try await store.account(byID: session.accountID) else {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
        var log = logger
        log[metadataKey: "username"] = .string(account.username)
        log[metadataKey: "remote_address"] = .string(peer.address ?? "-")
        log[metadataKey: "request_id"] = .string(peer.requestID ?? "-")
        if let wait = try await throttle.begin(username: account.username, now: clock.unixMilliseconds()) {
            log.warning("password check refused: too many failed attempts", metadata: ["retry_after": "\(wait)"])
            throw SyncError(
                .tooManyAttempts, "Too many failed password checks for this account; retry in \(wait) seconds.",
                headers: [SyncError.retryAfterHeader: String(wait)]
            )
        }
        let acceptable = CredentialRules.isAcceptablePassword(password)
        let candidate = acceptable ? password : "-"
        let hash = acceptable ? account.passwordHash : dummyHash
        let verified: Bool
        do {
            verified = try await passwords.run { $0.verify(candidate, hash) } && acceptable
        } catch {
            try? await throttle.finish(username: account.username, succeeded: false, now: clock.unixMilliseconds())
            throw error
        }
        try await throttle.finish(username: account.username, succeeded: verified, now: clock.unixMilliseconds())
        guard verified else {
            log.warning("password check failed")
            throw SyncError(.wrongPassword, "The password is wrong.", field: field)
        }
        return account
    }
}

extension Optional {
    /// `flatMap` with an async transform.
    func asyncFlatMap<U>(_ transform: (Wrapped) async throws -> U?) async rethrows -> U? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
