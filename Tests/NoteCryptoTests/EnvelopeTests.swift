import Foundation
import MiniFlake
import Testing

@testable import NoteCrypto

@Suite struct EnvelopeTests {
    let ring = AccountKeyRing(Fixture.key())

    @Test("Sealed plaintexts open to themselves, from the bytes and from the text form", arguments: [0, 1, 17, 1000, 300_000])
    func roundTrip(length: Int) throws {
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let envelope = try NoteEnvelope.seal(plaintext: plaintext, context: Fixture.context, key: ring.current)
        #expect(envelope.bytes.count == plaintext.count + NoteEnvelope.overheadByteCount)
        #expect(envelope.keyGeneration == 1)
        #expect(envelope.plaintextByteCount == length)
        let opened = try NoteEnvelope.open(envelope, expecting: Fixture.context, keys: ring)
        #expect(opened == NoteEnvelope.Opened(plaintext: plaintext, keyGeneration: 1))
        // The text form: URL-safe base64 without padding, of the predicted length.
        let text = envelope.text
        #expect(text.utf8.count == (4 * envelope.bytes.count + 2) / 3)
        #expect(text.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || ($0 < 128 && Character(Unicode.Scalar($0)).isLetter) || ($0 < 128 && Character(Unicode.Scalar($0)).isNumber) })
        let reread = try NoteEnvelope(text: text)
        #expect(reread == envelope)
        #expect(try NoteEnvelope.open(reread, expecting: Fixture.context, keys: ring).plaintext == plaintext)
    }

    @Test("Two seals of one plaintext differ (a fresh random nonce each time)")
    func noncesAreFresh() throws {
        let first = try NoteEnvelope.seal(plaintext: Array("same".utf8), context: Fixture.context, key: ring.current)
        let second = try NoteEnvelope.seal(plaintext: Array("same".utf8), context: Fixture.context, key: ring.current)
        #expect(first.bytes[5..<29] != second.bytes[5..<29])
        #expect(first != second)
    }

    @Test("Known answer: the layout and the cipher match an independent implementation (known_answers.py, pycryptodome)")
    func knownAnswer() throws {
        let key = Fixture.key(generation: 7)
        let envelope = try NoteEnvelope.seal(
            plaintext: Array("Hello, FlakeNotes.".utf8), context: Fixture.context, key: key, nonce: sequence(from: 0x40, count: 24))
        let expected = "AQAAAAdAQUJDREVGR0hJSktMTU5PUFFSU1RVVle5aR-YNNzUHJdzHLa4wekwQWnzUdR0LyX-zkIN8I9yXzTM"
        #expect(envelope.text == expected)
        let opened = try NoteEnvelope.open(NoteEnvelope(text: expected), expecting: Fixture.context, keys: AccountKeyRing(key))
        #expect(String(decoding: opened.plaintext, as: UTF8.self) == "Hello, FlakeNotes.")
        #expect(opened.keyGeneration == 7)
    }

    /// The fields of a context besides the account (which ``accountBinding()`` covers).
    enum Binding: CaseIterable, Sendable {
        case clientID, origin, editID
        var field: WritableKeyPath<NoteEnvelope.Context, FlakeID> {
            switch self {
            case .clientID: \.clientID
            case .origin: \.origin
            case .editID: \.editID
            }
        }
    }

    @Test("Every binding: a ciphertext opened as another note, origin or edit does not authenticate", arguments: Binding.allCases)
    func bindings(binding: Binding) throws {
        let field = binding.field
        let envelope = try NoteEnvelope.seal(plaintext: Array("secret".utf8), context: Fixture.context, key: ring.current)
        let moved = Fixture.context.with(field, id(9999))
        #expect(error { try NoteEnvelope.open(envelope, expecting: moved, keys: ring) } == .doesNotAuthenticate(.noteEnvelope))
        // One bit of difference is enough.
        let nextID = Fixture.context.with(field, id(Fixture.context[keyPath: field].rawValue ^ 1))
        #expect(error { try NoteEnvelope.open(envelope, expecting: nextID, keys: ring) } == .doesNotAuthenticate(.noteEnvelope))
    }

    @Test("Moved to another account: another account's keys do not open it, and neither does the same key under another account")
    func accountBinding() throws {
        let envelope = try NoteEnvelope.seal(plaintext: Array("secret".utf8), context: Fixture.context, key: ring.current)
        let other = Fixture.context.with(\.account, Fixture.otherAccount)
        // The other account's own key of the same generation.
        let otherRing = AccountKeyRing(AccountKey.generate(account: Fixture.otherAccount))
        #expect(error { try NoteEnvelope.open(envelope, expecting: other, keys: otherRing) } == .doesNotAuthenticate(.noteEnvelope))
        // Even the very same key bytes under the other account: the account is in the associated data.
        let sameBytes = AccountKeyRing(Fixture.key(account: Fixture.otherAccount))
        #expect(error { try NoteEnvelope.open(envelope, expecting: other, keys: sameBytes) } == .doesNotAuthenticate(.noteEnvelope))
        // Keys of one account for another account's context: refused before decrypting.
        #expect(
            error { try NoteEnvelope.open(envelope, expecting: other, keys: ring) }
                == .keyOfAnotherAccount(expected: Fixture.otherAccount, found: Fixture.account))
        #expect(
            error { try NoteEnvelope.seal(plaintext: [], context: other, key: ring.current) }
                == .keyOfAnotherAccount(expected: Fixture.otherAccount, found: Fixture.account))
    }

    @Test("The key generation is bound: relabelled to another generation it does not open, even under the same key bytes")
    func generationBinding() throws {
        // Generations 1 and 2 with identical bytes: only the header's generation (in the associated data) differs.
        var keys = ring
        try keys.insert(Fixture.key(generation: 2))
        let envelope = try NoteEnvelope.seal(plaintext: Array("secret".utf8), context: Fixture.context, key: ring.current)
        var relabelled = envelope.bytes
        relabelled[4] = 2
        let forged = try NoteEnvelope(decoding: relabelled)
        #expect(forged.keyGeneration == 2)
        #expect(error { try NoteEnvelope.open(forged, expecting: Fixture.context, keys: keys) } == .doesNotAuthenticate(.noteEnvelope))
        // A generation the ring does not hold is told apart.
        relabelled[4] = 9
        #expect(
            error { try NoteEnvelope.open(try NoteEnvelope(decoding: relabelled), expecting: Fixture.context, keys: keys) }
                == .unknownKeyGeneration(.noteEnvelope, 9))
    }

    @Test("A ring opens every generation it holds; a new seal uses the newest")
    func generations() throws {
        let first = ring.current
        let second = try first.rotated()
        #expect(second.generation == 2 && second.account == first.account && second != first)
        let old = try NoteEnvelope.seal(plaintext: [1], context: Fixture.context, key: first)
        var keys = AccountKeyRing(second)
        #expect(error { try NoteEnvelope.open(old, expecting: Fixture.context, keys: keys) } == .unknownKeyGeneration(.noteEnvelope, 1))
        try keys.insert(first)
        #expect(keys.current == second && keys.generations == [1, 2])
        #expect(try NoteEnvelope.open(old, expecting: Fixture.context, keys: keys) == .init(plaintext: [1], keyGeneration: 1))
        let new = try NoteEnvelope.seal(plaintext: [2], context: Fixture.context, key: keys.current)
        #expect(new.keyGeneration == 2)
    }

    @Test("Tampering with any byte fails: the version as unsupported, the generation as unknown, anything else as not authentic")
    func everyByteIsAuthenticated() throws {
        let envelope = try NoteEnvelope.seal(plaintext: Array("tamper with me".utf8), context: Fixture.context, key: ring.current)
        for index in envelope.bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var bytes = envelope.bytes
                bytes[index] ^= flip
                let failure = error {
                    try NoteEnvelope.open(try NoteEnvelope(decoding: bytes), expecting: Fixture.context, keys: ring)
                }
                switch index {
                case 0: #expect(failure == .unsupportedVersion(.noteEnvelope, 1 ^ flip), "byte \(index)")
                case 1...4 where bytes.bigEndianUInt32(at: 1) == 0:
                    #expect(failure == .malformed(.noteEnvelope, .invalidField("key generation 0")), "byte \(index)")
                case 1...4:
                    #expect(failure == .unknownKeyGeneration(.noteEnvelope, bytes.bigEndianUInt32(at: 1)), "byte \(index)")
                default: #expect(failure == .doesNotAuthenticate(.noteEnvelope), "byte \(index) ^ \(flip)")
                }
            }
        }
        // Cut short or lengthened by one byte: not authentic either.
        let shorter = try NoteEnvelope(decoding: Array(envelope.bytes.dropLast()))
        #expect(error { try NoteEnvelope.open(shorter, expecting: Fixture.context, keys: ring) } == .doesNotAuthenticate(.noteEnvelope))
        let longer = try NoteEnvelope(decoding: envelope.bytes + [0])
        #expect(error { try NoteEnvelope.open(longer, expecting: Fixture.context, keys: ring) } == .doesNotAuthenticate(.noteEnvelope))
    }

    @Test("The decoder: lengths, version, generation 0, the maximum")
    func decoder() throws {
        let minimum = NoteEnvelope.overheadByteCount
        #expect(error { try NoteEnvelope(decoding: []) } == .malformed(.noteEnvelope, .tooShort(length: 0, minimum: minimum)))
        var valid = [UInt8](repeating: 0, count: minimum)
        valid[0] = 1
        valid[4] = 1
        #expect(error { try NoteEnvelope(decoding: Array(valid.dropLast())) } == .malformed(.noteEnvelope, .tooShort(length: minimum - 1, minimum: minimum)))
        #expect(try NoteEnvelope(decoding: valid).plaintextByteCount == 0)
        var zeroGeneration = valid
        zeroGeneration[4] = 0
        #expect(error { try NoteEnvelope(decoding: zeroGeneration) } == .malformed(.noteEnvelope, .invalidField("key generation 0")))
        var version2 = valid
        version2[0] = 2
        #expect(error { try NoteEnvelope(decoding: version2) } == .unsupportedVersion(.noteEnvelope, 2))
        let big = valid + [UInt8](repeating: 7, count: 100)
        #expect(error { try NoteEnvelope(decoding: big, maximumByteCount: 100) } == .malformed(.noteEnvelope, .tooLong(length: 145, maximum: 100)))
        #expect(try NoteEnvelope(decoding: big, maximumByteCount: 145).bytes == big)
        // The text form's maximum is checked before decoding.
        let longText = String(repeating: "A", count: 1000)
        #expect(error { try NoteEnvelope(text: longText, maximumByteCount: 100) } == .malformed(.noteEnvelope, .tooLong(length: 750, maximum: 100)))
    }

    @Test("The text form is strict: URL-safe alphabet only, no padding, no whitespace, canonical last character")
    func strictText() throws {
        let envelope = try NoteEnvelope.seal(plaintext: Array("x".utf8), context: Fixture.context, key: ring.current)
        let text = envelope.text  // 46 bytes: 62 characters, the last holding 4 bits
        #expect(text.utf8.count == 62)
        let notText = NoteCryptoError.malformed(.noteEnvelope, .notBase64URL)
        #expect(error { try NoteEnvelope(text: text + "=") } == notText)
        #expect(error { try NoteEnvelope(text: text + "==") } == notText)
        #expect(error { try NoteEnvelope(text: " " + text) } == notText)
        #expect(error { try NoteEnvelope(text: "+" + text.dropFirst()) } == notText)  // standard base64's alphabet
        #expect(error { try NoteEnvelope(text: "/" + text.dropFirst()) } == notText)
        #expect(error { try NoteEnvelope(text: text + "AAA") } == notText)  // 4k + 1 characters hold no whole byte
        #expect(error { try NoteEnvelope(text: "") } == .malformed(.noteEnvelope, .tooShort(length: 0, minimum: 45)))
        // The same bytes spelt with the last character's spare bits set: another spelling, refused.
        let last = text.utf8.last!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let value = alphabet.firstIndex(of: last)!
        #expect(value & 0b11 == 0)
        let respelt = String(text.dropLast()) + String(UnicodeScalar(alphabet[value | 1]))
        #expect(error { try NoteEnvelope(text: respelt) } == notText)
    }

    @Test("Hostile bytes never trap: truncations, extensions and garbage are malformed or do not open (seeded)")
    func hostileBytes() throws {
        let envelope = try NoteEnvelope.seal(plaintext: Array("a note of some length".utf8), context: Fixture.context, key: ring.current)
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            var bytes: [UInt8]
            switch rng.next() % 4 {
            case 0: bytes = Array(envelope.bytes.prefix(Int(rng.next() % UInt64(envelope.bytes.count))))
            case 1: bytes = envelope.bytes + randomBytes(Int(rng.next() % 64) + 1, using: &rng)
            case 2: bytes = randomBytes(Int(rng.next() % 200), using: &rng)
            default:
                bytes = envelope.bytes
                for _ in 0...(rng.next() % 4) { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            }
            if bytes == envelope.bytes { continue }
            let maximum = Int(rng.next() % 150) + 20
            let failure = error {
                try NoteEnvelope.open(try NoteEnvelope(decoding: bytes, maximumByteCount: maximum), expecting: Fixture.context, keys: ring)
            }
            switch failure {
            case .malformed(.noteEnvelope, _), .unsupportedVersion(.noteEnvelope, _), .unknownKeyGeneration(.noteEnvelope, _),
                .doesNotAuthenticate(.noteEnvelope):
                break
            default: Issue.record("unexpected \(String(describing: failure)); \(replay(seed))")
            }
            // The same input as text: no trap, and only the text form's errors.
            let text = String(decoding: bytes, as: UTF8.self)
            switch error({ try NoteEnvelope(text: text, maximumByteCount: maximum) }) {
            case nil, .malformed(.noteEnvelope, _), .unsupportedVersion(.noteEnvelope, _): break
            case let other: Issue.record("unexpected \(String(describing: other)) for text; \(replay(seed))")
            }
        }
    }
}
