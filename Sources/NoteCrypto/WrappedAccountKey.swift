import MiniFlake

/// An ``AccountKey`` encrypted under another key, as the server stores it: by the password's ``WrapKey``, by the
/// ``RecoveryKey``, or by another generation of the account key (an older one authenticates a rotation's
/// ``KeyHandover``; a newer one keeps older generations reachable from the current key).
///
/// Binary layout (82 bytes, integers big-endian):
///
///     offset  0  version            1 byte   (1)
///             1  wrapper            1 byte   (1 password, 2 recovery key, 3 account key)
///             2  generation         4 bytes  (the wrapped key's, ≥ 1)
///             6  wrapper generation 4 bytes  (the wrapping account key's; 0 for a password or recovery key)
///            10  nonce             24 bytes  (random)
///            34  ciphertext        32 bytes  then the 16-byte Poly1305 tag
///
/// XChaCha20-Poly1305-IETF; the associated data is `"flakenotes.account-key"` (22 ASCII bytes), the 10 header bytes,
/// then the account ID (8 bytes), so a wrapped key opens only as the key of that account, generation and purpose.
/// Text form: URL-safe base64 without padding (110 characters).
public struct WrappedAccountKey: Sendable, Hashable {
    /// What wrapped the key.
    public enum Wrapper: UInt8, Sendable, CustomStringConvertible {
        /// The password's ``WrapKey``.
        case password = 1
        /// The account's ``RecoveryKey``.
        case recoveryKey = 2
        /// Another generation of the ``AccountKey``.
        case accountKey = 3

        public var description: String {
            switch self {
            case .password: "the password"
            case .recoveryKey: "the recovery key"
            case .accountKey: "another account key generation"
            }
        }
    }

    /// The layout's version.
    public static let version: UInt8 = 1
    static let headerByteCount = 10
    /// The length of every wrapped key: header, nonce, key, tag.
    public static let byteCount = headerByteCount + AEAD.nonceByteCount + AccountKey.byteCount + AEAD.tagByteCount
    static let label = Array("flakenotes.account-key".utf8)

    /// The encoded blob (``byteCount`` bytes).
    public let bytes: [UInt8]

    /// What wrapped the key (read from the header; authenticated when the key is unwrapped).
    public var wrapper: Wrapper { Wrapper(rawValue: bytes[1])! }
    /// The wrapped key's generation.
    public var generation: UInt32 { bytes.bigEndianUInt32(at: 2) }
    /// The wrapping account key's generation, when ``wrapper`` is ``Wrapper/accountKey``.
    public var wrapperGeneration: UInt32? { wrapper == .accountKey ? bytes.bigEndianUInt32(at: 6) : nil }

    /// Reads a wrapped key, checking every field of the layout; decrypts nothing.
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)`` (wrong length, unknown wrapper, a generation of 0, a wrapper
    ///   generation where none belongs or equal to the generation) or ``NoteCryptoError/unsupportedVersion(_:_:)``.
    public init(decoding bytes: [UInt8]) throws(NoteCryptoError) {
        guard bytes.count >= Self.byteCount else {
            throw .malformed(.wrappedAccountKey, .tooShort(length: bytes.count, minimum: Self.byteCount))
        }
        guard bytes.count == Self.byteCount else {
            throw .malformed(.wrappedAccountKey, .tooLong(length: bytes.count, maximum: Self.byteCount))
        }
        guard bytes[0] == Self.version else { throw .unsupportedVersion(.wrappedAccountKey, bytes[0]) }
        guard let wrapper = Wrapper(rawValue: bytes[1]) else {
            throw .malformed(.wrappedAccountKey, .invalidField("wrapper \(bytes[1])"))
        }
        let generation = bytes.bigEndianUInt32(at: 2)
        let wrapperGeneration = bytes.bigEndianUInt32(at: 6)
        guard generation >= AccountKey.firstGeneration else {
            throw .malformed(.wrappedAccountKey, .invalidField("generation 0"))
        }
        switch wrapper {
        case .password, .recoveryKey:
            guard wrapperGeneration == 0 else {
                throw .malformed(.wrappedAccountKey, .invalidField("wrapper generation \(wrapperGeneration) for \(wrapper)"))
            }
        case .accountKey:
            guard wrapperGeneration >= AccountKey.firstGeneration, wrapperGeneration != generation else {
                throw .malformed(.wrappedAccountKey, .invalidField("wrapper generation \(wrapperGeneration) for generation \(generation)"))
            }
        }
        self.bytes = bytes
    }

    /// Reads the text form (URL-safe base64 without padding), then the bytes as ``init(decoding:)`` does.
    public init(text: some StringProtocol) throws(NoteCryptoError) {
        try self.init(decoding: Base64URL.decode(text, maximumCount: Self.byteCount, blob: .wrappedAccountKey))
    }

    /// The text form: URL-safe base64 without padding.
    public var text: String { Base64URL.encode(bytes) }

    /// Wraps `key` under `wrappingKey` (32 bytes) for `wrapper`; `wrapperGeneration` is 0 unless an account key wraps.
    static func seal(
        _ key: AccountKey, wrapper: Wrapper, wrapperGeneration: UInt32, wrappingKey: SecretBytes, nonce: [UInt8]? = nil
    ) -> WrappedAccountKey {
        var bytes: [UInt8] = [version, wrapper.rawValue]
        bytes.reserveCapacity(byteCount)
        bytes.appendBigEndian(key.generation)
        bytes.appendBigEndian(wrapperGeneration)
        let associatedData = associatedData(header: bytes[...], account: key.account)
        let nonce = nonce ?? randomBytes(AEAD.nonceByteCount)
        bytes.append(contentsOf: nonce)
        key.secret.withUnsafeBytes { plaintext in
            AEAD.seal(plaintext, associatedData: associatedData, nonce: nonce, key: wrappingKey, appendingTo: &bytes)
        }
        return WrappedAccountKey(checkedBytes: bytes)
    }

    private init(checkedBytes bytes: [UInt8]) {
        assert(bytes.count == Self.byteCount)
        self.bytes = bytes
    }

    /// The key inside, for `account`, when `wrappingKey` opens it.
    func open(account: FlakeID, wrappingKey: SecretBytes) throws(NoteCryptoError) -> AccountKey {
        let associatedData = Self.associatedData(header: bytes[..<Self.headerByteCount], account: account)
        let nonceEnd = Self.headerByteCount + AEAD.nonceByteCount
        guard let secret = AEAD.openSecret(
            bytes[nonceEnd...], associatedData: associatedData, nonce: bytes[Self.headerByteCount..<nonceEnd], key: wrappingKey)
        else { throw .doesNotAuthenticate(.wrappedAccountKey) }
        return AccountKey(account: account, generation: generation, secret: secret)
    }

    static func associatedData(header: ArraySlice<UInt8>, account: FlakeID) -> [UInt8] {
        var data = label
        data.append(contentsOf: header)
        data.appendBigEndian(account)
        return data
    }
}

extension AccountKey {
    /// This key wrapped by the password's key, for the server to keep (and hand back at sign-in).
    public func wrapped(by wrapKey: WrapKey) -> WrappedAccountKey {
        WrappedAccountKey.seal(self, wrapper: .password, wrapperGeneration: 0, wrappingKey: wrapKey.secret)
    }

    /// This key wrapped by the recovery key, for the server to keep until a password is lost.
    public func wrapped(by recoveryKey: RecoveryKey) -> WrappedAccountKey {
        WrappedAccountKey.seal(self, wrapper: .recoveryKey, wrapperGeneration: 0, wrappingKey: recoveryKey.wrappingSecret)
    }

    /// This key wrapped by another generation of the same account's key: an older one authenticates a rotation
    /// (see ``KeyHandover``), a newer one keeps this older generation reachable from the current key.
    ///
    /// - Throws: ``NoteCryptoError/keyOfAnotherAccount(expected:found:)``, or
    ///   ``NoteCryptoError/invalidGeneration(_:)`` when both keys are of one generation.
    public func wrapped(by accountKey: AccountKey) throws(NoteCryptoError) -> WrappedAccountKey {
        guard accountKey.account == account else { throw .keyOfAnotherAccount(expected: account, found: accountKey.account) }
        guard accountKey.generation != generation else { throw .invalidGeneration(generation) }
        return WrappedAccountKey.seal(self, wrapper: .accountKey, wrapperGeneration: accountKey.generation, wrappingKey: accountKey.secret)
    }
}

extension WrappedAccountKey {
    /// The account key inside, unwrapped with the password's key.
    ///
    /// - Throws: ``NoteCryptoError/wrongWrapper(expected:found:)`` unless the password wrapped it;
    ///   ``NoteCryptoError/doesNotAuthenticate(_:)`` for another password (an operator's reset), another account or an
    ///   altered blob.
    public func unwrap(account: FlakeID, with wrapKey: WrapKey) throws(NoteCryptoError) -> AccountKey {
        guard wrapper == .password else { throw .wrongWrapper(expected: .password, found: wrapper) }
        return try open(account: account, wrappingKey: wrapKey.secret)
    }

    /// The account key inside, unwrapped with the recovery key.
    ///
    /// - Throws: ``NoteCryptoError/wrongWrapper(expected:found:)`` unless the recovery key wrapped it;
    ///   ``NoteCryptoError/doesNotAuthenticate(_:)`` for another recovery key, another account or an altered blob.
    public func unwrap(account: FlakeID, with recoveryKey: RecoveryKey) throws(NoteCryptoError) -> AccountKey {
        guard wrapper == .recoveryKey else { throw .wrongWrapper(expected: .recoveryKey, found: wrapper) }
        return try open(account: account, wrappingKey: recoveryKey.wrappingSecret)
    }

    /// The account key inside, unwrapped with the generation of `keys` that wrapped it; the key belongs to
    /// `keys.account`.
    ///
    /// - Throws: ``NoteCryptoError/wrongWrapper(expected:found:)`` unless an account key wrapped it;
    ///   ``NoteCryptoError/unknownKeyGeneration(_:_:)`` when the ring lacks the wrapping generation;
    ///   ``NoteCryptoError/doesNotAuthenticate(_:)`` for another account or an altered blob.
    public func unwrap(with keys: AccountKeyRing) throws(NoteCryptoError) -> AccountKey {
        guard let wrapperGeneration else { throw .wrongWrapper(expected: .accountKey, found: wrapper) }
        guard let wrappingKey = keys.key(generation: wrapperGeneration) else {
            throw .unknownKeyGeneration(.wrappedAccountKey, wrapperGeneration)
        }
        return try open(account: keys.account, wrappingKey: wrappingKey.secret)
    }
}
