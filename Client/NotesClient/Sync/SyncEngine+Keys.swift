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
    static func rotation(
        of ring: AccountKeyRing, sessions: [SessionInfo], recoveryPublicKey: String?, passwordPublicKey: String?
    ) throws(NotesError) -> Rotation {
        guard let recoveryText = recoveryPublicKey, let passwordText = passwordPublicKey,
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
                passwordHandover: try KeyHandover.seal(key, authenticatedBy: previous, to: password).text)
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
    /// Returns the new generation; nil for a plaintext account (nothing to rotate).
    ///
    /// - Throws: `encryption`, `not_signed_in`, `signed_out_by_server`, the connection's errors.
    func rotateAccountKey() async throws(NotesError) -> UInt32? {
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
                    of: ring, sessions: sessions, recoveryPublicKey: answer.recoveryPublicKey, passwordPublicKey: answer.passwordPublicKey)
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
