import CSodium

/// A device's X25519 public key (libsodium's `crypto_box`): what others seal a rotation's new account key to.
///
/// Public: the server stores and serves it with the device's session. Text form: URL-safe base64 without padding
/// (43 characters).
public struct DevicePublicKey: Sendable, Hashable, CustomStringConvertible {
    public static let byteCount = Int(crypto_box_PUBLICKEYBYTES)
    /// The key's 32 bytes.
    public let bytes: [UInt8]

    /// - Throws: ``NoteCryptoError/invalidKeyLength(expected:found:)`` unless `bytes` are 32.
    public init(bytes: [UInt8]) throws(NoteCryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidKeyLength(expected: Self.byteCount, found: bytes.count) }
        self.bytes = bytes
    }

    /// Reads the text form.
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)``, or ``NoteCryptoError/invalidKeyLength(expected:found:)``.
    public init(text: some StringProtocol) throws(NoteCryptoError) {
        try self.init(bytes: Base64URL.decode(text, maximumCount: Self.byteCount, blob: .devicePublicKey))
    }

    /// The text form: URL-safe base64 without padding.
    public var text: String { Base64URL.encode(bytes) }
    public var description: String { "DevicePublicKey(\(text))" }
}

/// A device's X25519 key pair: made once per installation, the secret half kept in the device's local store.
///
/// A rotation seals the new account-key generation to each remaining device's ``publicKey`` (``KeyHandover``); only
/// the holder of the secret half opens it. The recovery key derives one too (``RecoveryKey/publicKey``).
public struct DeviceKeyPair: Sendable, RedactedSecret {
    public static let secretKeyByteCount = Int(crypto_box_SECRETKEYBYTES)
    static let seedByteCount = Int(crypto_box_SEEDBYTES)

    public let publicKey: DevicePublicKey
    let secretKey: SecretBytes

    private init(publicKey: DevicePublicKey, secretKey: SecretBytes) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// A new random key pair (`crypto_box_keypair`).
    public static func generate() -> DeviceKeyPair {
        Sodium.ensureInitialized()
        var publicBytes = [UInt8](repeating: 0, count: DevicePublicKey.byteCount)
        let secret = SecretBytes(count: secretKeyByteCount) { (secret: UnsafeMutableRawBufferPointer) in
            let status = crypto_box_keypair(&publicBytes, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
            precondition(status == 0, "crypto_box_keypair failed")
        }
        return DeviceKeyPair(publicKey: try! DevicePublicKey(bytes: publicBytes), secretKey: secret)
    }

    /// The key pair a 32-byte seed determines (`crypto_box_seed_keypair`), for keys derived from another secret.
    init(seed: SecretBytes) {
        precondition(seed.count == Self.seedByteCount)
        var publicBytes = [UInt8](repeating: 0, count: DevicePublicKey.byteCount)
        let secret = SecretBytes(count: Self.secretKeyByteCount) { (secret: UnsafeMutableRawBufferPointer) in
            seed.withKeyPointer { seed in
                let status = crypto_box_seed_keypair(&publicBytes, secret.baseAddress!.assumingMemoryBound(to: UInt8.self), seed)
                precondition(status == 0, "crypto_box_seed_keypair failed")
            }
        }
        self.init(publicKey: try! DevicePublicKey(bytes: publicBytes), secretKey: secret)
    }

    /// The key pair read back from the device's local store: the public key is recomputed from the secret one
    /// (`crypto_scalarmult_base`).
    ///
    /// - Throws: ``NoteCryptoError/invalidKeyLength(expected:found:)`` unless `bytes` are 32.
    public init(restoringSecretKey bytes: [UInt8]) throws(NoteCryptoError) {
        guard bytes.count == Self.secretKeyByteCount else {
            throw .invalidKeyLength(expected: Self.secretKeyByteCount, found: bytes.count)
        }
        Sodium.ensureInitialized()
        let secret = bytes.withUnsafeBytes { SecretBytes(copying: $0) }
        var publicBytes = [UInt8](repeating: 0, count: DevicePublicKey.byteCount)
        let status = secret.withKeyPointer { crypto_scalarmult_base(&publicBytes, $0) }
        precondition(status == 0, "crypto_scalarmult_base failed")
        self.init(publicKey: try! DevicePublicKey(bytes: publicBytes), secretKey: secret)
    }

    /// Lends the secret key's 32 bytes, for the device's local store only. The pointer must not outlive `body`.
    public func withSecretKeyBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try secretKey.withUnsafeBytes(body)
    }

    public var redactedDescription: String { "DeviceKeyPair(public \(publicKey.text), <redacted>)" }
}
