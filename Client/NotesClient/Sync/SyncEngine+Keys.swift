import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

// An encrypted account's key generations on the device (Docs/SECURITY.md, "Rotation"): fetching the ones it lacks
// (`GET /v1/account/keys`) and making a new one (`POST /v1/account/keys/rotate`, or inside a password change).

/// A new generation of the account key and the rotation request that hands it over.
struct Rotation: Sendable {
    var key: AccountKey
    var request: RotateKeysRequest
}

extension SyncEngine {
    /// Every page of `GET /v1/account/keys` after generation `after`, in order.
    func keyPages(_ connection: ServerConnection, after: Int64) async throws(NotesError) -> [AccountKeysResponse] {
        var pages: [AccountKeysResponse] = []
        var after = after
        while true {
            let page = try await connection.call(.accountKeys, AccountKeysResponse.self, query: [(AccountKeysQuery.after, String(after))])
            pages.append(page)
            guard page.through < page.generation else { return pages }
            guard page.through > after else {
                throw NotesError.badResponse("a keys answer that does not move past generation \(after)")
            }
            after = page.through
        }
    }

    /// Brings `account`'s key ring up to the account's current generation (``KeyGenerations/open(_:account:ring:openers:)``)
    /// and stores every generation in this device's key store, all or none; `password` and `recovery` are the secrets
    /// the user typed, if any. Returns the ring and the keys answer's last page (the public keys a rotation seals to).
    ///
    /// - Throws: `encryption` (something did not open, or a generation was not handed to this device: nothing
    ///   stored), the connection's errors (`signed_out_by_server` on 401).
    func refreshKeys(
        _ connection: ServerConnection, account: FlakeID, ring: AccountKeyRing?, password: DerivedKeys? = nil, recovery: RecoveryKey? = nil
    ) async throws(NotesError) -> (ring: AccountKeyRing, answer: AccountKeysResponse) {
        let pages = try await keyPages(connection, after: KeyGenerations.contiguous(ring))
        let device = try store.write { tx in try tx.deviceKeyPair() }
        let opened = try KeyGenerations.open(
            pages, account: account, ring: ring, openers: KeyGenerations.Openers(device: device, password: password, recovery: recovery))
        let held = Set(ring?.generations ?? [])
        let new = opened.generations.filter { !held.contains($0) }.compactMap { opened.key(generation: $0) }
        if !new.isEmpty { try store.write { tx in try tx.storeKeys(new) } }
        return (opened, pages[pages.count - 1])
    }

    /// Generation `ring.current + 1`, handed over to every session in `sessions` that has a public key (this one too:
    /// if the answer is lost, this device reads its own hand-over back at its next sync), to the recovery key and to
    /// `passwordPublicKey` (the account's, or a password change's new one).
    /// With `renewing`, the rotation replaces the recovery key by that one (its material is of the new generation, and
    /// the recovery hand-over is sealed to it).
    static func rotation(
        of ring: AccountKeyRing, sessions: [SessionInfo], recoveryPublicKey: String?, passwordPublicKey: String?,
        renewing renewed: RecoveryKey? = nil
    ) throws(NotesError) -> Rotation {
        guard let recoveryText = renewed?.publicKey.text ?? recoveryPublicKey, let passwordText = passwordPublicKey,
            let recovery = try? DevicePublicKey(text: recoveryText), let password = try? DevicePublicKey(text: passwordText)
        else {
            throw NotesError(
                .encryption, "The server did not send the account's recovery and password public keys, so the account key cannot be rotated.")
        }
        let previous = ring.current
        do {
            let key = try previous.rotated()
            // A session whose public key is not one (or an older client's, without one) gets no hand-over: it signs
            // in again with the password to read what is written from now on.
            let handovers = sessions.compactMap { session -> SessionHandover? in
                guard let text = session.publicKey, let publicKey = try? DevicePublicKey(text: text),
                    let handover = try? KeyHandover.seal(key, authenticatedBy: previous, to: publicKey)
                else { return nil }
                return SessionHandover(sessionID: session.sessionID, handover: handover.text)
            }
            let request = RotateKeysRequest(
                generation: Int64(key.generation), older: try previous.wrapped(by: key).text, handovers: handovers,
                recoveryHandover: try KeyHandover.seal(key, authenticatedBy: previous, to: recovery).text,
                passwordHandover: try KeyHandover.seal(key, authenticatedBy: previous, to: password).text,
                recovery: renewed.map { RecoveryRenewal(recoveryWrappedKey: key.wrapped(by: $0).text, recoveryPublicKey: $0.publicKey.text) })
            return Rotation(key: key, request: request)
        } catch {
            throw NotesError(.encryption, "The account key cannot be rotated: \(error.description)")
        }
    }

    /// Whether a rotation answered `error` is tried once more after fetching the keys and sessions again: another
    /// device rotated first (`stale_generation`), or a kept session signed out meanwhile (`unknown_session`).
    static func retriesRotation(_ error: NotesError) -> Bool {
        error.api?.code == .staleGeneration || error.api?.code == .unknownSession
    }

    /// Rotates the signed-in encrypted account's key (after `notes devices revoke` and `notes logout --everywhere`):
    /// generation current + 1, handed over to every session still signed in. No note is re-encrypted here; new edits
    /// are sealed under the new generation, older notes are re-sealed by later syncs (``reseal(_:keys:)``). Answered
    /// `stale_generation` (another device rotated first) or `unknown_session` (a kept session signed out meanwhile),
    /// it fetches the keys and the sessions again and retries once.
    ///
    /// With `renewing`, the rotation also replaces the account's recovery key by that one (`notes encryption
    /// recovery-key`).
    ///
    /// Returns the new generation; nil for a plaintext account (nothing to rotate).
    ///
    /// - Throws: `encryption`, `not_signed_in`, `signed_out_by_server`, the connection's errors.
    func rotateAccountKey(renewing renewed: RecoveryKey? = nil) async throws(NotesError) -> UInt32? {
        let signedIn = try store.read { tx throws -> (FlakeID, AccountKeyRing?)? in
            guard let accountID = try tx.settings()?.accountID else { return nil }
            return (accountID, try tx.keyRing(of: accountID))
        }
        guard let (accountID, held) = signedIn else { throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.") }
        guard let held else { return nil }
        return try await withAccountConnection { (connection) throws(NotesError) -> UInt32? in
            var ring = held
            var retried = false
            while true {
                let (fresh, answer) = try await refreshKeys(connection, account: accountID, ring: ring)
                ring = fresh
                let sessions = try await connection.call(.sessions, SessionListResponse.self).sessions
                let rotation = try Self.rotation(
                    of: ring, sessions: sessions, recoveryPublicKey: answer.recoveryPublicKey, passwordPublicKey: answer.passwordPublicKey,
                    renewing: renewed)
                do throws(NotesError) {
                    _ = try await connection.call(.rotateKeys, RotateKeysResponse.self, body: encodeBody(rotation.request), attempts: 1)
                } catch where !retried && SyncEngine.retriesRotation(error) {
                    retried = true
                    continue
                }
                try store.write { tx in try tx.storeKeys([rotation.key]) }
                return rotation.key.generation
            }
        }
    }
}

extension SyncEngine {
    /// Recovers `username`'s encrypted account after the operator reset its password (Docs/SECURITY.md, "Recovery"):
    /// signs in with the temporary password (its AuthKey, under the account's salt), opens the account key's
    /// generations with `recoveryKey` (the generation it wraps, the chain down, the hand-overs sealed to it up), and
    /// changes the password to `newPassword`, which wraps the current generation: the account is `encrypted` again.
    /// The temporary session is signed out at the end, whatever happened; the caller signs in with the new password.
    ///
    /// - Throws: `invalid_credentials` (wrong temporary password), `invalid_input` (the account was not reset),
    ///   `encryption` (the recovery key opens nothing of this account: nothing changed on the server), the
    ///   connection's errors.
    func recover(
        url: URL, server: String, username: String, temporaryPassword: String, recoveryKey: RecoveryKey, newPassword: String
    ) async throws(NotesError) {
        let anonymous = connection(to: url, server: server, token: nil)
        let temporary = try await credentialKeys(
            username: username, password: temporaryPassword, memory: .unknown, connection: anonymous, server: server)
        guard let temporary else {
            throw NotesError(.invalidInput, "\(username)'s account on \(server) is not end-to-end encrypted: nothing to recover; sign in with `notes login`.")
        }
        let device = try store.write { tx in try tx.deviceKeyPair() }
        let request = SignInRequest(
            username: username, password: temporary.authKey.serverPassword, deviceName: nil, origin: origin,
            devicePublicKey: device.publicKey.text)
        let session = try await anonymous.call(.signIn, SignInResponse.self, body: encodeBody(request))
        let withToken = connection(to: url, server: server, token: session.token)
        let outcome: Result<Void, NotesError>
        do {
            outcome = .success(try await recover(session, over: withToken, device: device, temporary: temporary, recoveryKey: recoveryKey, newPassword: newPassword))
        } catch {
            outcome = .failure(error)
        }
        _ = try? await withToken.exchange(.signOut, attempts: 1)
        try outcome.get()
    }

    /// ``recover(url:server:username:temporaryPassword:recoveryKey:newPassword:)`` once signed in as `session`.
    private func recover(
        _ session: SignInResponse, over connection: ServerConnection, device: DeviceKeyPair, temporary: DerivedKeys,
        recoveryKey: RecoveryKey, newPassword: String
    ) async throws(NotesError) {
        guard let encryption = session.encryption, encryption.state == .reset else {
            throw NotesError(
                .invalidInput, "\(session.username)'s account was not reset by the server's operator: sign in with its password (`notes login`).")
        }
        let pages = try await keyPages(connection, after: 0)
        let ring = try KeyGenerations.open(
            pages, account: session.accountID, ring: nil,
            openers: KeyGenerations.Openers(device: device, password: nil, recovery: recoveryKey))
        let parameters = KDFParameters.generate(cost: environment.kdfCost)
        let next = try NoteSealing.derive(password: newPassword, parameters: parameters, policy: environment.kdfPolicy)
        var change = ChangePasswordRequest(currentPassword: temporary.authKey.serverPassword, newPassword: next.authKey.serverPassword)
        change.encryption = PasswordChangeEncryption(
            kdf: NoteSealing.info(parameters), wrappedKey: ring.current.wrapped(by: next.wrapKey).text,
            passwordPublicKey: next.passwordKeyPair.publicKey.text)
        _ = try await connection.call(.changePassword, RevokedSessionsResponse.self, body: encodeBody(change), attempts: 1)
    }
}
