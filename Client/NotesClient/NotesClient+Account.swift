import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol

extension NotesClient {
    /// Creates an account, then signs in to it (see ``signIn(server:username:password:progress:)``).
    ///
    /// - Throws: `invalid_input` (username or password break ``CredentialRules``, bad URL); `server_error` with
    ///   `api.code == username_taken`; the transport errors of ``sync(progress:)``.
    public func signUp(
        server: String, username: String, password: String, progress: (@Sendable (SyncProgress) -> Void)? = nil
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
        let connection = connection(to: url, server: serverText, token: nil)
        _ = try await connection.call(
            .signUp, AccountResponse.self, body: encodeBody(SignUpRequest(username: canonical, password: password)))
        return try await signIn(server: server, username: canonical, password: password, progress: progress)
    }

    /// Signs in to an account on `server` (this or another account), then syncs.
    ///
    /// The session is registered with this installation's origin and ``NotesEnvironment/deviceName``. When the
    /// account differs from the last one (or the installation was signed out), every note that ever existed here
    /// (except tombstones never synced anywhere) is queued to push by client ID: the server reconciles the notes
    /// it already has (no duplicates, no conflict copies for notes nobody else edited) and creates the others.
    /// The sync's outcome is in the report: a failed sync leaves the installation signed in, notes queued.
    ///
    /// - Throws: `invalid_input`, `invalid_credentials`, `server_unreachable`, `server_error`, `bad_response`,
    ///   `storage`. Nothing changes locally when the sign-in fails.
    public func signIn(
        server: String, username: String, password: String, progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws(NotesError) -> SignInReport {
        let (url, serverText) = try Self.parseServer(server)
        guard let canonical = CredentialRules.canonicalUsername(username) else {
            throw NotesError(.invalidInput, "'\(username)' is not a valid username.")
        }
        let connection = connection(to: url, server: serverText, token: nil)
        let request = SignInRequest(
            username: canonical, password: password,
            deviceName: String(environment.deviceName.prefix(SignInRequest.maxDeviceNameLength)), origin: origin)
        let session = try await connection.call(.signIn, SignInResponse.self, body: encodeBody(request))

        let (reconciling, replacedToken, replacedServer) = try write { db -> (Bool, String?, String?) in
            guard let settings = try Settings.fetch(db) else { throw NotesError(.storage, "The settings row is missing.") }
            let sameAccount =
                settings.token != nil && settings.accountID == session.accountID && settings.serverURL == serverText
            if !sameAccount {
                try Self.forgetAccountState(db)
                try Self.switchBases(db, account: session.accountID)
            }
            try db.execute(
                sql: "UPDATE settings SET server_url = ?, account_id = ?, username = ?, token = ? WHERE id = 1",
                arguments: [serverText, session.accountID.rawValue, session.username, session.token])
            if !sameAccount {
                // Queue what this account may not have: notes changed since they were last synced with it (or never
                // synced with it), tombstones, and unacknowledged snapshots. A note whose text is still its base for
                // this account is not pushed: the sign-in's first pull finds it by (client ID, origin) and brings
                // the account's version (a later edit, or a delete from another device); if the pull does not
                // return it, the push that follows sends it after all (see `prepareOutbox`).
                try db.execute(
                    sql: """
                        UPDATE notes SET dirty = 1, push_error = NULL, push_error_message = NULL
                        WHERE NOT (deleted AND base_text IS NULL AND server_id IS NULL AND id NOT IN (SELECT note_id FROM outbox))
                        AND (dirty OR deleted OR base_text IS NULL OR text IS NOT base_text OR id IN (SELECT note_id FROM outbox))
                        """)
            }
            return (!sameAccount, settings.token, settings.serverURL)
        }
        if let replacedToken, let replacedServer, let oldURL = URL(string: replacedServer) {
            // The previous session is no longer used: revoke it if the server is reachable (best effort).
            _ = try? await self.connection(to: oldURL, server: replacedServer, token: replacedToken)
                .exchange(.signOut, attempts: 1)
        }
        let account = AccountInfo(accountID: session.accountID, username: session.username, serverURL: serverText)
        let result: Result<SyncReport, NotesError>
        do {
            result = .success(try await sync(progress: progress, pullFirst: reconciling))
        } catch {
            result = .failure(error)
        }
        return SignInReport(account: account, reconciling: reconciling, sync: result)
    }

    /// Signs out: revokes the token on the server when it is reachable (unreachable is fine), then, in one
    /// transaction, forgets the token, the account, the cursor and every server ID and version. Every note stays,
    /// edited or not, with its unsynced changes, which sync at the next sign-in (to this account or another).
    ///
    /// - Parameter wipe: also delete every local note (unsynced changes are lost) and the base texts kept for each
    ///   account.
    /// - Returns: whether the token was revoked, how many notes had unsynced changes, how many were wiped.
    @discardableResult
    public func signOut(wipe: Bool = false) async throws(NotesError) -> SignOutReport {
        let settings = try read { db in try Settings.fetch(db) }
        var revoked = false
        if let settings, let token = settings.token, let server = settings.serverURL, let url = URL(string: server) {
            do {
                _ = try await connection(to: url, server: server, token: token).exchange(.signOut, attempts: 1)
                revoked = true
            } catch {
                revoked = error.code == .signedOutByServer  // already revoked
            }
        }
        return try write { db in
            let pending = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE dirty")) ?? 0
            try Self.forgetAccountState(db)
            var wiped = 0
            if wipe {
                wiped = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE NOT deleted")) ?? 0
                try db.execute(sql: "DELETE FROM account_bases; DELETE FROM outbox; DELETE FROM notes;")
            }
            return SignOutReport(revoked: revoked, pending: pending, wiped: wiped)
        }
    }

    /// Makes the base texts in `notes` and `outbox` those of `account`.
    ///
    /// A base text is what was last synced with one account: the server merges a pushed edit against it. Against
    /// another account's note it would make that merge drop lines, and without any base every note edited
    /// elsewhere comes back as a conflict copy. So the bases of the account signed in to before are set aside in
    /// `account_bases`, and the new account's are taken back from there (none for an account never signed in to
    /// here). Nothing changes when the bases already belong to that account. Accounts are told apart by their
    /// server-minted ID alone, not by the server URL: several daemons (or names) serve one account, and a device
    /// that signs out of one and in through another is still in the same account. `signOut(wipe: true)` deletes
    /// every base.
    static func switchBases(_ db: Database, account: FlakeID) throws {
        let oldAccount = try Int64.fetchOne(db.cachedStatement(sql: "SELECT base_account_id FROM settings WHERE id = 1"))
        if oldAccount == account.rawValue { return }
        if let oldAccount {
            try db.execute(sql: "DELETE FROM account_bases WHERE account_id = ?", arguments: [oldAccount])
            try db.execute(
                sql: """
                    INSERT INTO account_bases (account_id, note_id, base_text)
                    SELECT ?, id, base_text FROM notes WHERE base_text IS NOT NULL
                    """,
                arguments: [oldAccount])
        }
        for table in ["notes", "outbox"] {
            let id = table == "notes" ? "id" : "note_id"
            try db.execute(
                sql: """
                    UPDATE \(table) SET base_text = (
                        SELECT base_text FROM account_bases b WHERE b.account_id = ? AND b.note_id = \(table).\(id))
                    """,
                arguments: [account.rawValue])
        }
        try db.execute(sql: "DELETE FROM account_bases WHERE account_id = ?", arguments: [account.rawValue])
        try db.execute(sql: "UPDATE settings SET base_account_id = ? WHERE id = 1", arguments: [account.rawValue])
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
