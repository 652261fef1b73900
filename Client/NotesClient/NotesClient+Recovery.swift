import Foundation
import NoteCrypto
import NoteSyncProtocol

// The recovery key of an end-to-end encrypted account (Docs/SECURITY.md, "Recovery"): getting an account back after
// the operator reset its password, and replacing the recovery key while signed in.

extension NotesClient {
    /// Gets `username`'s encrypted account back after the server's operator reset its password
    /// (`notesyncd users reset-password`): proves the temporary password the operator gave, opens every generation of
    /// the account key with `recoveryKey` (its human form, as shown at sign-up or by ``renewRecoveryKey()``), makes
    /// `newPassword` the account's password (it wraps the key again; no note is re-uploaded), then signs in with it
    /// and syncs as ``signIn(server:username:password:unowned:wipe:progress:)`` does.
    ///
    /// - Throws: `invalid_input` (a recovery key or new password that is not one, an account that was not reset or is
    ///   not encrypted), `invalid_credentials` (wrong temporary password), `encryption` (the recovery key opens
    ///   nothing of this account: nothing changed), the connection's errors.
    public func recoverAccount(
        server: String, username: String, temporaryPassword: String, recoveryKey: String, newPassword: String,
        unowned: UnownedNotes = .keepAside, wipe: Bool = false, progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws(NotesError) -> SignInReport {
        let key: RecoveryKey
        do {
            key = try RecoveryKey(parsing: recoveryKey)
        } catch {
            throw NotesError(.invalidInput, "That is not a recovery key: \(error.description)")
        }
        guard CredentialRules.isAcceptablePassword(newPassword) else {
            throw NotesError(
                .invalidInput,
                "A password is \(CredentialRules.passwordBytes.lowerBound)–\(CredentialRules.passwordBytes.upperBound) bytes, without NUL characters.")
        }
        let (url, serverText) = try Self.parseServer(server)
        guard let canonical = CredentialRules.canonicalUsername(username) else {
            throw NotesError(.invalidInput, "'\(username)' is not a valid username.")
        }
        try await engine.recover(
            url: url, server: serverText, username: canonical, temporaryPassword: temporaryPassword, recoveryKey: key, newPassword: newPassword)
        return try await engine.signIn(
            url: url, server: serverText, username: canonical, password: newPassword, unowned: unowned, wipe: wipe, progress: progress)
    }

    /// Makes a new recovery key for the signed-in encrypted account and returns its human form, to be shown once. It
    /// rides on a rotation of the account key (generation current + 1, handed over to every signed-in device): the
    /// server replaces the recovery material and deletes what was sealed to the old recovery key, which from then on
    /// opens nothing the server serves.
    ///
    /// - Throws: `invalid_input` (a plaintext account: it has no recovery key), `not_signed_in`,
    ///   `signed_out_by_server`, `encryption`, the connection's errors.
    public func renewRecoveryKey() async throws(NotesError) -> (recoveryKey: String, keyGeneration: UInt32) {
        let renewed = RecoveryKey.generate()
        guard let generation = try await engine.rotateAccountKey(renewing: renewed) else {
            throw NotesError(.invalidInput, "This account is not end-to-end encrypted: it has no recovery key.")
        }
        return (renewed.humanForm, generation)
    }
}
