import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

extension NotesClient {
    /// Syncs with the signed-in account: pushes local changes, then pulls the server's. `SyncEngine` (in
    /// `Sync/`) lists the steps and names the planner that holds the rules of each.
    ///
    /// Safe to interrupt: each push answer and each pull page is committed in its own transaction, a snapshot is
    /// re-sent with its edit ID until answered (a push whose answer was lost is answered `replayed` and applied
    /// once), and the pull resumes from the last committed cursor. Transport failures and 5xx answers are retried
    /// with backoff (``NotesEnvironment/retry``). A change the server refuses keeps its error on the note
    /// (``SyncReport/failures``) and is not re-sent until the note is edited.
    ///
    /// - Throws: `not_signed_in`; `signed_out_by_server` on 401 (the local session is forgotten, notes are
    ///   kept); `server_unreachable`, `server_error`, `bad_response`; `storage`. Whatever was committed before
    ///   the error stays committed, and nothing is lost.
    public func sync(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws(NotesError) -> SyncReport {
        try await engine.sync(progress: progress, pullFirst: false)
    }

    /// Creates an account, then signs in to it (see ``signIn(server:username:password:progress:)``).
    ///
    /// With `encrypted`, the account is end-to-end encrypted (Docs/SECURITY.md): the server never holds a readable
    /// note, and the password itself is never sent. The report's ``SignInReport/recoveryKey`` is then the account's
    /// recovery key, to show once: with it the notes come back after an operator's password reset.
    ///
    /// - Parameter invite: An invite code from the server's operator (``InviteCode``; sent in canonical form), for a
    ///   server whose sign-up policy is `invite`.
    /// - Throws: `invalid_input` (username or password break ``CredentialRules``, an invite that is not of the form,
    ///   bad URL); `server_error` with `api.code` `username_taken`, `sign_up_closed`, `invite_required` or
    ///   `invalid_invite`; the transport errors of ``sync(progress:)``.
    public func signUp(
        server: String, username: String, password: String, invite: String? = nil, encrypted: Bool = false, unowned: UnownedNotes = .keepAside,
        wipe: Bool = false, progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws(NotesError) -> SignInReport {
        let (url, serverText) = try Self.parseServer(server)
        guard let canonical = CredentialRules.canonicalUsername(username) else {
            throw NotesError(
                .invalidInput,
                "A username has \(CredentialRules.usernameLength.lowerBound)–\(CredentialRules.usernameLength.upperBound) characters from a–z, 0–9, '.', '_' and '-'.")
        }
        guard CredentialRules.isAcceptablePassword(password) else {
            throw NotesError(
                .invalidInput,
                "A password has \(CredentialRules.passwordBytes.lowerBound)–\(CredentialRules.passwordBytes.upperBound) bytes.")
        }
        var code: String?
        if let invite {
            guard let canonicalCode = InviteCode.canonical(invite) else {
                throw NotesError(
                    .invalidInput,
                    "An invite code is \(InviteCode.length) letters and digits (dashes and spaces between them are ignored), as its operator gave it.")
            }
            code = canonicalCode
        }
        let recoveryKey: String?
        do {
            recoveryKey = try await engine.signUp(
                url: url, server: serverText, username: canonical, password: password, invite: code, encrypted: encrypted)?.humanForm
        } catch let error where error.api?.code == .inviteRequired {
            throw NotesError(
                error.code, "The server \(serverText) takes sign-ups only with an invite code: ask its operator for one (`notes signup --invite CODE`).",
                api: error.api, httpStatus: error.httpStatus)
        } catch let error where error.api?.code == .invalidInvite {
            throw NotesError(
                error.code, "The invite code is not valid on \(serverText) (unknown, used up, expired or revoked): ask its operator for a new one.",
                api: error.api, httpStatus: error.httpStatus)
        }
        // A plaintext account asked for stays plaintext (no set-up at this first sign-in).
        var report = try await engine.signIn(
            url: url, server: serverText, username: canonical, password: password, unowned: unowned, wipe: wipe, setUpEmpty: false,
            progress: progress)
        report.recoveryKey = recoveryKey
        return report
    }

    /// Signs in to an account on `server` (this or another account), then syncs.
    ///
    /// The session is registered with this installation's origin and ``NotesEnvironment/deviceName``. Notes stay
    /// with their owner (``OwnerPlanner``): signing in to another account than the one on show sets that one's
    /// notes aside (with `wipe`, deletes them from this device) and brings this account's back; notes without an
    /// owner (written while signed out, never synced) join this account only with `unowned: .carry`. When the
    /// installation was signed out or signed in elsewhere, the account's notes that may differ from the server's
    /// are queued to push by client ID: the server reconciles the notes it already has (no duplicates, no conflict
    /// copies for notes nobody else edited) and creates the others. The sync's outcome is in the report: a failed
    /// sync leaves the installation signed in, notes queued.
    ///
    /// A plaintext account that holds no note (one its server's operator made) is set up as end-to-end encrypted at
    /// this sign-in (``SignInReport/setUpEncryption``; its recovery key in ``SignInReport/recoveryKey``).
    ///
    /// - Throws: `invalid_input`, `invalid_credentials`, `server_unreachable`, `server_error`, `bad_response`,
    ///   `storage`. Nothing changes locally when the sign-in fails.
    public func signIn(
        server: String, username: String, password: String, unowned: UnownedNotes = .keepAside, wipe: Bool = false,
        progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws(NotesError) -> SignInReport {
        let (url, serverText) = try Self.parseServer(server)
        guard let canonical = CredentialRules.canonicalUsername(username) else {
            throw NotesError(.invalidInput, "'\(username)' is not a valid username.")
        }
        return try await engine.signIn(
            url: url, server: serverText, username: canonical, password: password, unowned: unowned, wipe: wipe,
            progress: progress)
    }

    /// Signs out: revokes the token on the server when it is reachable (unreachable is fine), then, in one
    /// transaction, forgets the token, the account, the cursor and every server ID and version. Every note stays,
    /// edited or not, with its owner and its unsynced changes, which sync at that account's next sign-in, never to
    /// another. Signed out, the device shows the account's notes and the unowned ones.
    ///
    /// - Parameter wipe: also delete the notes on show from this device: the account's and those written while
    ///   signed out (unsynced changes are lost); other accounts' notes, set aside, stay.
    /// - Returns: whether the token was revoked, how many notes had unsynced changes, how many were wiped.
    @discardableResult
    public func signOut(wipe: Bool = false) async throws(NotesError) -> SignOutReport {
        try await engine.signOut(wipe: wipe)
    }

    /// Checks and normalizes a server URL: `http(s)://host[:port][/path]`, no trailing slash. Other schemes are
    /// accepted too (the transport factory decides what they mean; the simulation uses its own).
    static func parseServer(_ text: String) throws(NotesError) -> (URL, String) {
        var trimmed = String(text.trimmingWhitespace())
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let url = URL(string: trimmed), let scheme = url.scheme, !scheme.isEmpty,
            url.host != nil || !["http", "https"].contains(scheme.lowercased())
        else {
            throw NotesError(.invalidInput, "'\(text)' is not a server URL (expected http://HOST:PORT).")
        }
        return (url, trimmed)
    }
}
