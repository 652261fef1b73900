import MiniFlake

// End-to-end encrypted accounts on the wire (Docs/PROTOCOL.md, "End-to-end encryption"; SECURITY.md for the design).
//
// Key material travels in NoteCrypto's text forms (URL-safe base64 without padding); this module carries them as
// strings and bounds their lengths, and the server reads each with NoteCrypto (a blob that is not well formed is
// 400 `invalid_field`, naming the field). Every field here is optional where it extends an older message, so older
// clients and servers keep working.

/// Where an account stands with end-to-end encryption.
public enum EncryptionState: String, Codable, Sendable, CaseIterable {
    /// Notes are stored as pushed, readable by the server (every account before encryption, and operator-made ones).
    case plaintext
    /// `notes encryption enable` is replacing the account's notes by ciphertext: pushes must be encrypted, and
    /// plaintext notes are still left.
    case converting
    /// Every note is a ``NoteRecord/text`` holding a note envelope; the server cannot read any.
    case encrypted
    /// The operator reset the password (`notesyncd users reset-password`): the wrapped key no longer opens with it; the
    /// recovery key does.
    case reset

    /// Whether pushes of an account in this state must be encrypted.
    public var requiresEncryptedPushes: Bool { self != .plaintext }
}

/// The public password-hashing parameters of an account: Argon2id (libsodium's `argon2id13`) with this salt and cost.
///
/// A client checks the cost against its own bounds before deriving anything (NoteCrypto's `KDFCost.minimum` and
/// `maximum`); the server takes any cost within ``EncryptionLimits/opsLimit`` and ``EncryptionLimits/memLimit``.
public struct KDFInfo: Codable, Sendable, Equatable {
    /// The 16-byte salt, URL-safe base64 without padding (22 characters).
    public var salt: String
    /// Argon2id passes.
    public var opsLimit: Int64
    /// Argon2id memory, in bytes.
    public var memLimit: Int64

    public init(salt: String, opsLimit: Int64, memLimit: Int64) {
        self.salt = salt
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }

    public enum CodingKeys: String, WireKey { case salt, opsLimit, memLimit }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        salt = try c.decode(String.self, forKey: .salt)
        opsLimit = try c.decode(Int64.self, forKey: .opsLimit)
        memLimit = try c.decode(Int64.self, forKey: .memLimit)
    }
}

/// The bounds the server holds key material and KDF parameters to.
public enum EncryptionLimits {
    /// Argon2id passes a server stores: 1 (the simulation's testing cost) to 10 (NoteCrypto's `KDFCost.maximum`).
    public static let opsLimit: ClosedRange<Int64> = 1...10
    /// Argon2id memory a server stores, in bytes: 8 KiB (the simulation's testing cost) to 1 GiB (`KDFCost.maximum`).
    public static let memLimit: ClosedRange<Int64> = (8 << 10)...(1 << 30)
    /// The most generations one `GET /v1/account/keys` answer covers (``AccountKeysResponse/through``).
    public static let maxGenerationsPerAnswer: Int64 = 256
    /// The most hand-overs one rotation carries (one per kept session, as `GET /v1/sessions` lists at most).
    public static var maxHandoversPerRotation: Int { SessionListResponse.maxListed }
    /// How far from the server's clock the time of a client-minted account ID (``EncryptionSetup/accountID``) may be,
    /// in milliseconds: a day before it to five minutes after it.
    public static let accountIDWindow: ClosedRange<Int64> = (-86_400_000)...300_000
    /// The highest key generation (NoteCrypto's generations are 32-bit).
    public static let maxGeneration: Int64 = Int64(UInt32.max)
}

/// `POST /v1/prelogin` body: what a client asks before it signs in, to know how to derive its credential.
public struct PreloginRequest: Codable, Sendable, Equatable {
    /// See ``CredentialRules/usernameLength``.
    public var username: String

    public init(username: String) { self.username = username }

    public enum CodingKeys: String, WireKey { case username }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        username = try c.decode(String.self, forKey: .username)
    }
}

/// `POST /v1/prelogin` answer.
///
/// `encrypted: false`: send the password itself. `encrypted: true`: derive the AuthKey with `kdf` and send it as the
/// password. An unknown username answers like an encrypted account (a salt of its own, the production cost), so the
/// answer does not tell unknown usernames from encrypted accounts; a plaintext account's existence does show.
public struct PreloginResponse: Codable, Sendable, Equatable {
    public var encrypted: Bool
    /// Present when `encrypted`.
    public var kdf: KDFInfo?

    public enum CodingKeys: String, WireKey { case encrypted, kdf }

    public init(encrypted: Bool, kdf: KDFInfo? = nil) {
        self.encrypted = encrypted
        self.kdf = kdf
    }
}

/// The keys of a new encrypted account, in `POST /v1/accounts` (`encryption`). Every key is generation 1.
///
/// Key material is bound to its account's ID (NoteCrypto's associated data), which a client signing up cannot learn
/// before the account exists; so the client mints the account's ID itself (its own MiniFlake generator, as it mints
/// client and edit IDs) and sends it as `accountID`. The server takes it when it is free and was minted within
/// ``EncryptionLimits/accountIDWindow`` of the server's clock (so a client cannot push the server's ID high-water mark
/// far ahead), else 400 `invalid_field`.
public struct EncryptionSetup: Codable, Sendable, Equatable {
    /// The account ID the keys are bound to; the account gets it.
    public var accountID: FlakeID
    /// The parameters the client derived the AuthKey (sent as the password) and the WrapKey with.
    public var kdf: KDFInfo
    /// Generation 1 of the account key wrapped by the WrapKey (a NoteCrypto wrapped account key, wrapper 1).
    public var wrappedKey: String
    /// Generation 1 wrapped by the recovery key (wrapper 2).
    public var recoveryWrappedKey: String
    /// The recovery key's X25519 public key: later generations are sealed to it.
    public var recoveryPublicKey: String
    /// The public half of the X25519 key pair the password derives: later generations are sealed to it too.
    public var passwordPublicKey: String

    public init(
        accountID: FlakeID, kdf: KDFInfo, wrappedKey: String, recoveryWrappedKey: String, recoveryPublicKey: String,
        passwordPublicKey: String
    ) {
        self.accountID = accountID
        self.kdf = kdf
        self.wrappedKey = wrappedKey
        self.recoveryWrappedKey = recoveryWrappedKey
        self.recoveryPublicKey = recoveryPublicKey
        self.passwordPublicKey = passwordPublicKey
    }

    public enum CodingKeys: String, WireKey {
        case accountID, kdf, wrappedKey, recoveryWrappedKey, recoveryPublicKey, passwordPublicKey
        public var isID: Bool { self == .accountID }
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        accountID = try c.decode(FlakeID.self, forKey: .accountID)
        kdf = try c.decode(KDFInfo.self, forKey: .kdf)
        wrappedKey = try c.decode(String.self, forKey: .wrappedKey)
        recoveryWrappedKey = try c.decode(String.self, forKey: .recoveryWrappedKey)
        recoveryPublicKey = try c.decode(String.self, forKey: .recoveryPublicKey)
        passwordPublicKey = try c.decode(String.self, forKey: .passwordPublicKey)
    }
}

/// What a sign-in answer tells a device of an encrypted account (``SignInResponse/encryption``).
public struct SignInEncryption: Codable, Sendable, Equatable {
    /// ``EncryptionState/encrypted``, ``EncryptionState/converting`` or ``EncryptionState/reset``.
    public var state: EncryptionState
    public var kdf: KDFInfo
    /// The account key's current generation.
    public var generation: Int64
    /// The current generation wrapped by the WrapKey. After an operator's reset it no longer opens with the password.
    public var wrappedKey: String
    public var recoveryPublicKey: String
    public var passwordPublicKey: String

    public enum CodingKeys: String, WireKey { case state, kdf, generation, wrappedKey, recoveryPublicKey, passwordPublicKey }

    public init(
        state: EncryptionState, kdf: KDFInfo, generation: Int64, wrappedKey: String, recoveryPublicKey: String, passwordPublicKey: String
    ) {
        self.state = state
        self.kdf = kdf
        self.generation = generation
        self.wrappedKey = wrappedKey
        self.recoveryPublicKey = recoveryPublicKey
        self.passwordPublicKey = passwordPublicKey
    }
}

/// One key hand-over in a keys answer: the generation it brings and the sealed blob (a NoteCrypto key hand-over).
public struct KeyHandoverEntry: Codable, Sendable, Equatable {
    public var generation: Int64
    public var handover: String

    public enum CodingKeys: String, WireKey { case generation, handover }

    public init(generation: Int64, handover: String) {
        self.generation = generation
        self.handover = handover
    }
}

/// Query parameter names of the keys endpoint.
public enum AccountKeysQuery {
    /// The newest generation the device already holds (0: none); the answer covers the ones after it.
    public static let after = "after"
}

/// `GET /v1/account/keys?after=G` answer: what a device needs to hold every generation after `G`, for generations
/// `G+1 ... through` (at most ``EncryptionLimits/maxGenerationsPerAnswer``; ask again with `after=through` while
/// `through < generation`).
///
/// A device signed in with the password opens `wrappedKey` (the current generation) and walks `older` down; a
/// device that was kept across a rotation opens its `handovers` up from the generation it holds.
public struct AccountKeysResponse: Codable, Sendable, Equatable {
    public var state: EncryptionState
    /// The current generation.
    public var generation: Int64
    /// The last generation this answer covers.
    public var through: Int64
    /// The current generation wrapped by the WrapKey.
    public var wrappedKey: String
    /// For each generation `g` with `after < g ≤ through` and `g < generation`: generation `g` wrapped by `g + 1`
    /// (wrapper 3), ascending.
    public var older: [String]
    /// Hand-overs sealed to this session's device public key, for generations in `(after, through]`, ascending.
    public var handovers: [KeyHandoverEntry]
    /// Hand-overs sealed to the password public key, for generations in `(after, through]`, ascending.
    public var passwordHandovers: [KeyHandoverEntry]
    /// The account key wrapped by the recovery key (generation 1, or the generation made when the recovery key was
    /// last replaced): what a device recovering the account after an operator's reset opens first.
    public var recoveryWrappedKey: String?
    /// Hand-overs sealed to the recovery key's public key, for generations in `(after, through]`, ascending: with
    /// them the recovery key reaches every later generation.
    public var recoveryHandovers: [KeyHandoverEntry]?
    /// The recovery key's X25519 public key now: what a rotation seals its `recoveryHandover` to.
    public var recoveryPublicKey: String?
    /// The password's X25519 public key now (the last password change's): what a rotation seals its
    /// `passwordHandover` to, so a device signing in with the password later reaches the new generation.
    public var passwordPublicKey: String?

    public enum CodingKeys: String, WireKey {
        case state, generation, through, wrappedKey, older, handovers, passwordHandovers, recoveryWrappedKey, recoveryHandovers
        case recoveryPublicKey, passwordPublicKey
    }

    public init(
        state: EncryptionState, generation: Int64, through: Int64, wrappedKey: String, older: [String], handovers: [KeyHandoverEntry],
        passwordHandovers: [KeyHandoverEntry], recoveryWrappedKey: String? = nil, recoveryHandovers: [KeyHandoverEntry]? = nil,
        recoveryPublicKey: String? = nil, passwordPublicKey: String? = nil
    ) {
        self.recoveryWrappedKey = recoveryWrappedKey
        self.recoveryHandovers = recoveryHandovers
        self.recoveryPublicKey = recoveryPublicKey
        self.passwordPublicKey = passwordPublicKey
        self.state = state
        self.generation = generation
        self.through = through
        self.wrappedKey = wrappedKey
        self.older = older
        self.handovers = handovers
        self.passwordHandovers = passwordHandovers
    }
}

/// One session's hand-over in a rotation: the new generation sealed to that session's device public key.
public struct SessionHandover: Codable, Sendable, Equatable {
    public var sessionID: FlakeID
    public var handover: String

    public init(sessionID: FlakeID, handover: String) {
        self.sessionID = sessionID
        self.handover = handover
    }

    public enum CodingKeys: String, WireKey {
        case sessionID, handover
        public var isID: Bool { self == .sessionID }
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        sessionID = try c.decode(FlakeID.self, forKey: .sessionID)
        handover = try c.decode(String.self, forKey: .handover)
    }
}

/// `POST /v1/account/keys/rotate` body: a new generation of the account key, made by a device that holds the current
/// one. The server cannot check what is inside; it checks the forms and that `generation` is exactly the current one
/// plus one (409 `stale_generation` otherwise: another device rotated first), and stores it all in one transaction.
public struct RotateKeysRequest: Codable, Sendable, Equatable {
    /// The new generation: the current one plus one.
    public var generation: Int64
    /// The current generation wrapped by the new one (wrapper 3): keeps it reachable from the new key.
    public var older: String
    /// The new generation sealed to each session the device keeps (their public keys from `GET /v1/sessions`); at
    /// most ``EncryptionLimits/maxHandoversPerRotation``, each session of this account at most once.
    public var handovers: [SessionHandover]
    /// The new generation sealed to the recovery key's public key.
    public var recoveryHandover: String
    /// The new generation sealed to the password's public key.
    public var passwordHandover: String
    /// A new recovery key (`notes encryption recovery-key`), replacing the account's: its material is of the new
    /// generation, and `recoveryHandover` is sealed to its public key. Not in a password change's rotation.
    public var recovery: RecoveryRenewal?

    public init(
        generation: Int64, older: String, handovers: [SessionHandover], recoveryHandover: String, passwordHandover: String,
        recovery: RecoveryRenewal? = nil
    ) {
        self.generation = generation
        self.older = older
        self.handovers = handovers
        self.recoveryHandover = recoveryHandover
        self.passwordHandover = passwordHandover
        self.recovery = recovery
    }

    public enum CodingKeys: String, WireKey { case generation, older, handovers, recoveryHandover, passwordHandover, recovery }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        generation = try c.decode(Int64.self, forKey: .generation)
        older = try c.decode(String.self, forKey: .older)
        handovers = try c.decode([SessionHandover].self, forKey: .handovers)
        recoveryHandover = try c.decode(String.self, forKey: .recoveryHandover)
        passwordHandover = try c.decode(String.self, forKey: .passwordHandover)
        recovery = try c.decodeIfPresentRefusingNull(RecoveryRenewal.self, forKey: .recovery)
    }
}

/// `POST /v1/account/keys/rotate` answer.
public struct RotateKeysResponse: Codable, Sendable, Equatable {
    /// The account's generation now.
    public var generation: Int64

    public enum CodingKeys: String, WireKey { case generation }
    public init(generation: Int64) { self.generation = generation }
}

/// The `encryption` of a password change of an encrypted account (`POST /v1/account/password`): the key material the
/// new password wraps. `currentPassword` and `newPassword` are then AuthKeys.
public struct PasswordChangeEncryption: Codable, Sendable, Equatable {
    /// The new password's KDF parameters (a new salt).
    public var kdf: KDFInfo
    /// The account's generation after the change (the current one, or the rotation's) wrapped by the new WrapKey.
    public var wrappedKey: String
    /// The new password's X25519 public key.
    public var passwordPublicKey: String
    /// A rotation made with the change (its `passwordHandover` sealed to the new `passwordPublicKey`), so the signed-out
    /// devices never hold the generation written with from now on.
    public var rotation: RotateKeysRequest?

    public init(kdf: KDFInfo, wrappedKey: String, passwordPublicKey: String, rotation: RotateKeysRequest? = nil) {
        self.kdf = kdf
        self.wrappedKey = wrappedKey
        self.passwordPublicKey = passwordPublicKey
        self.rotation = rotation
    }

    public enum CodingKeys: String, WireKey { case kdf, wrappedKey, passwordPublicKey, rotation }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        kdf = try c.decode(KDFInfo.self, forKey: .kdf)
        wrappedKey = try c.decode(String.self, forKey: .wrappedKey)
        passwordPublicKey = try c.decode(String.self, forKey: .passwordPublicKey)
        rotation = try c.decodeIfPresentRefusingNull(RotateKeysRequest.self, forKey: .rotation)
    }
}

/// `POST /v1/account/encryption` body: set up a plaintext account that holds no note as an encrypted one (an account
/// the operator made with `notesyncd users add`, at its first sign-in by a client that supports encryption).
public struct AccountEncryptionRequest: Codable, Sendable, Equatable {
    /// The account's password now (the operator's), checked like a sign-in.
    public var currentPassword: String
    /// The AuthKey of that password under `encryption.kdf`: the credential from now on.
    public var newPassword: String
    /// Generation 1 of the account's keys; `accountID` must be the account's own.
    public var encryption: EncryptionSetup

    public init(currentPassword: String, newPassword: String, encryption: EncryptionSetup) {
        self.currentPassword = currentPassword
        self.newPassword = newPassword
        self.encryption = encryption
    }

    public enum CodingKeys: String, WireKey { case currentPassword, newPassword, encryption }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        currentPassword = try c.decode(String.self, forKey: .currentPassword)
        newPassword = try c.decode(String.self, forKey: .newPassword)
        encryption = try c.decode(EncryptionSetup.self, forKey: .encryption)
    }
}

/// `POST /v1/account/encryption` answer: how many other sessions it signed out, and where the account stands (an
/// account that held notes is `converting` with `plaintextNotes` left to replace; one that held none is `encrypted`).
public struct AccountEncryptionResponse: Codable, Sendable, Equatable {
    public var revokedSessions: Int
    public var encryption: EncryptionState
    /// The account's notes the server still holds in the clear (tombstones are converted by the set-up itself).
    public var plaintextNotes: Int64

    public enum CodingKeys: String, WireKey { case revokedSessions, encryption, plaintextNotes }

    public init(revokedSessions: Int, encryption: EncryptionState, plaintextNotes: Int64) {
        self.revokedSessions = revokedSessions
        self.encryption = encryption
        self.plaintextNotes = plaintextNotes
    }
}

/// A new recovery key's material in a rotation (``RotateKeysRequest/recovery``): the server replaces the account's
/// recovery-wrapped key and recovery public key with these, and drops the hand-overs sealed to the old recovery key,
/// in the rotation's transaction. The old recovery key then opens nothing the server serves (SECURITY.md says what a
/// copy of the server's store made before can still give it).
public struct RecoveryRenewal: Codable, Sendable, Equatable {
    /// The rotation's new generation wrapped by the new recovery key (a NoteCrypto wrapped account key, wrapper 2).
    public var recoveryWrappedKey: String
    /// The new recovery key's X25519 public key: later generations are sealed to it.
    public var recoveryPublicKey: String

    public init(recoveryWrappedKey: String, recoveryPublicKey: String) {
        self.recoveryWrappedKey = recoveryWrappedKey
        self.recoveryPublicKey = recoveryPublicKey
    }

    public enum CodingKeys: String, WireKey { case recoveryWrappedKey, recoveryPublicKey }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        recoveryWrappedKey = try c.decode(String.self, forKey: .recoveryWrappedKey)
        recoveryPublicKey = try c.decode(String.self, forKey: .recoveryPublicKey)
    }
}
