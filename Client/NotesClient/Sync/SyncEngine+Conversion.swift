import Foundation
import GRDB
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

/// Setting a plaintext account up as end-to-end encrypted from this device: the conversion of an account that holds
/// notes (`notes encryption enable`) and the set-up of an empty one at its first sign-in. Docs/SECURITY.md
/// ("Converting an account") says what the server keeps when.
extension SyncEngine {
    /// Converts the signed-in plaintext account (see ``NotesClient/enableEncryption(password:progress:)``), or continues
    /// a conversion the server says is under way.
    func enableEncryption(password: String, progress: (@Sendable (SyncProgress) -> Void)?) async throws(NotesError) -> ConversionReport {
        let settings = try store.read { tx in try tx.settings() }
        guard let settings, let account = settings.account, let token = settings.token, let server = settings.serverURL,
            let url = URL(string: server)
        else {
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.")
        }
        let connection = connection(to: url, server: server, token: token)
        var report = ConversionReport()
        do throws(NotesError) {
            var state = try await connection.call(.account, AccountResponse.self)
            var keys = try store.read { tx in try tx.keyRing(of: account.accountID) }
            switch state.encryption ?? .plaintext {
            case .plaintext:
                if keys != nil {
                    throw NotesError(
                        .encryption,
                        "The server \(server) says \(account.username)'s account is not end-to-end encrypted, but this device holds its keys: refusing to convert it again (a server cannot downgrade an account).")
                }
                // Everything the server holds is on this device first: what is converted is what this device sends.
                report.sync = try await sync(progress: nil, pullFirst: false)
                let made = try NoteSealing.newAccount(
                    accountID: account.accountID, password: password, cost: environment.kdfCost, policy: environment.kdfPolicy)
                let request = AccountEncryptionRequest(currentPassword: password, newPassword: made.authKey.serverPassword, encryption: made.setup)
                do {
                    _ = try await connection.call(.setUpEncryption, AccountEncryptionResponse.self, body: encodeBody(request))
                } catch {
                    throw NotesClient.wrongPassword(error, "Wrong password for \(account.username); nothing was changed.")
                }
                try store.write { tx in
                    try tx.storeKeys([made.accountKey])
                    try tx.setPlaintext(account.accountID, false)
                }
                keys = try store.read { tx in try tx.keyRing(of: account.accountID) }
                report.recoveryKey = made.recoveryKey.humanForm
                state = try await connection.call(.account, AccountResponse.self)
            case .converting:
                if keys == nil {
                    // Started from another device (or this one lost its keys): the password opens the key the server keeps.
                    try await fetchKey(account: account, password: password, connection: connection, server: server)
                    keys = try store.read { tx in try tx.keyRing(of: account.accountID) }
                }
            case .encrypted, .reset:
                report.state = state.encryption ?? .encrypted
                return report
            }
            guard keys != nil else { throw NotesError.badResponse("the account's key was not stored") }
            // The notes the server still holds in the clear: queued here, sealed and pushed by the sync (a kill
            // leaves them queued: the next `notes sync` or `notes encryption enable` sends them).
            if (state.plaintextNotes ?? 0) > 0 {
                let left = try await plaintextServerIDs(connection)
                report.queued = try store.write { tx in try tx.queueForConversion(left) }
                report.missing = left.count - report.queued
            }
            let synced = try await sync(progress: progress, pullFirst: false)
            report.sync = synced
            report.converted = synced.pushed
            state = try await connection.call(.account, AccountResponse.self)
            report.state = state.encryption ?? .plaintext
            report.left = state.plaintextNotes ?? 0
            return report
        } catch {
            if error.code == .signedOutByServer { forgetRevokedSession(token: token) }
            throw error
        }
    }

    /// Stores the key of an account that is converting, unwrapped with `password` (the server's wrapped key of the
    /// current generation, under the KDF parameters its prelogin names).
    private func fetchKey(account: AccountInfo, password: String, connection: ServerConnection, server: String) async throws(NotesError) {
        guard let derived = try await credentialKeys(username: account.username, password: password, memory: .unknown, connection: connection, server: server)
        else { throw NotesError.badResponse("the prelogin of a converting account says plaintext") }
        let keys = try await connection.call(.accountKeys, AccountKeysResponse.self, query: [(AccountKeysQuery.after, "0")])
        let key: AccountKey
        do {
            key = try WrappedAccountKey(text: keys.wrappedKey).unwrap(account: account.accountID, with: derived.wrapKey)
        } catch {
            throw NotesError(.invalidCredentials, "The account's key does not open with this password: \(error.description)")
        }
        try store.write { tx in
            try tx.storeKeys([key])
            try tx.setPlaintext(account.accountID, false)
        }
    }

    /// The server IDs of the account's notes the server still holds in the clear: every live record whose text is
    /// not a note envelope, read by a pull from the start (it writes nothing here).
    private func plaintextServerIDs(_ connection: ServerConnection) async throws(NotesError) -> [FlakeID] {
        let info = try await connection.call(.info, ServerInfo.self)
        let pageSize = String(Self.sanitized(info.limits).maxPageSize)
        var since = SyncCursor.start.text
        var left: [FlakeID] = []
        while true {
            let page = try await connection.call(.pull, PullResponse.self, query: [(PullQuery.since, since), (PullQuery.limit, pageSize)])
            for record in page.changes where !record.deleted && (try? NoteEnvelope(text: record.text)) == nil {
                left.append(record.serverID)
            }
            guard page.hasMore else { return left }
            guard page.cursor.text != since else { throw NotesError.badResponse("the pull announced more changes without moving its cursor") }
            since = page.cursor.text
        }
    }

    /// Sets up the plaintext account of a sign-in that holds no note (tombstones included) and has no other session as
    /// end-to-end encrypted (`POST /v1/account/encryption`): an account its server's operator made, at the first
    /// sign-in of this device to it (the caller checks that). Returns its key and recovery key, or
    /// nil when it holds notes or the server has no such endpoint (an older one): it stays plaintext. (Should a note
    /// arrive between the two requests, the account starts converting and the sign-in's sync converts it.)
    func setUpEmptyAccount(_ session: SignInResponse, password: String, url: URL, server: String) async throws(NotesError)
        -> (key: AccountKey, recoveryKey: RecoveryKey)?
    {
        let connection = connection(to: url, server: server, token: session.token)
        let state = try await connection.call(.account, AccountResponse.self)
        guard state.encryption == .plaintext, let usage = state.usage, usage.notes == 0 else { return nil }
        // Its first device: an account `notes signup --no-encryption` made is still signed in on the device that made
        // it (and chose plaintext), an operator's has no session but this one.
        guard try await connection.call(.sessions, SessionListResponse.self).sessions.count == 1 else { return nil }
        let made = try NoteSealing.newAccount(
            accountID: session.accountID, password: password, cost: environment.kdfCost, policy: environment.kdfPolicy)
        let request = AccountEncryptionRequest(currentPassword: password, newPassword: made.authKey.serverPassword, encryption: made.setup)
        do {
            _ = try await connection.call(.setUpEncryption, AccountEncryptionResponse.self, body: encodeBody(request))
        } catch where error.httpStatus == 404 || error.httpStatus == 405 {
            return nil
        }
        return (made.accountKey, made.recoveryKey)
    }
}

/// What `notes encryption enable` did (``NotesClient/enableEncryption(password:progress:)``).
public struct ConversionReport: Sendable {
    /// Where the account stands now.
    public var state: EncryptionState = .plaintext
    /// Notes its server still holds in the clear (0 once converted).
    public var left: Int64 = 0
    /// Notes this run queued to convert.
    public var queued = 0
    /// Notes the server holds in the clear that this device does not have (another device must sync them first).
    public var missing = 0
    /// Changes the run pushed (each a note's ciphertext, a new version).
    public var converted = 0
    /// The recovery key of keys this run made (shown once); nil when it continued a conversion.
    public var recoveryKey: String?
    /// The last sync's report.
    public var sync = SyncReport()
}

extension LocalStore.Transaction {
    /// Queues the notes on show with these server IDs to push (a conversion seals each as a new version); returns
    /// how many were found.
    func queueForConversion(_ serverIDs: [FlakeID]) throws -> Int {
        let find = try db.cachedStatement(sql: "SELECT id FROM notes WHERE server_id = ? AND \(NoteFilter.onShow)")
        var ids: [Int64] = []
        for serverID in serverIDs {
            if let id = try Int64.fetchOne(find, arguments: [serverID.rawValue]) { ids.append(id) }
        }
        try queueForPush(ids)
        return ids.count
    }
}
