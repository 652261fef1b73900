import Foundation
import HummingbirdBcrypt
import Logging
import MiniFlake
import NIOPosix
import NoteSyncProtocol
import ServiceLifecycle

/// The sync server's rules: accounts, sessions, push and pull, over a ``NoteStore``.
///
/// Transport-neutral: it takes decoded requests and returns response values, throwing ``SyncError`` for every
/// client mistake (other errors are server faults). The clock, the ID source and the random source are injected.
///
/// A class, not a struct: every async frame of a request that holds the service (a waiting pull keeps a whole chain
/// of them alive) then holds one reference instead of a copy of all its fields (see PERFORMANCE.md, live sync).
public final class SyncService: Sendable {
    /// The store.
    public let store: any NoteStore
    /// The limits the server enforces and `GET /v1/info` serves.
    public let limits: SyncLimits
    /// The bcrypt cost of new password hashes (4...31).
    public let bcryptCost: Int
    /// The server's version string, served by `GET /v1/info`.
    public let serverVersion: String
    /// Who may sign up (`POST /v1/accounts`).
    public let signUpPolicy: SignUpPolicy
    /// The per-account limits pushes enforce and `GET /v1/account` reports.
    public let quota: AccountQuota
    /// How long a session may go unused (no request since its last-seen time, or since sign-in) before its token
    /// stops working, in milliseconds; nil: never.
    public let sessionIdleLimit: Int64?

    let clock: any FlakeClock
    let mintID: @Sendable () throws -> FlakeID
    let randomBytes: RandomBytes
    let throttle: any SignInThrottling
    /// How passwords are hashed and verified (bcrypt at ``bcryptCost`` unless the caller chose otherwise).
    let passwords: PasswordHashing
    /// A hash verified when the username is unknown, so a wrong username costs as much as a wrong password.
    let dummyHash: String
    let logger: Logger
    /// The waiting pulls; nil when pulls are never held open (`wait` is then accepted and ignored).
    public let changeFeed: ChangeFeed?
    /// Runs pulls (`GET /v1/notes/changes`), waiting ones included.
    public let pulls: PullDriver

    /// A service over `store`.
    ///
    /// - Parameters:
    ///   - bcryptCost: Cost of new password hashes (default 12; tests use 4). Computes one dummy hash at this cost.
    ///   - clock: Server time (sessions, note timestamps, the sign-in throttle).
    ///   - mintID: Mints account, session and note IDs (the daemon's `FlakeGenerator`).
    ///   - randomBytes: The source of token bytes (``RandomBytes/system`` in production).
    ///   - throttle: Failed sign-in bookkeeping (in memory by default; ``PostgresSignInThrottle`` for daemons sharing
    ///     a PostgreSQL database).
    ///   - passwordHashing: Replaces bcrypt (nil: bcrypt at `bcryptCost`). Only for callers that never store real
    ///     passwords, such as the simulation; the daemon always uses bcrypt.
    ///   - signUpPolicy: Who may sign up. Open by default here (tests, the simulation); the daemon's own default is
    ///     ``SignUpPolicy/closed`` (``ServerConfiguration/signUp``).
    ///   - quota: The per-account limits (``AccountQuota/default`` unless the daemon was told otherwise).
    ///   - sessionIdleDays: Days a session may go unused before it expires; nil or 0: never (the default here; the
    ///     daemon's default is 180, ``ServerConfiguration/sessionIdleDays``).
    ///   - changeFeed: Holds waiting pulls and is signalled after each push that changed notes (nil: no waiting).
    public init(
        store: any NoteStore, limits: SyncLimits = .default, quota: AccountQuota = .default, bcryptCost: Int = 12,
        serverVersion: String = NotesyncdVersion.current,
        clock: any FlakeClock, mintID: @escaping @Sendable () throws -> FlakeID, randomBytes: RandomBytes = .system,
        throttle: any SignInThrottling = SignInThrottle(), passwordHashing: PasswordHashing? = nil,
        signUpPolicy: SignUpPolicy = .open, sessionIdleDays: Int? = nil, logger: Logger, changeFeed: ChangeFeed? = nil
    ) {
        self.signUpPolicy = signUpPolicy
        self.sessionIdleLimit = sessionIdleDays.flatMap { $0 > 0 ? Int64($0) * 86_400_000 : nil }
        self.changeFeed = changeFeed
        self.pulls = PullDriver(store: store, limits: limits, feed: changeFeed, logger: logger)
        self.store = store
        self.limits = limits
        self.quota = quota
        self.bcryptCost = bcryptCost
        self.serverVersion = serverVersion
        self.clock = clock
        self.mintID = mintID
        self.randomBytes = randomBytes
        self.throttle = throttle
        self.logger = logger
        let passwords = passwordHashing ?? .bcrypt(cost: bcryptCost)
        self.passwords = passwords
        self.dummyHash = passwords.hash("notesyncd timing-equalizer")
    }

    // MARK: - Accounts and sessions

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
    /// - Throws: `invalid_field` (username or password breaks ``CredentialRules``), `username_taken`.
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
        if try await store.account(byUsername: username) != nil { throw Self.usernameTaken }
        let password = request.password
        let hash = try await passwords.run { $0.hash(password) }
        let account = AccountRecord(id: try mintID(), username: username, passwordHash: hash, createdAt: clock.unixMilliseconds())
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
        var metadata: Logger.Metadata = ["account_id": "\(account.id)"]
        if let invite { metadata["invite_id"] = "\(invite.id)" }
        logger.info("account created", metadata: metadata)
        return AccountResponse(accountID: account.id, username: account.username)
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

    /// Who sent a request, for the log lines operators watch (failed sign-ins and lockouts).
    public struct Peer: Sendable, Equatable {
        /// The connected peer's IP address (the proxy's, behind a reverse proxy); nil in process.
        public var address: String?
        /// The request id the answer carries in `X-Request-Id`.
        public var requestID: String?

        public init(address: String? = nil, requestID: String? = nil) {
            self.address = address
            self.requestID = requestID
        }
    }

    /// Signs in and registers the device (`POST /v1/sessions`).
    ///
    /// A failed sign-in and a refused one (too many attempts) are each logged at `warning`, one line with the
    /// username (only a well-formed one; else `-`), the peer's address and the request id, never the password: see
    /// OPERATIONS.md for a fail2ban filter.
    ///
    /// - Throws: `invalid_field` (device name too long or holding control characters, a password holding NUL),
    ///   `too_many_attempts` (with `Retry-After`), `invalid_credentials` (the same for an unknown username and a
    ///   wrong password).
    public func signIn(_ request: SignInRequest, peer: Peer = Peer()) async throws -> SignInResponse {
        if let deviceName = request.deviceName, !CredentialRules.isAcceptableDeviceName(deviceName) {
            throw SyncError(
                .invalidField, "A device name is at most \(SignInRequest.maxDeviceNameLength) characters, without control characters.",
                field: SignInRequest.CodingKeys.deviceName.stringValue
            )
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
            origin: request.origin, createdAt: clock.unixMilliseconds()
        )
        try await store.createSession(session)
        logger.info("signed in", metadata: ["account_id": "\(account.id)", "session_id": "\(session.id)"])
        return SignInResponse(token: token, accountID: account.id, username: account.username, sessionID: session.id)
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
                notes: usage.noteCount, textBytes: usage.textBytes, replayTextBytes: usage.replayTextBytes, maxNotes: quota.maxNotes,
                maxTextBytes: quota.maxTextBytes))
    }

    // MARK: - Devices, password, account

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
                    lastSeenAt: record.lastSeenAt.map { WireTime.format(unixMilliseconds: $0) }, current: record.id == session.id
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
    /// - Throws: `invalid_field` (the new password breaks ``CredentialRules``), `too_many_attempts`,
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
    /// commands on SQLite run in another process, and their waiters learn it on their next wake-up or deadline (never
    /// with a change: ``PullDriver`` re-checks the session before each re-read).
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

    // MARK: - Sync

    /// Applies a batch of changes (`POST /v1/notes/push`): one transaction, one result per change, in order.
    ///
    /// - Throws: `batch_too_large` when the batch has more than `maxBatchChanges` changes (nothing is applied).
    public func push(_ request: PushRequest, session: SessionRecord) async throws -> PushResponse {
        guard request.changes.count <= limits.maxBatchChanges else {
            throw SyncError(
                .batchTooLarge, "A push has at most \(limits.maxBatchChanges) changes; this one has \(request.changes.count)."
            )
        }
        let context = PushContext(
            limits: limits, now: clock.unixMilliseconds(), pusher: session.origin ?? session.id, quota: quota, mintID: mintID)
        do {
            let results = try await store.push(accountID: session.accountID, changes: request.changes, context: context)
            // The push is durable now: wake the account's waiting pulls on this daemon (other daemons on PostgreSQL
            // hear the store's NOTIFY).
            if let changeFeed, results.contains(where: Self.wroteNote) { changeFeed.signal(account: session.accountID) }
            return PushResponse(results: results)
        } catch NoteStoreError.accountNotFound {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
    }

    /// Whether a change's result means the push wrote a note (and moved the account's change sequence). Erring
    /// towards true costs a waiter one re-read, never a missed change.
    static func wroteNote(_ result: ChangeResult) -> Bool {
        guard !result.replayed else { return false }
        switch result.status {
        case .unchanged, .rejected: return false
        default: return true
        }
    }

    // MARK: - Server

    /// `GET /v1/info`.
    public var info: ServerInfo {
        ServerInfo(version: serverVersion, limits: limits, live: changeFeed?.limits)
    }

    /// `GET /healthz`: pings the store.
    ///
    /// - Throws: `unavailable` when the store does not answer.
    public func health() async throws -> HealthResponse {
        do {
            try await store.ping()
        } catch {
            throw SyncError(.unavailable, "The database does not answer.", underlying: error)
        }
        return HealthResponse(database: store.backendName)
    }
}

/// The daemon's version, served by `GET /v1/info`: the release's (``FlakeNotesVersion``), which `notes` shows too.
public enum NotesyncdVersion {
    public static let current = FlakeNotesVersion.current
}

extension Optional {
    /// `flatMap` with an async transform.
    func asyncFlatMap<U>(_ transform: (Wrapped) async throws -> U?) async rethrows -> U? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

/// How the service hashes and verifies passwords: bcrypt (a slow hash, run on NIO's thread pool so that it never
/// blocks the cooperative pool), or, for a caller that stores no real password (the simulation), something cheaper.
public struct PasswordHashing: Sendable {
    /// The stored form of a password.
    public let hash: @Sendable (String) -> String
    /// Whether a password matches a stored form.
    public let verify: @Sendable (_ password: String, _ hash: String) -> Bool
    /// Whether the work is slow enough to move off the cooperative pool.
    public let isSlow: Bool

    public init(hash: @escaping @Sendable (String) -> String, verify: @escaping @Sendable (String, String) -> Bool, isSlow: Bool) {
        self.hash = hash
        self.verify = verify
        self.isSlow = isSlow
    }

    /// bcrypt at `cost` (4...31).
    public static func bcrypt(cost: Int) -> PasswordHashing {
        let cost = UInt8(clamping: cost)
        return PasswordHashing(
            hash: { Bcrypt.hash($0, cost: cost) }, verify: { Bcrypt.verify($0, hash: $1) }, isSlow: true)
    }

    func run<T: Sendable>(_ work: @escaping @Sendable (PasswordHashing) -> T) async throws -> T {
        guard isSlow else { return work(self) }
        return try await NIOThreadPool.singleton.runIfActive { work(self) }
    }
}
