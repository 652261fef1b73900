import CSodium
import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing

@testable import NoteCrypto

/// Issue 33: an encrypted account's attachment chunks (``AttachmentKey``, ``AttachmentCipher``).
@Suite struct AttachmentCipherTests {
    /// SHA-256 through libsodium (NoteCrypto's tests do not link swift-crypto).
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = crypto_hash_sha256(&digest, bytes, UInt64(bytes.count))
        return digest
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static let file = Array("Hello, attachment.".utf8)
    static let mib = 1 << 20

    @Test("Known answers: the file key and a sealed chunk match hashlib and pycryptodome (known_answers.py)")
    func knownAnswers() throws {
        let key = AttachmentKey.derive(fileSHA256: Self.sha256(Self.file), chunkSize: Self.mib, accountKey: Fixture.key(generation: 7))
        #expect(key.text == "9a277bd619075f0a31d26cd4280243f73dd2db7335b105c6028ad14abc5fd380")
        let stored = AttachmentCipher.seal(Array("chunk".utf8), index: 3, key: key)
        #expect(Self.hex(stored) == "01a9219800bb8092419b9a3d05eb403946ea7cc72123")
        #expect(Self.hex(Self.sha256(stored)) == "19dbf263d8c509eba202827b4d3e652a50f33412fa47d4185092284dededac76")
        #expect(try AttachmentCipher.open(stored, index: 3, key: key) == Array("chunk".utf8))
    }

    @Test("A chunk round-trips at every size up to a whole chunk, 17 bytes larger sealed", arguments: [0, 1, 1000, 1 << 20])
    func roundTrip(size: Int) throws {
        var rng = SplitMix64(seed: UInt64(size))
        let plaintext = randomBytes(size, using: &rng)
        let key = AttachmentKey.derive(fileSHA256: Self.sha256(plaintext), chunkSize: Self.mib, accountKey: Fixture.key())
        let stored = AttachmentCipher.seal(plaintext, index: 5, key: key)
        #expect(stored.count == size + AttachmentCipher.overheadByteCount)
        #expect(stored.count == AttachmentCipher.storedByteCount(plaintextByteCount: size))
        #expect(try AttachmentCipher.open(stored, index: 5, key: key) == plaintext)
    }

    @Test("Convergent within an account and generation: the same file gives the same key and the same stored chunks")
    func deterministic() {
        let digest = Self.sha256(Self.file)
        let first = AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib, accountKey: Fixture.key())
        let second = AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib, accountKey: Fixture.key())
        #expect(first == second && first.text == second.text)
        for index in [0, 1, 1000] {
            #expect(AttachmentCipher.seal(Self.file, index: index, key: first) == AttachmentCipher.seal(Self.file, index: index, key: second))
        }
        // The same plaintext at two indices seals differently (another nonce, another associated data).
        #expect(AttachmentCipher.seal(Self.file, index: 0, key: first) != AttachmentCipher.seal(Self.file, index: 1, key: first))
    }

    @Test("Another account, generation, account key, file or chunk size gives another key, and other chunk addresses")
    func separated() {
        let digest = Self.sha256(Self.file)
        let base = AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib, accountKey: Fixture.key())
        let others: [(String, AttachmentKey)] = [
            // The same key bytes under another account ID, or relabelled with another generation.
            ("another account", AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib, accountKey: Fixture.key(account: Fixture.otherAccount))),
            ("another generation", AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib, accountKey: Fixture.key(generation: 2))),
            ("other key bytes", AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib, accountKey: Fixture.key(bytes: sequence(from: 1, count: 32)))),
            ("another file", AttachmentKey.derive(fileSHA256: Self.sha256(Self.file + [0]), chunkSize: Self.mib, accountKey: Fixture.key())),
            ("another chunk size", AttachmentKey.derive(fileSHA256: digest, chunkSize: Self.mib / 2, accountKey: Fixture.key())),
        ]
        let address = Self.sha256(AttachmentCipher.seal(Self.file, index: 0, key: base))
        for (what, other) in others {
            #expect(other != base, "\(what)")
            #expect(Self.sha256(AttachmentCipher.seal(Self.file, index: 0, key: other)) != address, "\(what)")
            // And the other key cannot open this one's chunk.
            #expect(throws: NoteCryptoError.doesNotAuthenticate(.attachmentChunk), "\(what)") {
                try AttachmentCipher.open(AttachmentCipher.seal(Self.file, index: 0, key: base), index: 0, key: other)
            }
        }
    }

    @Test("Every flipped byte, another index, a cut or an unknown version fails to open")
    func tampering() {
        let key = AttachmentKey.derive(fileSHA256: Self.sha256(Self.file), chunkSize: Self.mib, accountKey: Fixture.key())
        let stored = AttachmentCipher.seal(Self.file, index: 2, key: key)
        for position in 1..<stored.count {
            var flipped = stored
            flipped[position] ^= 0x01
            #expect(throws: NoteCryptoError.doesNotAuthenticate(.attachmentChunk), "byte \(position)") {
                try AttachmentCipher.open(flipped, index: 2, key: key)
            }
        }
        var version = stored
        version[0] = 2
        #expect(throws: NoteCryptoError.unsupportedVersion(.attachmentChunk, 2)) { try AttachmentCipher.open(version, index: 2, key: key) }
        // A chunk moved to another place of the file (the server swapping two addresses' bytes).
        for index in [0, 1, 3, 1 << 40] {
            #expect(throws: NoteCryptoError.doesNotAuthenticate(.attachmentChunk)) { try AttachmentCipher.open(stored, index: index, key: key) }
        }
        #expect(throws: NoteCryptoError.doesNotAuthenticate(.attachmentChunk)) {
            try AttachmentCipher.open(Array(stored.dropLast()), index: 2, key: key)
        }
        #expect(throws: NoteCryptoError.malformed(.attachmentChunk, .tooShort(length: 16, minimum: 17))) {
            try AttachmentCipher.open(Array(stored.prefix(16)), index: 2, key: key)
        }
        #expect(throws: NoteCryptoError.malformed(.attachmentChunk, .tooShort(length: 0, minimum: 17))) {
            try AttachmentCipher.open([], index: 2, key: key)
        }
    }

    @Test("The key's text form: 64 lowercase hex digits, read back to the same key; anything else refused; never printed")
    func textForm() throws {
        let key = AttachmentKey.derive(fileSHA256: Self.sha256(Self.file), chunkSize: Self.mib, accountKey: Fixture.key())
        let text = key.text
        #expect(text.utf8.count == 64 && ContentHash(text) != nil)
        #expect(try AttachmentKey(text: text) == key)
        for bad in [text.uppercased(), String(text.dropLast()), text + "0", "", String(text.dropLast()) + "g", " " + text.dropFirst()] {
            #expect(throws: NoteCryptoError.self, "\(bad)") { try AttachmentKey(text: bad) }
        }
        #expect("\(key)" == "AttachmentKey(<redacted>)" && String(reflecting: key) == "AttachmentKey(<redacted>)")
        #expect(!"\(key)".contains(text))
    }

    @Test("The protocol's chunk limit is a whole chunk sealed")
    func chunkLimit() {
        #expect(ChunkRules.sealingOverhead == AttachmentCipher.overheadByteCount)
        #expect(ChunkRules.maxChunkBytes == AttachmentCipher.storedByteCount(plaintextByteCount: ChunkRules.chunkSize))
    }
}
