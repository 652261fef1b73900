import NoteSyncProtocol

extension NotesClient {
    /// Converts the signed-in plaintext account to end-to-end encryption (`notes encryption enable`): sets up its keys
    /// on the server (`POST /v1/account/encryption`: the account is then `converting`, the credential becomes the
    /// password's AuthKey and every other device is signed out), then pushes every note the server still holds in the
    /// clear as its ciphertext (a new version each, conflict copies included). Resumable: interrupted, the notes stay
    /// queued here and the next ``sync(progress:)`` sends them; run again, it asks the server which notes are left.
    /// When none is, the server deletes what it kept in the clear (history, replay texts) and the account is
    /// encrypted. The report's ``ConversionReport/recoveryKey`` is the new keys' recovery key, to show once.
    ///
    /// - Throws: `not_signed_in`; `invalid_credentials` (a wrong password: nothing changed); `encryption` (this
    ///   device holds the account's keys but its server says plaintext: a downgrade, refused); the errors of a sync.
    public func enableEncryption(
        password: String, progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws(NotesError) -> ConversionReport {
        try await engine.enableEncryption(password: password, progress: progress)
    }
}
