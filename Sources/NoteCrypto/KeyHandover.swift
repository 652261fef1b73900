import CSodium

/// A rotation's new account key, sealed to one device (or to the recovery key's public half).
///
/// Two layers: inside, the new key wrapped by the previous generation (``AccountKey/wrapped(by:)-(AccountKey)``:
/// only a holder of the account's keys can make one, so the server alone cannot slip a key of its own to a device);
/// outside, libsodium's sealed box (`crypto_box_seal`: an ephemeral X25519 key and XSalsa20-Poly1305) to the
/// recipient's public key, so a device signed out before the rotation, which holds the previous generation too,
/// cannot read it. 130 bytes (the 82-byte wrapped key and the box's 48); text form URL-safe base64 without padding.
///
/// Not covered: a signed-out device that still holds the previous generation, together with the server, can forge a
/// hand-over (the recipient cannot tell which device sealed it). SECURITY.md says so.
public struct KeyHandover: Sendable, Hashable {
    /// The length of every hand-over: a wrapped key in a sealed box.
    public static let byteCount = WrappedAccountKey.byteCount + crypto_box_sealbytes()
    /// The encoded blob.
    public let bytes: [UInt8]

    /// Reads a hand-over; only its length can be checked before it is opened.
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)``.
    public init(decoding bytes: [UInt8]) throws(NoteCryptoError) {
        guard bytes.count >= Self.byteCount else {
            throw .malformed(.keyHandover, .tooShort(length: bytes.count, minimum: Self.byteCount))
        }
        guard bytes.count == Self.byteCount else {
            throw .malformed(.keyHandover, .tooLong(length: bytes.count, maximum: Self.byteCount))
        }
        self.bytes = bytes
    }

    /// Reads the text form, then the bytes as ``init(decoding:)`` does.
    public init(text: some StringProtocol) throws(NoteCryptoError) {
        try self.init(decoding: Base64URL.decode(text, maximumCount: Self.byteCount, blob: .keyHandover))
    }

    /// The text form: URL-safe base64 without padding.
    public var text: String { Base64URL.encode(bytes) }

    /// Seals `newKey` to `recipient`, authenticated by `previous`, the generation before it that the recipient holds.
    ///
    /// - Throws: ``NoteCryptoError/keyOfAnotherAccount(expected:found:)``; ``NoteCryptoError/notAHandover`` unless
    ///   `previous` is an older generation; ``NoteCryptoError/invalidPublicKey`` for a low-order public key.
    public static func seal(
        _ newKey: AccountKey, authenticatedBy previous: AccountKey, to recipient: DevicePublicKey
    ) throws(NoteCryptoError) -> KeyHandover {
        guard previous.generation < newKey.generation else { throw .notAHandover }
        let wrapped = try newKey.wrapped(by: previous)
        var sealed = [UInt8](repeating: 0, count: byteCount)
        let status = wrapped.bytes.withUnsafeBufferPointer { message in
            crypto_box_seal(&sealed, message.baseAddress!, UInt64(message.count), recipient.bytes)
        }
        guard status == 0 else { throw .invalidPublicKey }
        return KeyHandover(checkedBytes: sealed)
    }

    private init(checkedBytes bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The new account key, opened with the recipient's key pair and authenticated by the older generation it
    /// names, which `keys` must hold. Insert the result into the ring.
    ///
    /// - Throws: ``NoteCryptoError/doesNotAuthenticate(_:)`` when it was sealed to another key pair or altered (or,
    ///   inside, the wrapped key does not authenticate for `keys.account`); ``NoteCryptoError/unknownKeyGeneration(_:_:)``
    ///   when the ring lacks the authenticating generation (apply earlier hand-overs first);
    ///   ``NoteCryptoError/notAHandover`` when the key inside is not newer than the key that wrapped it.
    public func open(with keyPair: DeviceKeyPair, keys: AccountKeyRing) throws(NoteCryptoError) -> AccountKey {
        try open(keyPair: keyPair, keys: keys)
    }

    /// The new account key of a hand-over sealed to the recovery key's ``RecoveryKey/publicKey``: what a user
    /// recovering an account reads after unwrapping an older generation with the recovery key. Throws as
    /// ``open(with:keys:)-(DeviceKeyPair,_)`` does.
    public func open(with recoveryKey: RecoveryKey, keys: AccountKeyRing) throws(NoteCryptoError) -> AccountKey {
        try open(keyPair: recoveryKey.keyPair, keys: keys)
    }

    private func open(keyPair: DeviceKeyPair, keys: AccountKeyRing) throws(NoteCryptoError) -> AccountKey {
        Sodium.ensureInitialized()
        var message = [UInt8](repeating: 0, count: WrappedAccountKey.byteCount)
        let status = keyPair.secretKey.withKeyPointer { secretKey in
            crypto_box_seal_open(&message, bytes, UInt64(bytes.count), keyPair.publicKey.bytes, secretKey)
        }
        guard status == 0 else { throw .doesNotAuthenticate(.keyHandover) }
        // What the box held is a wrapped key, which the sender made: still read strictly.
        let wrapped: WrappedAccountKey
        do { wrapped = try WrappedAccountKey(decoding: message) } catch { throw .doesNotAuthenticate(.keyHandover) }
        guard let wrapperGeneration = wrapped.wrapperGeneration, wrapperGeneration < wrapped.generation else { throw .notAHandover }
        return try wrapped.unwrap(with: keys)
    }
}
