import CSodium
import Foundation

/// The cost of one Argon2id run: passes over memory (`opsLimit`) and memory in bytes (`memLimitBytes`).
///
/// ``production`` is what new accounts get; ``minimum`` is what a client accepts from a server (anything weaker is a
/// downgrade: refused); ``maximum`` bounds what a hostile server can make a device spend. ``insecureForTesting`` is
/// for the simulation and tests only, and is refused unless the caller passes ``KDFPolicy/allowInsecureForTesting``.
public struct KDFCost: Sendable, Hashable {
    /// Argon2id passes (libsodium's `opslimit`).
    public let opsLimit: UInt64
    /// Memory in bytes (libsodium's `memlimit`; Argon2 uses it in KiB).
    public let memLimitBytes: Int

    /// A cost within libsodium's own bounds for Argon2id (ops ≥ 1, memory ≥ 8 KiB); policy bounds are checked where
    /// keys are derived.
    public init(opsLimit: UInt64, memLimitBytes: Int) {
        self.opsLimit = opsLimit
        self.memLimitBytes = memLimitBytes
    }

    /// New accounts: 3 passes over 64 MiB (about 0.3 s on one core of the development machine, SECURITY.md).
    public static let production = KDFCost(opsLimit: 3, memLimitBytes: 64 << 20)
    /// The weakest cost a client accepts from a server: 2 passes over 64 MiB (libsodium's "interactive").
    public static let minimum = KDFCost(opsLimit: 2, memLimitBytes: 64 << 20)
    /// The costliest a client accepts: 10 passes over 1 GiB (about 30 times production).
    public static let maximum = KDFCost(opsLimit: 10, memLimitBytes: 1 << 30)
    /// One pass over 8 KiB (libsodium's least): microseconds. For the simulation and tests only; a device refuses
    /// it unless told ``KDFPolicy/allowInsecureForTesting``.
    public static let insecureForTesting = KDFCost(opsLimit: 1, memLimitBytes: 8 << 10)

    /// Whether this cost is at least ``minimum`` in both passes and memory.
    public var meetsMinimum: Bool { opsLimit >= Self.minimum.opsLimit && memLimitBytes >= Self.minimum.memLimitBytes }
    /// Whether this cost is at most ``maximum`` in both passes and memory.
    public var withinMaximum: Bool { opsLimit <= Self.maximum.opsLimit && memLimitBytes <= Self.maximum.memLimitBytes }
}

/// An account's public password-hashing parameters: Argon2id's cost and a 16-byte random salt.
///
/// Not secret: a server hands them to any client before sign-in. ``algorithm`` names the only algorithm.
public struct KDFParameters: Sendable, Hashable {
    /// The algorithm's name for the wire: Argon2id version 1.3 (`crypto_pwhash_ALG_ARGON2ID13`).
    public static let algorithm = "argon2id13"
    /// The salt's length in bytes (`crypto_pwhash_SALTBYTES`).
    public static let saltByteCount = 16

    public let cost: KDFCost
    /// ``saltByteCount`` random bytes, unique to the account.
    public let salt: [UInt8]

    /// Parameters read from a server or a store.
    ///
    /// - Throws: ``NoteCryptoError/invalidSalt(length:)`` when `salt` is not 16 bytes. The cost is checked against the
    ///   policy when keys are derived (``PasswordKDF/deriveKeys(password:parameters:policy:)``).
    public init(cost: KDFCost, salt: [UInt8]) throws(NoteCryptoError) {
        guard salt.count == Self.saltByteCount else { throw .invalidSalt(length: salt.count) }
        self.cost = cost
        self.salt = salt
    }

    /// Parameters whose salt is in its text form (URL-safe base64 without padding, as the wire carries it).
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)`` when the text is not canonical base64, or
    ///   ``NoteCryptoError/invalidSalt(length:)`` when it does not hold 16 bytes.
    public init(cost: KDFCost, saltText: some StringProtocol) throws(NoteCryptoError) {
        try self.init(cost: cost, salt: Base64URL.decode(saltText, maximumCount: Self.saltByteCount, blob: .kdfSalt))
    }

    /// The salt's text form: URL-safe base64 without padding (22 characters).
    public var saltText: String { Base64URL.encode(salt) }

    /// Fresh parameters for a new account: `cost` (production unless a test says otherwise) and a random salt.
    public static func generate(cost: KDFCost = .production) -> KDFParameters {
        // The salt has the right length by construction.
        try! KDFParameters(cost: cost, salt: randomBytes(saltByteCount))
    }
}

/// Which KDF costs a caller accepts.
public enum KDFPolicy: Sendable {
    /// Production: refuse anything below ``KDFCost/minimum`` (a downgrading server) or above ``KDFCost/maximum``.
    case enforceMinimum
    /// The simulation and tests: accept ``KDFCost/insecureForTesting`` too (still nothing above the maximum).
    case allowInsecureForTesting
}

/// The keys a password gives: ``authKey`` for the server, ``wrapKey`` for the device alone.
public struct DerivedKeys: Sendable {
    /// What the client sends the server in place of the password.
    public let authKey: AuthKey
    /// What wraps the account key; never leaves the device, never stored.
    public let wrapKey: WrapKey
    /// The password's X25519 key pair: its public half goes to the server (`passwordPublicKey`), and key hand-overs
    /// of later generations are sealed to it, so a device that later signs in with the password opens them. Never
    /// stored.
    public let passwordKeyPair: DeviceKeyPair
}

/// The password's stand-in at the server: the client sends ``serverPassword`` where it sent the password, and the
/// server bcrypts it as it bcrypted passwords.
///
/// Derived from the Argon2id output under its own context, independently of the ``WrapKey``: knowing it (or
/// breaking its bcrypt hash) tells nothing about the wrap key beyond a new Argon2id guess per password tried.
public struct AuthKey: Sendable, Equatable, RedactedSecret {
    public static let byteCount = 32
    let secret: SecretBytes

    /// The key as 64 lowercase hexadecimal characters: within bcrypt's 72 bytes, no NUL, printable, so it passes the
    /// server's password rules unchanged. Send it over TLS only; never log it.
    public var serverPassword: String { secret.withUnsafeBytes { Hex.encode($0) } }

    public var redactedDescription: String { "AuthKey(<redacted>)" }

    public static func == (lhs: AuthKey, rhs: AuthKey) -> Bool { lhs.secret.constantTimeEquals(rhs.secret) }
}

/// The password-derived key that wraps the account key (``AccountKey/wrapped(by:)-(WrapKey)``). It never leaves the
/// device and is never stored: a device keeps the unwrapped account keys instead.
public struct WrapKey: Sendable, Equatable, RedactedSecret {
    public static let byteCount = 32
    let secret: SecretBytes

    public var redactedDescription: String { "WrapKey(<redacted>)" }

    public static func == (lhs: WrapKey, rhs: WrapKey) -> Bool { lhs.secret.constantTimeEquals(rhs.secret) }
}

/// Password → Argon2id → two independent keys.
///
/// `master = Argon2id(NFC(password), salt, ops, mem)` (32 bytes, `crypto_pwhash`, parallelism 1), then with
/// libsodium's BLAKE2b KDF (`crypto_kdf_derive_from_key`, subkey 1): ``AuthKey`` under context `FN-auth1`,
/// ``WrapKey`` under `FN-wrap1`, and the seed of the password's X25519 key pair (``DerivedKeys/passwordKeyPair``)
/// under `FN-pkey1`. The master is wiped at once. The password is normalised to Unicode NFC first, so
/// the same password typed on systems that compose accents differently gives the same keys.
public enum PasswordKDF {
    /// The KDF contexts (exactly 8 bytes each, libsodium's `crypto_kdf_CONTEXTBYTES`).
    static let authContext = "FN-auth1"
    static let wrapContext = "FN-wrap1"
    static let passwordKeyContext = "FN-pkey1"

    /// Derives both keys from `password`. Deterministic: the same password and parameters give the same keys.
    ///
    /// Blocks the calling thread for the whole Argon2id run (about 0.3 s and 64 MiB at production cost): call it off
    /// a thread that must stay responsive.
    ///
    /// - Throws: ``NoteCryptoError/kdfTooWeak(opsLimit:memLimitBytes:)`` below ``KDFCost/minimum`` under
    ///   ``KDFPolicy/enforceMinimum``; ``NoteCryptoError/kdfTooCostly(opsLimit:memLimitBytes:)`` above
    ///   ``KDFCost/maximum`` or outside libsodium's bounds; ``NoteCryptoError/kdfFailed`` when Argon2id cannot allocate.
    public static func deriveKeys(
        password: String, parameters: KDFParameters, policy: KDFPolicy = .enforceMinimum
    ) throws(NoteCryptoError) -> DerivedKeys {
        Sodium.ensureInitialized()
        let cost = parameters.cost
        switch policy {
        case .enforceMinimum:
            guard cost.meetsMinimum else { throw .kdfTooWeak(opsLimit: cost.opsLimit, memLimitBytes: cost.memLimitBytes) }
        case .allowInsecureForTesting:
            guard cost.opsLimit >= UInt64(crypto_pwhash_argon2id_OPSLIMIT_MIN), cost.memLimitBytes >= Int(crypto_pwhash_argon2id_MEMLIMIT_MIN) else {
                throw .kdfTooWeak(opsLimit: cost.opsLimit, memLimitBytes: cost.memLimitBytes)
            }
        }
        guard cost.withinMaximum else { throw .kdfTooCostly(opsLimit: cost.opsLimit, memLimitBytes: cost.memLimitBytes) }

        // NUL-terminated so that even the empty password has an address; the length excludes the terminator.
        var passwordBytes = Array(password.precomposedStringWithCanonicalMapping.utf8)
        passwordBytes.append(0)
        defer { wipe(&passwordBytes) }
        let master = try SecretBytes(count: 32) { (output: UnsafeMutableRawBufferPointer) throws(NoteCryptoError) in
            let status = passwordBytes.withUnsafeBufferPointer { password in
                parameters.salt.withUnsafeBufferPointer { salt in
                    password.withMemoryRebound(to: CChar.self) { passwordCharacters in
                        crypto_pwhash(
                            output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(output.count),
                            passwordCharacters.baseAddress!, UInt64(passwordCharacters.count - 1),
                            salt.baseAddress!, cost.opsLimit, cost.memLimitBytes, crypto_pwhash_ALG_ARGON2ID13)
                    }
                }
            }
            guard status == 0 else { throw .kdfFailed }
        }
        return DerivedKeys(
            authKey: AuthKey(secret: deriveSubkey(of: master, id: 1, context: authContext, count: AuthKey.byteCount)),
            wrapKey: WrapKey(secret: deriveSubkey(of: master, id: 1, context: wrapContext, count: WrapKey.byteCount)),
            passwordKeyPair: DeviceKeyPair(
                seed: deriveSubkey(of: master, id: 1, context: passwordKeyContext, count: DeviceKeyPair.seedByteCount)))
    }
}

/// A subkey of a 32-byte master key: libsodium's BLAKE2b KDF (`crypto_kdf_derive_from_key`) with an 8-byte context.
///
/// Subkeys under different contexts or IDs are independent: one tells nothing about another or about the master.
func deriveSubkey(of master: SecretBytes, id: UInt64, context: String, count: Int) -> SecretBytes {
    precondition(master.count == Int(crypto_kdf_KEYBYTES), "KDF master keys are \(crypto_kdf_KEYBYTES) bytes")
    precondition(context.utf8.count == Int(crypto_kdf_CONTEXTBYTES), "KDF contexts are \(crypto_kdf_CONTEXTBYTES) bytes")
    return SecretBytes(count: count) { (subkey: UnsafeMutableRawBufferPointer) in
        master.withKeyPointer { key in
            let status = crypto_kdf_derive_from_key(
                subkey.baseAddress!.assumingMemoryBound(to: UInt8.self), subkey.count, id, context, key)
            precondition(status == 0, "crypto_kdf_derive_from_key refused a subkey of \(subkey.count) bytes")
        }
    }
}

/// Zeroes a buffer that held a secret (`sodium_memzero`, which the compiler cannot drop).
func wipe(_ bytes: inout [UInt8]) {
    let count = bytes.count
    guard count > 0 else { return }
    bytes.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, count) }
}
