import CSodium
import MiniFlake

/// The key of one attached file of an encrypted account: 32 bytes derived from the account key and the file's
/// content, so that the same file attached twice in one account, under one key generation, gets the same key (and
/// so the same stored chunks: the second upload sends none).
///
///     root    = crypto_kdf_derive_from_key(32, subkey 1, context "FN-attch", account key of generation g)
///     fileKey = BLAKE2b-256(key: root, "flakenotes.attachment" ‖ account ID ‖ g ‖ chunk size ‖ SHA-256 of the file)
///
/// (account ID 8 bytes, g and the chunk size 4 bytes each, big-endian.) A keyed hash: without the account key,
/// the key (and so the stored chunks and their addresses) tells nothing about the file, and a guessed file cannot be
/// confirmed. The chunk size is in it so that one file split two ways never seals two different plaintexts under one
/// (key, nonce). The key travels in the note's sealed payload (``NotePayload/attachments``, the manifest's `key`),
/// never to the server in the clear, so a device opens the chunks with it whatever generations it holds, and a
/// rotation re-uploads nothing.
///
/// Text form (``text``, the manifest's `key`): 64 lowercase hexadecimal characters, through libsodium's
/// constant-time codec as every secret NoteCrypto writes as text.
public struct AttachmentKey: Sendable, Equatable, RedactedSecret {
    /// The key's length in bytes.
    public static let byteCount = 32
    /// The KDF context of the account key's attachment subkey (exactly 8 bytes).
    static let context = "FN-attch"
    static let label = Array("flakenotes.attachment".utf8)

    let secret: SecretBytes

    init(secret: SecretBytes) {
        precondition(secret.count == Self.byteCount)
        self.secret = secret
    }

    /// The key of the file whose SHA-256 is `fileSHA256`, split into chunks of `chunkSize` bytes, in the account
    /// (and generation) of `accountKey` (a ring's ``AccountKeyRing/current``). Deterministic.
    ///
    /// - Precondition: `fileSHA256` is 32 bytes; `chunkSize` is 1 through `UInt32.max`.
    public static func derive(fileSHA256: [UInt8], chunkSize: Int, accountKey: AccountKey) -> AttachmentKey {
        precondition(fileSHA256.count == 32, "a SHA-256 digest is 32 bytes")
        precondition(chunkSize > 0 && UInt64(chunkSize) <= UInt64(UInt32.max), "a chunk size is 1 through 2^32 - 1")
        let root = deriveSubkey(of: accountKey.secret, id: 1, context: context, count: byteCount)
        var message = label
        message.appendBigEndian(accountKey.account)
        message.appendBigEndian(accountKey.generation)
        message.appendBigEndian(UInt32(chunkSize))
        message += fileSHA256
        return AttachmentKey(secret: SecretBytes(count: byteCount) { (output: UnsafeMutableRawBufferPointer) in
            root.withKeyPointer { rootKey in
                let status = crypto_generichash(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, message, UInt64(message.count), rootKey, root.count)
                precondition(status == 0, "crypto_generichash failed")
            }
        })
    }

    /// A key read back from its text form (a manifest's `key`).
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)`` (blob ``NoteCryptoError/Blob/attachmentKey``) unless `text` is
    ///   64 lowercase hexadecimal characters.
    public init(text: some StringProtocol) throws(NoteCryptoError) {
        let utf8 = Array(text.utf8)
        guard utf8.count == Self.byteCount * 2 else {
            throw .malformed(.attachmentKey, .invalidField("\(utf8.count) characters, not \(Self.byteCount * 2) hexadecimal digits"))
        }
        guard utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw .malformed(.attachmentKey, .invalidField("not lowercase hexadecimal"))
        }
        Sodium.ensureInitialized()
        secret = SecretBytes(count: Self.byteCount) { (output: UnsafeMutableRawBufferPointer) in
            var written = 0
            let status = utf8.withUnsafeBufferPointer { hex in
                hex.withMemoryRebound(to: CChar.self) { hex in
                    sodium_hex2bin(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, hex.baseAddress, hex.count, nil, &written, nil)
                }
            }
            precondition(status == 0 && written == Self.byteCount, "sodium_hex2bin refused checked hexadecimal")
        }
    }

    /// The text form: 64 lowercase hexadecimal characters. It belongs inside a note envelope only.
    public var text: String { secret.withUnsafeBytes { Hex.encode($0) } }

    public var redactedDescription: String { "AttachmentKey(<redacted>)" }

    /// Same bytes (compared in constant time).
    public static func == (lhs: AttachmentKey, rhs: AttachmentKey) -> Bool { lhs.secret.constantTimeEquals(rhs.secret) }
}

/// The cipher of an encrypted account's attachment chunks: each chunk of a file sealed under the file's
/// ``AttachmentKey``, deterministically, so that the same file gives the same stored chunks (and addresses) within
/// an account and key generation.
///
/// Stored chunk (what the server stores; its content address is the SHA-256 of these bytes):
///
///     offset  0  version     1 byte    (1)
///             1  ciphertext  n bytes   (as long as the plaintext chunk) then the 16-byte Poly1305 tag
///
/// XChaCha20-Poly1305-IETF under the file key, with the nonce
/// `BLAKE2b-192(key: file key, "flakenotes.chunk-nonce" ‖ chunk index)` (not stored: the reader derives it) and
/// the associated data `"flakenotes.chunk" ‖ version ‖ chunk index` (index 8 bytes big-endian, from 0). A nonce is
/// reused only for the same key and index, which (the key being bound to the file's content and chunk size) means
/// the same plaintext: the ciphertext is then the same too, which is the point, and reveals nothing more. A chunk
/// moved to another index or another file, or altered in any byte, does not open.
///
/// 17 bytes of overhead per chunk (``overheadByteCount``); ``NoteSyncProtocol`` grows its chunk limit by as much.
public enum AttachmentCipher {
    /// The stored chunk's layout version.
    public static let version: UInt8 = 1
    /// What a stored chunk adds to its plaintext: the version byte and the tag (17 bytes).
    public static let overheadByteCount = 1 + AEAD.tagByteCount
    static let nonceLabel = Array("flakenotes.chunk-nonce".utf8)
    static let label = Array("flakenotes.chunk".utf8)

    /// The stored form of chunk `index` (0 for the first) of the file `key` belongs to.
    public static func seal(_ plaintext: UnsafeRawBufferPointer, index: Int, key: AttachmentKey) -> [UInt8] {
        precondition(index >= 0, "a chunk index is 0 or more")
        let associatedData = associatedData(index: index)
        let nonce = nonce(index: index, key: key)
        let count = overheadByteCount + plaintext.count
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer[0] = version
            AEAD.seal(
                plaintext, associatedData: associatedData, nonce: nonce, key: key.secret,
                into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[1...]))
            initialized = count
        }
    }

    /// ``seal(_:index:key:)`` of an array.
    public static func seal(_ plaintext: [UInt8], index: Int, key: AttachmentKey) -> [UInt8] {
        plaintext.withUnsafeBytes { seal($0, index: index, key: key) }
    }

    /// The plaintext of stored chunk `index` of the file `key` belongs to.
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)`` for fewer than 17 bytes; ``NoteCryptoError/unsupportedVersion(_:_:)``
    ///   for a version other than 1; ``NoteCryptoError/doesNotAuthenticate(_:)`` when it was altered, belongs at
    ///   another index or to another file, or `key` is not its file's (blob ``NoteCryptoError/Blob/attachmentChunk``).
    public static func open(_ stored: [UInt8], index: Int, key: AttachmentKey) throws(NoteCryptoError) -> [UInt8] {
        precondition(index >= 0, "a chunk index is 0 or more")
        guard stored.count >= overheadByteCount else {
            throw .malformed(.attachmentChunk, .tooShort(length: stored.count, minimum: overheadByteCount))
        }
        guard stored[0] == version else { throw .unsupportedVersion(.attachmentChunk, stored[0]) }
        guard let plaintext = AEAD.open(
            stored[1...], associatedData: associatedData(index: index), nonce: nonce(index: index, key: key)[...], key: key.secret)
        else { throw .doesNotAuthenticate(.attachmentChunk) }
        return plaintext
    }

    /// The size of a stored chunk whose plaintext is `plaintextByteCount` bytes.
    public static func storedByteCount(plaintextByteCount: Int) -> Int { plaintextByteCount + overheadByteCount }

    /// `"flakenotes.chunk" ‖ version ‖ index`.
    static func associatedData(index: Int) -> [UInt8] {
        var data = label
        data.append(version)
        data.appendBigEndian(UInt64(index))
        return data
    }

    /// `BLAKE2b-192(key: file key, "flakenotes.chunk-nonce" ‖ index)`.
    static func nonce(index: Int, key: AttachmentKey) -> [UInt8] {
        var message = nonceLabel
        message.appendBigEndian(UInt64(index))
        var nonce = [UInt8](repeating: 0, count: AEAD.nonceByteCount)
        key.secret.withKeyPointer { fileKey in
            let status = crypto_generichash(&nonce, nonce.count, message, UInt64(message.count), fileKey, key.secret.count)
            precondition(status == 0, "crypto_generichash failed")
        }
        return nonce
    }
}
