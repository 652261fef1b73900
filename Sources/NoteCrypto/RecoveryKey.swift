/// The key a user writes down when encryption is set up: with it, an account whose password was lost (and reset by
/// the operator) gets its notes back.
///
/// 32 random bytes. Two keys are derived from it with libsodium's BLAKE2b KDF (context `FN-recov`): subkey 1 wraps
/// account keys (``AccountKey/wrapped(by:)-(RecoveryKey)``) and subkey 2 seeds an X25519 key pair, so a device
/// that rotates the account key can seal the new generation to the recovery key knowing only its ``publicKey``
/// (``KeyHandover/seal(_:authenticatedBy:to:)``).
///
/// **Human form** (``humanForm``, what the user sees once): 56 Crockford base32 characters in 14 groups of 4 joined
/// by `-`: 52 characters for the 256 bits (the last one's 4 spare bits zero), then 4 of checksum (the first 20 bits
/// of BLAKE2b KDF subkey 1 under context `FN-recck`). Reading (``init(parsing:)``) ignores case, spaces, line
/// breaks and dashes, reads `I` and `L` as `1` and `O` as `0` (Crockford's rule for what people misread), and refuses
/// any other character, the wrong length, or a checksum that does not match (a mistyped character is caught with
/// probability 1 − 2⁻²⁰).
public struct RecoveryKey: Sendable, Equatable, RedactedSecret {
    public static let byteCount = 32
    /// Characters in the human form, dashes not counted.
    public static let humanCharacterCount = 56
    static let dataCharacterCount = 52
    static let context = "FN-recov"
    static let checksumContext = "FN-recck"
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    let secret: SecretBytes
    /// Subkey 1: the AEAD key that wraps account keys.
    let wrappingSecret: SecretBytes
    /// The X25519 key pair seeded by subkey 2 (its secret half never leaves this type).
    let keyPair: DeviceKeyPair

    /// The public half of the recovery key's X25519 key pair: a rotation seals the new account-key generation to it
    /// (``KeyHandover/seal(_:authenticatedBy:to:)``), and whoever holds the recovery key opens that hand-over
    /// (``KeyHandover/open(with:keys:)-(RecoveryKey,_)``). Not secret; devices may keep it.
    public var publicKey: DevicePublicKey { keyPair.publicKey }

    init(secret: SecretBytes) {
        precondition(secret.count == Self.byteCount)
        self.secret = secret
        wrappingSecret = deriveSubkey(of: secret, id: 1, context: Self.context, count: AEAD.keyByteCount)
        keyPair = DeviceKeyPair(seed: deriveSubkey(of: secret, id: 2, context: Self.context, count: DeviceKeyPair.seedByteCount))
    }

    /// A new random recovery key.
    public static func generate() -> RecoveryKey {
        RecoveryKey(secret: .random(count: byteCount))
    }

    /// Reads a recovery key as the user typed it.
    ///
    /// - Throws: ``NoteCryptoError/recoveryKeyInvalidCharacter(_:position:)``,
    ///   ``NoteCryptoError/recoveryKeyWrongLength(_:)`` or ``NoteCryptoError/recoveryKeyChecksumMismatch``.
    public init(parsing text: String) throws(NoteCryptoError) {
        var values: [UInt8] = []
        values.reserveCapacity(Self.humanCharacterCount)
        defer { wipe(&values) }
        var count = 0
        for (index, character) in text.enumerated() {
            if character == "-" || character.isWhitespace { continue }
            guard let value = Self.value(of: character) else {
                throw .recoveryKeyInvalidCharacter(character, position: index + 1)
            }
            count += 1
            if count <= Self.humanCharacterCount { values.append(value) }
        }
        guard count == Self.humanCharacterCount else { throw .recoveryKeyWrongLength(count) }

        // 52 characters carry 260 bits: the key's 256, then 4 that must be zero.
        var typedChecksum = Array(values[Self.dataCharacterCount...])
        let secret = try SecretBytes(count: Self.byteCount) { (bytes: UnsafeMutableRawBufferPointer) throws(NoteCryptoError) in
            var accumulator: UInt32 = 0
            var bits = 0
            var written = 0
            for value in values[..<Self.dataCharacterCount] {
                accumulator = accumulator << 5 | UInt32(value)
                bits += 5
                if bits >= 8 {
                    bits -= 8
                    bytes[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                    written += 1
                }
            }
            let spare = accumulator & ((1 << UInt32(bits)) - 1)
            accumulator = 0
            guard bits == 4, written == Self.byteCount, spare == 0 else { throw .recoveryKeyChecksumMismatch }
        }
        var expected = Self.checksum(of: secret)
        defer { wipe(&expected); wipe(&typedChecksum) }
        guard constantTimeEquals(expected, typedChecksum) else { throw .recoveryKeyChecksumMismatch }
        self.init(secret: secret)
    }

    /// The form the user writes down: 14 groups of 4 Crockford base32 characters joined by `-`. Show it once; never
    /// log or store it.
    public var humanForm: String {
        var values: [UInt8] = []
        values.reserveCapacity(Self.humanCharacterCount)
        secret.withUnsafeBytes { bytes in
            var accumulator: UInt32 = 0
            var bits = 0
            for byte in bytes {
                accumulator = (accumulator << 8 | UInt32(byte)) & 0xFFF
                bits += 8
                while bits >= 5 {
                    bits -= 5
                    values.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)) & 31)
                }
            }
            values.append(UInt8(truncatingIfNeeded: accumulator << UInt32(5 - bits)) & 31)
        }
        var checksum = Self.checksum(of: secret)
        values.append(contentsOf: checksum)
        wipe(&checksum)
        var characters: [UInt8] = []
        characters.reserveCapacity(Self.humanCharacterCount / 4 * 5)
        for (index, value) in values.enumerated() {
            if index > 0 && index % 4 == 0 { characters.append(UInt8(ascii: "-")) }
            characters.append(Self.alphabet[Int(value)])
        }
        wipe(&values)
        defer { wipe(&characters) }
        return String(decoding: characters, as: UTF8.self)
    }

    /// The 4 checksum characters' values (5 bits each) for `secret`.
    static func checksum(of secret: SecretBytes) -> [UInt8] {
        let digest = deriveSubkey(of: secret, id: 1, context: checksumContext, count: 16)
        return digest.withUnsafeBytes { bytes in
            let first20 = UInt32(bytes[0]) << 12 | UInt32(bytes[1]) << 4 | UInt32(bytes[2]) >> 4
            return [15, 10, 5, 0].map { UInt8(truncatingIfNeeded: first20 >> UInt32($0)) & 31 }
        }
    }

    /// The value of one Crockford base32 character, read leniently (`i`, `l` as 1, `o` as 0); nil for any other.
    static func value(of character: Character) -> UInt8? {
        guard let ascii = character.asciiValue else { return nil }
        switch ascii {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return ascii - UInt8(ascii: "0")
        case UInt8(ascii: "o"), UInt8(ascii: "O"): return 0
        case UInt8(ascii: "i"), UInt8(ascii: "I"), UInt8(ascii: "l"), UInt8(ascii: "L"): return 1
        default:
            let upper = ascii >= UInt8(ascii: "a") && ascii <= UInt8(ascii: "z") ? ascii - 32 : ascii
            return alphabet.firstIndex(of: upper).map { UInt8($0) }
        }
    }

    public var redactedDescription: String { "RecoveryKey(<redacted>)" }

    /// Same bytes, compared in constant time.
    public static func == (lhs: RecoveryKey, rhs: RecoveryKey) -> Bool { lhs.secret.constantTimeEquals(rhs.secret) }
}
