import MiniFlake

/// A note's encrypted payload: what the server stores and serves in place of the note's text (and, once wired, its
/// tags and flags), readable only by the account's devices and only as the edit of the note it was written for.
///
/// Binary layout (integers big-endian):
///
///     offset  0  version         1 byte    (1)
///             1  key generation  4 bytes   (the account key's that sealed it, ≥ 1)
///             5  nonce          24 bytes   (random)
///            29  ciphertext      n bytes   (as long as the plaintext) then the 16-byte Poly1305 tag
///
/// 45 bytes of overhead (``overheadByteCount``); the text form (``text``, URL-safe base64 without padding) takes
/// ⌈4(n + 45)/3⌉ characters. XChaCha20-Poly1305-IETF under the account key of that generation. The associated data
/// (authenticated, not encrypted, not stored: the reader supplies it from what it expects) is
///
///     "flakenotes.note" (15 ASCII bytes) ‖ the 5 header bytes ‖ account ID ‖ client ID ‖ origin ‖ edit ID
///
/// (the IDs as 8-byte big-endian integers): everything the writing device knows about the edit when it seals it
/// (``Context``). The server assigns versions after encryption, so the edit ID stands for the version. An envelope
/// swapped to another note, moved to another account, replayed as another edit, or relabelled with another key
/// generation fails to open.
public struct NoteEnvelope: Sendable, Hashable {
    /// What a note's ciphertext is bound to: the edit that wrote it. The writer seals with it; a reader opens with
    /// the context it expects (the note it asked for and the edit the server says wrote it).
    public struct Context: Sendable, Hashable {
        /// The account the note belongs to.
        public var account: FlakeID
        /// The note's client ID (minted by the device that created it).
        public var clientID: FlakeID
        /// The note's origin (the installation that created it).
        public var origin: FlakeID
        /// The edit that wrote this content (the push's edit ID).
        public var editID: FlakeID

        public init(account: FlakeID, clientID: FlakeID, origin: FlakeID, editID: FlakeID) {
            self.account = account
            self.clientID = clientID
            self.origin = origin
            self.editID = editID
        }
    }

    /// An opened envelope: the plaintext and the generation of the key that sealed it (older than the ring's current
    /// one: the note is due to be re-encrypted).
    public struct Opened: Sendable, Equatable {
        public let plaintext: [UInt8]
        public let keyGeneration: UInt32
    }

    /// The layout's version.
    public static let version: UInt8 = 1
    static let headerByteCount = 5
    static let nonceOffset = headerByteCount
    static let sealedOffset = headerByteCount + AEAD.nonceByteCount
    /// What an envelope adds to its plaintext: header (5), nonce (24) and tag (16) bytes.
    public static let overheadByteCount = sealedOffset + AEAD.tagByteCount
    /// The largest envelope ``init(decoding:maximumByteCount:)`` reads unless told otherwise: 4 MiB, far above the
    /// protocol's note limit, far below what would hurt to allocate.
    public static let defaultMaximumByteCount = 4 << 20
    static let label = Array("flakenotes.note".utf8)

    /// The encoded envelope.
    public let bytes: [UInt8]

    /// The generation of the account key that sealed it (from the header; authenticated when opened).
    public var keyGeneration: UInt32 { bytes.bigEndianUInt32(at: 1) }
    /// How many bytes the plaintext has.
    public var plaintextByteCount: Int { bytes.count - Self.overheadByteCount }

    /// Reads an envelope, checking its layout; decrypts nothing (a server can check what it stores with it).
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)`` for fewer than 45 bytes, more than `maximumByteCount`, or
    ///   generation 0; ``NoteCryptoError/unsupportedVersion(_:_:)`` for a version byte other than 1.
    public init(decoding bytes: [UInt8], maximumByteCount: Int = defaultMaximumByteCount) throws(NoteCryptoError) {
        guard bytes.count >= Self.overheadByteCount else {
            throw .malformed(.noteEnvelope, .tooShort(length: bytes.count, minimum: Self.overheadByteCount))
        }
        guard bytes.count <= maximumByteCount else {
            throw .malformed(.noteEnvelope, .tooLong(length: bytes.count, maximum: maximumByteCount))
        }
        guard bytes[0] == Self.version else { throw .unsupportedVersion(.noteEnvelope, bytes[0]) }
        guard bytes.bigEndianUInt32(at: 1) >= AccountKey.firstGeneration else {
            throw .malformed(.noteEnvelope, .invalidField("key generation 0"))
        }
        self.bytes = bytes
    }

    /// Reads the text form (URL-safe base64 without padding), then the bytes as ``init(decoding:maximumByteCount:)``
    /// does. A text longer than `maximumByteCount` bytes' worth is refused before it is decoded.
    public init(text: some StringProtocol, maximumByteCount: Int = defaultMaximumByteCount) throws(NoteCryptoError) {
        try self.init(decoding: Base64URL.decode(text, maximumCount: maximumByteCount, blob: .noteEnvelope), maximumByteCount: maximumByteCount)
    }

    private init(checkedBytes bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The text form for JSON: URL-safe base64 without padding.
    public var text: String { Base64URL.encode(bytes) }

    /// Encrypts `plaintext` for the edit `context` names, under `key` (the ring's current key) and a random nonce.
    ///
    /// - Throws: ``NoteCryptoError/keyOfAnotherAccount(expected:found:)`` when `key` is not `context.account`'s.
    public static func seal(plaintext: [UInt8], context: Context, key: AccountKey) throws(NoteCryptoError) -> NoteEnvelope {
        try seal(plaintext: plaintext, context: context, key: key, nonce: randomBytes(AEAD.nonceByteCount))
    }

    /// ``seal(plaintext:context:key:)`` with a given nonce: for known-answer tests only (a nonce must never repeat
    /// under one key).
    static func seal(plaintext: [UInt8], context: Context, key: AccountKey, nonce: [UInt8]) throws(NoteCryptoError) -> NoteEnvelope {
        guard key.account == context.account else { throw .keyOfAnotherAccount(expected: context.account, found: key.account) }
        var bytes: [UInt8] = [version]
        bytes.reserveCapacity(overheadByteCount + plaintext.count)
        bytes.appendBigEndian(key.generation)
        let associatedData = associatedData(header: bytes[...], context: context)
        bytes.append(contentsOf: nonce)
        plaintext.withUnsafeBytes { plaintext in
            AEAD.seal(plaintext, associatedData: associatedData, nonce: nonce, key: key.secret, appendingTo: &bytes)
        }
        return NoteEnvelope(checkedBytes: bytes)
    }

    /// Decrypts `envelope`, which must have been sealed for exactly the edit `context` names, with the key of its
    /// generation from `keys`.
    ///
    /// - Throws: ``NoteCryptoError/keyOfAnotherAccount(expected:found:)`` when `keys` are not `context.account`'s;
    ///   ``NoteCryptoError/unknownKeyGeneration(_:_:)`` when the ring lacks the envelope's generation;
    ///   ``NoteCryptoError/doesNotAuthenticate(_:)`` when it was altered or sealed for another note, account, edit or key.
    public static func open(_ envelope: NoteEnvelope, expecting context: Context, keys: AccountKeyRing) throws(NoteCryptoError) -> Opened {
        guard keys.account == context.account else { throw .keyOfAnotherAccount(expected: context.account, found: keys.account) }
        let generation = envelope.keyGeneration
        guard let key = keys.key(generation: generation) else { throw .unknownKeyGeneration(.noteEnvelope, generation) }
        let bytes = envelope.bytes
        let associatedData = associatedData(header: bytes[..<headerByteCount], context: context)
        guard let plaintext = AEAD.open(
            bytes[sealedOffset...], associatedData: associatedData, nonce: bytes[nonceOffset..<sealedOffset], key: key.secret)
        else { throw .doesNotAuthenticate(.noteEnvelope) }
        return Opened(plaintext: plaintext, keyGeneration: generation)
    }

    /// `"flakenotes.note" ‖ header ‖ account ‖ client ID ‖ origin ‖ edit ID`.
    static func associatedData(header: ArraySlice<UInt8>, context: Context) -> [UInt8] {
        var data = label
        data.reserveCapacity(label.count + headerByteCount + 32)
        data.append(contentsOf: header)
        data.appendBigEndian(context.account)
        data.appendBigEndian(context.clientID)
        data.appendBigEndian(context.origin)
        data.appendBigEndian(context.editID)
        return data
    }
}
