import MiniFlake
import NoteCrypto
import NoteSyncProtocol

/// What a store keeps for end-to-end encrypted accounts beyond ``NoteStore``: the accounts' key material (opaque
/// blobs, see ``AccountKeys``), their rotations' hand-overs, and the server's own secrets. Both stores implement it
/// and share its conformance suite; the account's state and generation live on its row (``AccountRecord``), and an
/// encrypted account's keys are written with it by ``NoteStore/createAccount(_:)``.
public protocol EncryptionStore: Sendable {
    /// The server secret named `name`, made by `make` and stored the first time it is asked for (one transaction:
    /// two daemons asking at once get the same secret). Never served to a client.
    func serverSecret(named name: String, orCreate make: @Sendable () -> [UInt8]) async throws -> [UInt8]

    /// The key material of an account that is not plaintext, nil otherwise (or when there is no such account).
    func encryptionKeys(accountID: FlakeID) async throws -> AccountKeys?

    /// The account's key chain over `generations`: each generation `g` of the range wrapped by `g + 1` (those the
    /// store has), and the hand-overs of the range's generations sealed to `sessionID` and to the password, ascending.
    func keyChain(accountID: FlakeID, sessionID: FlakeID, generations: ClosedRange<UInt32>) async throws -> KeyChain

    /// Stores a rotation in one transaction, if the account's generation is still `rotation.generation - 1` (and it
    /// is not plaintext): the account's generation becomes `rotation.generation`, `rotation.older` joins the key
    /// chain, and each hand-over is kept for its recipient. A session recipient must be one of the account's. With
    /// `rotation.recovery` (a new recovery key) the account's recovery-wrapped key and recovery public key are
    /// replaced in the same transaction, and the hand-overs sealed to the old recovery key deleted.
    func rotateKeys(accountID: FlakeID, _ rotation: KeyRotation) async throws -> RotationOutcome

    /// An encrypted account's password change, in one transaction: when `rotation` is given (without `recovery`: a
    /// password change keeps the recovery key) it is applied first as ``rotateKeys(accountID:_:)`` does (refused
    /// whole when stale or naming another account's session); then, if the account is at `keys.wrappedKey`'s generation (else
    /// ``RotationOutcome/stale(current:)``, nothing stored), the account's KDF parameters, password-wrapped key and password public key are
    /// replaced (`keys.recoveryWrappedKey` and `keys.recoveryPublicKey` are left as stored), its password hash too, and
    /// its sessions but `keepingSession` deleted; an account in ``EncryptionState/reset`` becomes
    /// ``EncryptionState/encrypted`` (recovered: its key is wrapped by a password again). Returns the rotation's outcome (``RotationOutcome/rotated`` also
    /// without one) and how many sessions were deleted; ``RotationOutcome/stale(current:)`` with `current` 0 when
    /// the account is plaintext or gone.
    func changeEncryptedPassword(
        accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID,
        rotation: KeyRotation?
    ) async throws -> (RotationOutcome, revokedSessions: Int)

    /// Sets up a plaintext account as encrypted at generation 1, in one transaction: its keys, its new password hash,
    /// its state; its sessions but `keepingSession` deleted. An account that holds notes starts converting
    /// (``EncryptionState/converting``): its live notes and history versions are marked plaintext, its tombstones
    /// drop their tags and flags; an encrypted push that writes a note marks it converted, and the one that converts
    /// the last finishes the conversion (the history from before it deleted, the applied edits' texts, tags and
    /// flags taken out, the account marked encrypted). An account with nothing live to convert is encrypted at once.
    func setUpEncryption(accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID) async throws -> SetUpOutcome

    /// How many of the account's notes are still in the clear: 0 unless it is converting.
    func plaintextNoteCount(accountID: FlakeID) async throws -> Int64

    /// The operator's reset of an encrypted account's password (`notesyncd users reset-password`): replaces the
    /// password hash (the bcrypt of the new password's AuthKey), marks the account ``EncryptionState/reset`` and
    /// deletes its sessions, in one transaction. Returns false when there is no such account or it is plaintext.
    func resetEncryptedPassword(accountID: FlakeID, passwordHash: String) async throws -> Bool
}

extension EncryptionStore {
    /// ``rotateKeys(accountID:_:)`` with the rotation's parts.
    func rotateKeys(
        accountID: FlakeID, generation: UInt32, older: WrappedAccountKey, handovers: [(HandoverRecipient, KeyHandover)],
        recovery: AccountRecovery? = nil
    ) async throws -> RotationOutcome {
        try await rotateKeys(
            accountID: accountID, KeyRotation(generation: generation, older: older, handovers: handovers, recovery: recovery))
    }
}

/// A new generation of an account's key, its parts checked (``RotateKeysRequest``): what
/// ``EncryptionStore/rotateKeys(accountID:_:)`` stores.
public struct KeyRotation: Sendable {
    /// The new generation: the account's current one plus one.
    public var generation: UInt32
    /// The current generation wrapped by the new one.
    public var older: WrappedAccountKey
    /// The new generation sealed to each recipient that keeps it (sessions, the recovery key, the password).
    public var handovers: [(HandoverRecipient, KeyHandover)]
    /// A new recovery key replacing the account's; nil keeps it.
    public var recovery: AccountRecovery?
}

/// A new recovery key's material, checked (``RecoveryRenewal``): the rotation's generation wrapped by it, and its
/// public key.
public struct AccountRecovery: Sendable, Equatable {
    public var wrappedKey: WrappedAccountKey
    public var publicKey: DevicePublicKey
}

/// What ``EncryptionStore/rotateKeys(accountID:_:)`` did.
public enum RotationOutcome: Sendable, Equatable {
    /// Stored: the account is at the new generation.
    case rotated
    /// Nothing stored: the account is at `current`, not the generation before the one asked for (or is plaintext:
    /// `current` 0).
    case stale(current: UInt32)
    /// Nothing stored: a hand-over names a session that is not one of the account's.
    case unknownSession(FlakeID)
}

/// What ``EncryptionStore/setUpEncryption(accountID:passwordHash:keys:keepingSession:)`` did.
public enum SetUpOutcome: Sendable, Equatable {
    /// Set up; this many other sessions were deleted; `plaintextNotes` notes are left to convert (0: the account is
    /// encrypted, else converting).
    case done(revokedSessions: Int, plaintextNotes: Int64)
    /// Nothing stored: the account is not plaintext (or is gone).
    case notPlaintext
}
