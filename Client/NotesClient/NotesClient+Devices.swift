import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

// The account's devices, its password, its deletion and its storage usage (issue 18): calls to the signed-in
// account's server. A 401 answer means the session was revoked (or the account deleted): like a sync, the device
// then forgets the session and keeps every note (`signed_out_by_server`).

/// A signed-in device of the account, as `notes devices` lists it.
public struct Device: Sendable, Equatable {
    /// The session ID (what `notes devices revoke` takes).
    public var sessionID: FlakeID
    /// The name the device gave at sign-in (its host name for the reference client).
    public var name: String?
    /// The device's installation ID, if it gave one.
    public var origin: FlakeID?
    /// When it signed in, Unix milliseconds (nil when the server's time could not be read).
    public var signedInAt: Int64?
    /// When it last made a request, to the minute, Unix milliseconds; nil before its first request.
    public var lastSeenAt: Int64?
    /// This device's own session.
    public var isThisDevice: Bool
}

/// What ``NotesClient/revokeDevice(_:)`` did.
public struct DeviceRevocation: Sendable, Equatable {
    /// The device signed out.
    public var device: Device
    /// The account key's generation after the rotation that followed (an end-to-end encrypted account); nil for a
    /// plaintext account.
    public var keyGeneration: UInt32?
}

/// What ``NotesClient/signOutOtherDevices()`` did.
public struct OtherDevicesSignOut: Sendable, Equatable {
    /// How many other devices were signed out.
    public var count: Int
    /// As ``DeviceRevocation/keyGeneration``.
    public var keyGeneration: UInt32?
}

/// The account's storage as its server counts it (`GET /v1/account`).
public struct StorageReport: Sendable, Equatable {
    /// Stored notes, deleted ones included.
    public var notes: Int64
    /// UTF-8 bytes of the notes' texts.
    public var textBytes: Int64
    /// UTF-8 bytes the server keeps to answer replays (0 from a server that does not say); counted with
    /// ``textBytes`` against ``maxTextBytes``.
    public var replayTextBytes: Int64 = 0
    public var maxNotes: Int64
    public var maxTextBytes: Int64
    /// The account's encryption state as its server says it (nil from a server that does not say).
    public var encryption: EncryptionState? = nil
    /// While it is converting: the notes the server still holds in the clear.
    public var plaintextNotes: Int64? = nil
}

/// What deleting the account did on this device.
public struct AccountDeletionReport: Sendable, Equatable {
    /// The deleted account.
    public var account: AccountName
    /// Its live notes, kept on this device as notes of no account (written-while-signed-out notes).
    public var keptNotes: Int
    /// Notes that became new notes of this device (see ``RekeyedNote``).
    public var rekeyed: [RekeyedNote] = []
    /// Attachments of the kept notes whose bytes went with the account (this device never downloaded them): left out.
    public var attachmentsDropped = 0
}

extension NotesClient {
    /// The account's signed-in devices, most recently signed in first, this one marked.
    ///
    /// - Throws: `not_signed_in`, `signed_out_by_server`, the connection's errors.
    public func devices() async throws(NotesError) -> [Device] {
        let list = try await engine.accountCall(.sessions, SessionListResponse.self)
        return list.sessions.map { session in
            Device(
                sessionID: session.sessionID, name: session.deviceName, origin: session.origin,
                signedInAt: WireTime.parse(session.signedInAt), lastSeenAt: session.lastSeenAt.flatMap(WireTime.parse),
                isThisDevice: session.current)
        }
    }

    /// Signs another device of the account out: `id` is its session ID as `notes devices` shows it, or a unique
    /// prefix of it (at least 4 digits). Its notes stay on it; it learns at its next request. On an end-to-end
    /// encrypted account the account key is then rotated (``SyncEngine/rotateAccountKey()``): what is written from now
    /// on is sealed under a generation the signed-out device never gets; no note is re-encrypted by this call.
    ///
    /// - Throws: `invalid_input` (not a listed device, ambiguous, or this device: use sign-out), `not_signed_in`,
    ///   `signed_out_by_server`, `encryption` (signed out, but the key was not rotated: the message says so), the
    ///   connection's errors.
    @discardableResult
    public func revokeDevice(_ id: String) async throws(NotesError) -> DeviceRevocation {
        let text = id.trimmingCharacters(in: .whitespaces)
        guard text.count >= 4, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber) else {
            throw NotesError(.invalidInput, "'\(id)' is not a device ID; `notes devices` lists them (at least 4 digits).")
        }
        let matches = try await devices().filter { String($0.sessionID.rawValue).hasPrefix(text) }
        guard let device = matches.first else {
            throw NotesError(.invalidInput, "No device \(text) is signed in to this account; `notes devices` lists them.")
        }
        guard matches.count == 1 else {
            throw NotesError(.invalidInput, "\(text) names \(matches.count) devices; type more of its ID.")
        }
        guard !device.isThisDevice else {
            throw NotesError(.invalidInput, "\(text) is this device; sign it out with `notes logout`.")
        }
        _ = try await engine.accountExchange(.revokeSession, body: encodeBody(RevokeSessionRequest(sessionID: device.sessionID)))
        let generation = try await rotateAfterSigningOut("Signed out \(device.sessionID.rawValue)")
        return DeviceRevocation(device: device, keyGeneration: generation)
    }

    /// Signs every other device of the account out, then (an encrypted account) rotates the account key as
    /// ``revokeDevice(_:)`` does.
    public func signOutOtherDevices() async throws(NotesError) -> OtherDevicesSignOut {
        let count = try await engine.accountCall(.revokeOtherSessions, RevokedSessionsResponse.self, attempts: 1).revokedSessions
        let generation = try await rotateAfterSigningOut("Signed out \(count == 1 ? "1 other device" : "\(count) other devices")")
        return OtherDevicesSignOut(count: count, keyGeneration: generation)
    }

    /// Rotates an encrypted account's key after `done` (devices were signed out); nil for a plaintext account.
    private func rotateAfterSigningOut(_ done: String) async throws(NotesError) -> UInt32? {
        do {
            return try await engine.rotateAccountKey()
        } catch {
            if error.code == .signedOutByServer { throw error }
            throw NotesError(
                error.code,
                "\(done), but the account key was not rotated: \(error.message) Until it is (sign out a device again, or `notes logout --everywhere`), a signed-out device could read new notes with the server's help.",
                api: error.api, httpStatus: error.httpStatus)
        }
    }

    /// Changes the account's password; every other device is signed out (this one stays signed in). Returns how
    /// many devices were signed out.
    ///
    /// An end-to-end encrypted account (this device holds its keys) proves the current password by its AuthKey and
    /// rotates the account key in the same request: generation current + 1 wrapped by the new password, with the new
    /// password's KDF parameters (a new salt, the environment's cost) and public key, handed over to this session, the
    /// recovery key and the new password. One Argon2id per password on the device, no note re-uploaded; answered
    /// `stale_generation` (another device rotated first) it fetches the keys and retries once.
    ///
    /// - Throws: `invalid_input` (the new password breaks ``CredentialRules``), `invalid_credentials` (the current
    ///   password is wrong: nothing changed), `encryption` (the server's KDF cost is out of bounds, or it calls the
    ///   account plaintext), `server_error` (`too_many_attempts`, `stale_generation` among others), `not_signed_in`,
    ///   `signed_out_by_server`, the connection's errors.
    public func changePassword(current: String, new: String) async throws(NotesError) -> Int {
        guard CredentialRules.isAcceptablePassword(new) else {
            throw NotesError(
                .invalidInput,
                "A password is \(CredentialRules.passwordBytes.lowerBound)–\(CredentialRules.passwordBytes.upperBound) bytes, without NUL characters.")
        }
        let proof = try await engine.passwordProof(current)
        guard let keys = proof.keys else {
            let request = ChangePasswordRequest(currentPassword: proof.credential, newPassword: new)
            do {
                return try await engine.accountCall(.changePassword, RevokedSessionsResponse.self, body: encodeBody(request), attempts: 1)
                    .revokedSessions
            } catch {
                throw Self.wrongPassword(error, "Wrong password; the password was not changed.")
            }
        }
        let parameters = KDFParameters.generate(cost: environment.kdfCost)
        let next = try NoteSealing.derive(password: new, parameters: parameters, policy: environment.kdfPolicy)
        let accountID = keys.account
        return try await engine.withAccountConnection { (connection) throws(NotesError) -> Int in
            var ring = keys
            var retried = false
            while true {
                // The change rotates the key too (every other device is signed out by it): generation current + 1,
                // wrapped by the new password, handed over to this session, the recovery key and the new password.
                let (fresh, answer) = try await engine.refreshKeys(connection, account: accountID, ring: ring)
                ring = fresh
                let mine = try await connection.call(.sessions, SessionListResponse.self).sessions.filter(\.current)
                let rotation = try SyncEngine.rotation(
                    of: ring, sessions: mine, recoveryPublicKey: answer.recoveryPublicKey,
                    passwordPublicKey: next.passwordKeyPair.publicKey.text)
                var request = ChangePasswordRequest(currentPassword: proof.credential, newPassword: next.authKey.serverPassword)
                request.encryption = PasswordChangeEncryption(
                    kdf: NoteSealing.info(parameters), wrappedKey: rotation.key.wrapped(by: next.wrapKey).text,
                    passwordPublicKey: next.passwordKeyPair.publicKey.text, rotation: rotation.request)
                let revoked: Int
                do throws(NotesError) {
                    revoked = try await connection.call(.changePassword, RevokedSessionsResponse.self, body: encodeBody(request), attempts: 1)
                        .revokedSessions
                } catch where !retried && SyncEngine.retriesRotation(error) {
                    // Another device rotated first (or a session signed out meanwhile): fetch the keys, retry once.
                    retried = true
                    continue
                } catch {
                    if error.api?.code == .staleGeneration {
                        throw NotesError(
                            .serverError, "Another device changed the account's keys meanwhile; sync, then change the password again. Nothing changed.",
                            api: error.api, httpStatus: error.httpStatus)
                    }
                    throw Self.wrongPassword(error, "Wrong password; the password was not changed.")
                }
                try store.write { tx in try tx.storeKeys([rotation.key]) }
                return revoked
            }
        }
    }

    /// Deletes the signed-in account on its server: its notes, edits and sessions there, for every device. This
    /// device keeps the account's notes, as notes of no account (as if written while signed out, never synced):
    /// signing in to an account later asks whether to add them to it (`UnownedNotes`), and they go there as new
    /// notes. The account is forgotten here (with its keys, for an encrypted one, whose password is proved by its
    /// AuthKey as at sign-in).
    ///
    /// - Throws: `invalid_credentials` (wrong password: nothing deleted), `encryption` (see
    ///   ``changePassword(current:new:)``), `server_error` (`too_many_attempts` among others), `not_signed_in`,
    ///   `signed_out_by_server`, the connection's errors.
    public func deleteAccount(password: String) async throws(NotesError) -> AccountDeletionReport {
        guard let account = try self.account() else {
            throw NotesError(.notSignedIn, "Not signed in; sign in to the account to delete first.")
        }
        let proof = try await engine.passwordProof(password)
        do {
            _ = try await engine.accountExchange(.deleteAccount, body: encodeBody(DeleteAccountRequest(password: proof.credential)))
        } catch {
            throw Self.wrongPassword(error, "Wrong password; nothing was deleted.")
        }
        let now = now
        return try store.write { tx in
            let name = try tx.knownAccount(account.accountID)
            try tx.forgetAccountState()
            let disowned = try tx.disownNotes(of: account.accountID, minter: minter, origin: origin, now: now, onDevice: chunkCache.holds)
            return AccountDeletionReport(
                account: name, keptNotes: disowned.kept, rekeyed: disowned.rekeyed, attachmentsDropped: disowned.attachmentsDropped)
        }
    }

    /// The account's storage usage and limits, as its server counts them.
    public func storageUsage() async throws(NotesError) -> StorageReport? {
        let account = try await engine.accountCall(.account, AccountResponse.self, attempts: 1)
        return account.usage.map {
            StorageReport(
                notes: $0.notes, textBytes: $0.textBytes, replayTextBytes: $0.replayTextBytes ?? 0, maxNotes: $0.maxNotes,
                maxTextBytes: $0.maxTextBytes, encryption: account.encryption, plaintextNotes: account.plaintextNotes)
        }
    }

    /// A `wrong_password` answer as `invalid_credentials` with `message`; any other error unchanged.
    static func wrongPassword(_ error: NotesError, _ message: String) -> NotesError {
        guard error.api?.code == .wrongPassword else { return error }
        return NotesError(.invalidCredentials, message, api: error.api, httpStatus: error.httpStatus)
    }
}

/// How the signed-in account proves a password to its server (a password change, an account deletion).
struct PasswordProof: Sendable {
    /// What the request's password field carries: the password itself (a plaintext account) or its AuthKey.
    var credential: String
    /// The encrypted account's key ring on this device; nil for a plaintext account.
    var keys: AccountKeyRing?
}

extension SyncEngine {
    /// How the signed-in account proves `password`, as its sign-in does. This device holds the keys of an encrypted
    /// account (its sign-in stored them), so it knows which it is without asking: a plaintext account sends the
    /// password, as before; an encrypted one sends the AuthKey derived with the KDF parameters its server's prelogin
    /// names (held to the environment's ``KDFPolicy``), and a prelogin that calls it plaintext is refused (a downgrade:
    /// nothing is sent).
    ///
    /// - Throws: `not_signed_in`, `encryption`, the connection's errors.
    func passwordProof(_ password: String) async throws(NotesError) -> PasswordProof {
        let signedIn = try store.read { tx throws -> (Settings, AccountKeyRing?)? in
            guard let settings = try tx.settings(), settings.token != nil, let accountID = settings.accountID else { return nil }
            return (settings, try tx.keyRing(of: accountID))
        }
        guard let (settings, ring) = signedIn, let server = settings.serverURL, let username = settings.username, let url = URL(string: server)
        else {
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.")
        }
        guard let ring else { return PasswordProof(credential: password, keys: nil) }
        let derived = try await credentialKeys(
            username: username, password: password, memory: .encrypted, connection: connection(to: url, server: server, token: nil),
            server: server)
        guard let derived else { throw NotesError.badResponse("a prelogin answer that the encrypted account is plaintext") }
        return PasswordProof(credential: derived.authKey.serverPassword, keys: ring)
    }

    /// Sends a request of the signed-in session and returns its 2xx answer. On 401 the session is forgotten (notes
    /// kept), as a sync does.
    ///
    /// - Parameter attempts: 1 for a request that must not be repeated after a lost answer (the repeat would meet
    ///   the state the first one left: a deleted account answers 401).
    func accountExchange(_ endpoint: Endpoint, body: Data? = nil, attempts: Int? = 1) async throws(NotesError) -> WireResponse {
        try await withAccountConnection { (connection) throws(NotesError) in
            try await connection.exchange(endpoint, body: body, attempts: attempts)
        }
    }

    /// Runs `body` with a connection of the signed-in session; on 401 the session is forgotten (notes kept).
    ///
    /// - Throws: `not_signed_in`, and what `body` throws.
    func withAccountConnection<T>(_ body: (ServerConnection) async throws(NotesError) -> T) async throws(NotesError) -> T {
        let settings = try store.read { tx in try tx.settings() }
        guard let settings, settings.account != nil, let token = settings.token, let server = settings.serverURL,
            let url = URL(string: server)
        else {
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.")
        }
        do {
            return try await body(connection(to: url, server: server, token: token))
        } catch {
            if error.code == .signedOutByServer { forgetRevokedSession(token: token) }
            throw error
        }
    }

    /// ``accountExchange(_:body:attempts:)`` and the answer decoded.
    func accountCall<Response: Decodable>(
        _ endpoint: Endpoint, _ type: Response.Type, body: Data? = nil, attempts: Int? = nil
    ) async throws(NotesError) -> Response {
        let response = try await accountExchange(endpoint, body: body, attempts: attempts)
        do {
            return try WireJSON.decoder().decode(type, from: response.body)
        } catch {
            throw NotesError.badResponse("\(endpoint.method.rawValue) \(endpoint.path) returned \(ServerConnection.preview(response.body))")
        }
    }
}
