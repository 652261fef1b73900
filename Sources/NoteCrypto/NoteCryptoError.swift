import MiniFlake

/// Everything NoteCrypto refuses or fails at.
///
/// Each case has a stable snake_case ``code`` (safe to log, to put on the wire and to match on) and a
/// ``description`` that is one human sentence. No case carries a byte of a secret.
public enum NoteCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes (or text) are not a well-formed blob of this kind: nothing was decrypted.
    case malformed(Blob, Malformation)
    /// The blob's version byte is one this build does not know (a newer client wrote it).
    case unsupportedVersion(Blob, UInt8)
    /// The blob was sealed under an account-key generation the key ring does not hold (yet): fetch or unwrap it.
    case unknownKeyGeneration(Blob, UInt32)
    /// Authenticated decryption failed: the blob was altered, or it was sealed for something else than what the
    /// caller expected (for a note: another note, account, edit or key; for a wrapped key: another password,
    /// recovery key, account or generation; for a hand-over: another device).
    case doesNotAuthenticate(Blob)
    /// A key of one account was used for another account's data, or a key ring was given a key of another account.
    case keyOfAnotherAccount(expected: FlakeID, found: FlakeID)
    /// Key bytes of the wrong length (a damaged local store).
    case invalidKeyLength(expected: Int, found: Int)
    /// A generation number that cannot be: 0, past `UInt32.max`, or a key wrapped by its own generation.
    case invalidGeneration(UInt32)
    /// A key ring was given two different keys for one generation.
    case conflictingGeneration(UInt32)
    /// A wrapped account key was opened with the wrong kind of key (a recovery key for a password-wrapped key).
    case wrongWrapper(expected: WrappedAccountKey.Wrapper, found: WrappedAccountKey.Wrapper)
    /// A key hand-over that does not bring a newer generation (its wrapper is not an older generation).
    case notAHandover
    /// The public key is not a usable X25519 key (a low-order point).
    case invalidPublicKey
    /// KDF parameters weaker than ``KDFCost/minimum`` under ``KDFPolicy/enforceMinimum``: a server that would
    /// downgrade the password's protection.
    case kdfTooWeak(opsLimit: UInt64, memLimitBytes: Int)
    /// KDF parameters costlier than ``KDFCost/maximum``: a server that would make the device run out of memory.
    case kdfTooCostly(opsLimit: UInt64, memLimitBytes: Int)
    /// A KDF salt that is not ``KDFParameters/saltByteCount`` bytes.
    case invalidSalt(length: Int)
    /// Argon2id could not run (it could not allocate its memory).
    case kdfFailed
    /// A recovery key holds a character outside Crockford base32 (1-based `position` in the text as typed).
    case recoveryKeyInvalidCharacter(Character, position: Int)
    /// A recovery key with the wrong number of characters (spaces and dashes not counted).
    case recoveryKeyWrongLength(Int)
    /// A recovery key whose checksum does not match: a character was mistyped.
    case recoveryKeyChecksumMismatch

    /// What kind of blob an error is about.
    public enum Blob: String, Sendable, Equatable {
        case noteEnvelope = "note envelope"
        case wrappedAccountKey = "wrapped account key"
        case keyHandover = "key hand-over"
        case devicePublicKey = "device public key"
        case kdfSalt = "KDF salt"
        case notePayload = "note payload"
        case attachmentKey = "attachment key"
        case attachmentChunk = "attachment chunk"
    }

    /// Why bytes are not a well-formed blob.
    public enum Malformation: Sendable, Equatable {
        /// Fewer bytes than the blob's fixed parts need.
        case tooShort(length: Int, minimum: Int)
        /// More bytes than the blob may have.
        case tooLong(length: Int, maximum: Int)
        /// The text is not canonical URL-safe base64 without padding.
        case notBase64URL
        /// A field holds a value the layout does not allow; the payload names the field and the value.
        case invalidField(String)
    }

    /// A stable snake_case code, e.g. `does_not_authenticate`.
    public var code: String {
        switch self {
        case .malformed: "malformed"
        case .unsupportedVersion: "unsupported_version"
        case .unknownKeyGeneration: "unknown_key_generation"
        case .doesNotAuthenticate: "does_not_authenticate"
        case .keyOfAnotherAccount: "key_of_another_account"
        case .invalidKeyLength: "invalid_key_length"
        case .invalidGeneration: "invalid_generation"
        case .conflictingGeneration: "conflicting_generation"
        case .wrongWrapper: "wrong_wrapper"
        case .notAHandover: "not_a_handover"
        case .invalidPublicKey: "invalid_public_key"
        case .kdfTooWeak: "kdf_too_weak"
        case .kdfTooCostly: "kdf_too_costly"
        case .invalidSalt: "invalid_salt"
        case .kdfFailed: "kdf_failed"
        case .recoveryKeyInvalidCharacter: "recovery_key_invalid_character"
        case .recoveryKeyWrongLength: "recovery_key_wrong_length"
        case .recoveryKeyChecksumMismatch: "recovery_key_checksum_mismatch"
        }
    }

    /// One human sentence saying what is wrong.
    public var description: String {
        switch self {
        case .malformed(let blob, let malformation):
            "The \(blob.rawValue) is malformed: \(malformation.description)."
        case .unsupportedVersion(let blob, let version):
            "The \(blob.rawValue) has version \(version), which this version of FlakeNotes cannot read; update it."
        case .unknownKeyGeneration(let blob, let generation):
            "The \(blob.rawValue) is encrypted under account key generation \(generation), which this device does not hold."
        case .doesNotAuthenticate(.noteEnvelope):
            "The note's ciphertext does not decrypt for this note: it was altered, or it belongs to another note, account or edit."
        case .doesNotAuthenticate(.wrappedAccountKey):
            "The wrapped account key does not open with this key: a different password or recovery key wrapped it, or it was altered."
        case .doesNotAuthenticate(.keyHandover):
            "The key hand-over does not open: it was sealed for another device or altered."
        case .doesNotAuthenticate(.attachmentChunk):
            "The attachment chunk does not decrypt: it was altered, or it belongs at another place, to another file or account."
        case .doesNotAuthenticate(let blob):
            "The \(blob.rawValue) does not authenticate."
        case .keyOfAnotherAccount(let expected, let found):
            "A key of account \(found) was used for account \(expected)."
        case .invalidKeyLength(let expected, let found):
            "A key must be \(expected) bytes; this one is \(found)."
        case .invalidGeneration(let generation):
            "\(generation) is not a usable account key generation."
        case .conflictingGeneration(let generation):
            "Two different keys claim account key generation \(generation)."
        case .wrongWrapper(let expected, let found):
            "This account key is wrapped by \(found.description), not by \(expected.description)."
        case .notAHandover:
            "The key hand-over does not bring a newer account key generation."
        case .invalidPublicKey:
            "The device public key is not a usable X25519 key."
        case .kdfTooWeak(let ops, let memory):
            "The server asks for password hashing weaker than the minimum (Argon2id ops \(ops), \(memory >> 10) KiB; "
                + "at least ops \(KDFCost.minimum.opsLimit), \(KDFCost.minimum.memLimitBytes >> 20) MiB): refused."
        case .kdfTooCostly(let ops, let memory):
            "The server asks for password hashing beyond the maximum (Argon2id ops \(ops), \(memory >> 20) MiB; "
                + "at most ops \(KDFCost.maximum.opsLimit), \(KDFCost.maximum.memLimitBytes >> 20) MiB): refused."
        case .invalidSalt(let length):
            "A password salt must be \(KDFParameters.saltByteCount) bytes; this one is \(length)."
        case .kdfFailed:
            "Argon2id failed: not enough memory for password hashing."
        case .recoveryKeyInvalidCharacter(let character, let position):
            "'\(character)' (character \(position)) cannot be in a recovery key: it uses 0–9 and A–Z without I, L, O and U."
        case .recoveryKeyWrongLength(let count):
            "A recovery key has \(RecoveryKey.humanCharacterCount) characters (not counting dashes and spaces); this one has \(count)."
        case .recoveryKeyChecksumMismatch:
            "This recovery key's checksum does not match: a character is mistyped."
        }
    }
}

extension NoteCryptoError.Malformation: CustomStringConvertible {
    public var description: String {
        switch self {
        case .tooShort(let length, let minimum): "\(length) bytes, fewer than the \(minimum) it needs"
        case .tooLong(let length, let maximum): "\(length) bytes, more than the \(maximum) allowed"
        case .notBase64URL: "not URL-safe base64 without padding"
        case .invalidField(let field): field
        }
    }
}
