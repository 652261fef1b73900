// What NoteCrypto's decoders must do with any input, checked through the public API alone: this file is compiled
// into the fuzz targets (Fuzz/CryptoFuzz.swift, scripts/fuzz.sh) as well as into the tests, which replay the
// checked-in corpus through it (CryptoCorpusTests). It imports nothing test-only.
import CSodium
import MiniFlake
import NoteCrypto

/// The properties every input must keep: a decoder never traps, refuses with exactly the typed error its layout
/// predicts, accepts only well-formed blobs (whose text form round-trips), and nothing it accepts opens unless a
/// holder of the key sealed it.
public enum CryptoOracle {
    public enum Target: String, CaseIterable, Sendable {
        /// `NoteEnvelope(decoding:)`, `NoteEnvelope(text:)` and `NoteEnvelope.open`.
        case noteEnvelope = "note-envelope"
        /// `WrappedAccountKey(decoding:)`, `(text:)`, each `unwrap`, and `KeyHandover(decoding:)` with `open`.
        case wrappedKey = "wrapped-key"
        /// `RecoveryKey(parsing:)`.
        case recoveryKey = "recovery-key"
        /// `NotePayload(decoding:)` and its canonical encoding.
        case notePayload = "note-payload"
    }

    /// The largest envelope the target reads (the fuzzer's inputs are at most 4096 bytes).
    public static let maximumEnvelopeBytes = 1024

    /// The fixed keys inputs are opened with; the checked-in corpus holds blobs sealed with them.
    public static let account = try! FlakeID(validating: 1001)
    public static let context = NoteEnvelope.Context(
        account: account, clientID: try! FlakeID(validating: 2002), origin: try! FlakeID(validating: 3003),
        editID: try! FlakeID(validating: 4004))
    public static let ring = try! AccountKeyRing(account: account, keys: [
        AccountKey(account: account, generation: 1, restoringSecretBytes: (0..<32).map { 0x80 + UInt8($0) }),
        AccountKey(account: account, generation: 2, restoringSecretBytes: (0..<32).map { 0x20 + UInt8($0) }),
    ])
    public static let wrapKey = try! PasswordKDF.deriveKeys(
        password: "fuzz", parameters: KDFParameters(cost: .insecureForTesting, salt: Array(repeating: 7, count: 16)),
        policy: .allowInsecureForTesting
    ).wrapKey
    public static let recoveryKey = try! RecoveryKey(parsing: "000G-40R4-0M30-E209-185G-R38E-1W81-24GK-2GAH-C5RR-34D1-P70X-3RFG-R9AT")
    public static let device = try! DeviceKeyPair(restoringSecretKey: (0..<32).map { 0x40 + UInt8($0) })

    /// nil when `input` keeps every property, else what broke.
    public static func check(_ target: Target, _ input: [UInt8]) -> String? {
        switch target {
        case .noteEnvelope: checkEnvelope(input) ?? checkEnvelopeText(String(decoding: input, as: UTF8.self))
        case .wrappedKey: checkWrappedKey(input) ?? checkHandover(input) ?? checkWrappedKeyText(String(decoding: input, as: UTF8.self))
        case .recoveryKey: checkRecoveryKey(String(decoding: input, as: UTF8.self))
        case .notePayload: checkPayload(input)
        }
    }

    // MARK: - Note payloads

    /// A payload decodes only from its canonical encoding: whatever it accepts encodes back to exactly the input, and
    /// reads back to the same payload.
    static func checkPayload(_ bytes: [UInt8]) -> String? {
        switch Result(catching: { () throws(NoteCryptoError) in try NotePayload(decoding: bytes, maximumByteCount: 4096) }) {
        case .failure(.malformed(.notePayload, _)):
            return nil
        case .failure(let error):
            return "decoding failed with \(error), not a malformed payload"
        case .success(let payload):
            guard payload.bytes == bytes else { return "accepted a non-canonical encoding" }
            guard (try? NotePayload(decoding: payload.bytes)) == payload else { return "the encoding does not read back" }
            return nil
        }
    }

    // MARK: - Note envelopes

    static func checkEnvelope(_ bytes: [UInt8]) -> String? {
        let expected = expectedEnvelopeError(bytes)
        switch Result(catching: { () throws(NoteCryptoError) in try NoteEnvelope(decoding: bytes, maximumByteCount: maximumEnvelopeBytes) }) {
        case .failure(let error):
            return error == expected ? nil : "decoding: \(error), expected \(String(describing: expected))"
        case .success(let envelope):
            if let expected { return "decoded what should be \(expected)" }
            if envelope.bytes != bytes { return "decoded bytes differ" }
            guard let reread = try? NoteEnvelope(text: envelope.text, maximumByteCount: maximumEnvelopeBytes), reread == envelope else {
                return "the text form does not read back"
            }
            switch Result(catching: { () throws(NoteCryptoError) in try NoteEnvelope.open(envelope, expecting: context, keys: ring) }) {
            case .success(let opened):
                // Only the corpus's own seeds open: sealed with the fixed keys for the fixed context.
                if opened.plaintext.count != envelope.plaintextByteCount || opened.keyGeneration != envelope.keyGeneration {
                    return "opened to the wrong length or generation"
                }
            case .failure(.doesNotAuthenticate(.noteEnvelope)): break
            case .failure(.unknownKeyGeneration(.noteEnvelope, let generation)):
                if ring.key(generation: generation) != nil || generation != envelope.keyGeneration { return "unknown generation \(generation)" }
            case .failure(let error): return "opening: \(error)"
            }
        }
        return nil
    }

    /// The error the layout predicts for `bytes`, or nil when they are a well-formed envelope.
    static func expectedEnvelopeError(_ bytes: [UInt8]) -> NoteCryptoError? {
        if bytes.count < NoteEnvelope.overheadByteCount {
            return .malformed(.noteEnvelope, .tooShort(length: bytes.count, minimum: NoteEnvelope.overheadByteCount))
        }
        if bytes.count > maximumEnvelopeBytes {
            return .malformed(.noteEnvelope, .tooLong(length: bytes.count, maximum: maximumEnvelopeBytes))
        }
        if bytes[0] != NoteEnvelope.version { return .unsupportedVersion(.noteEnvelope, bytes[0]) }
        if bytes[1...4].allSatisfy({ $0 == 0 }) { return .malformed(.noteEnvelope, .invalidField("key generation 0")) }
        return nil
    }

    /// The text form against libsodium's base64 (the reference): what libsodium reads, the envelope reads as those
    /// bytes; what it refuses, the envelope refuses as not base64.
    static func checkEnvelopeText(_ text: String) -> String? {
        let result = Result(catching: { () throws(NoteCryptoError) in try NoteEnvelope(text: text, maximumByteCount: maximumEnvelopeBytes) })
        guard let bytes = referenceDecode(text) else {
            switch result {
            case .failure(.malformed(.noteEnvelope, .notBase64URL)): return nil
            case .failure(.malformed(.noteEnvelope, .tooLong(let length, _))) where length > maximumEnvelopeBytes:
                // Refused for its length before it was read: as many bytes as its characters can hold.
                let characters = text.utf8.count
                return length == characters / 4 * 3 + characters % 4 * 3 / 4 ? nil : "too long at \(length) for \(characters) characters"
            default: return "libsodium refuses \(text) as base64, the envelope reader: \(result)"
            }
        }
        switch result {
        case .success(let envelope):
            if envelope.bytes != bytes { return "text \(text) read as other bytes than libsodium reads" }
            if envelope.text != text || referenceEncode(envelope.bytes) != text { return "text \(text) written back differently" }
        case .failure(let error):
            if bytes.count > maximumEnvelopeBytes, case .malformed(.noteEnvelope, .tooLong) = error { return nil }
            if error != expectedEnvelopeError(bytes) { return "text: \(error), expected \(String(describing: expectedEnvelopeError(bytes)))" }
        }
        return nil
    }

    /// libsodium's URL-safe base64 without padding (constant-time, strict): the reference for NoteCrypto's own codec,
    /// on ASCII. Beyond ASCII the reference is RFC 4648 (refuse): libsodium 1.0.18 reads every byte 0x80–0xFF as `_`
    /// (its character classes compare a signed `char`), so `"éq9"` would decode to ff fa bd.
    public static func referenceDecode(_ text: String) -> [UInt8]? {
        var characters = Array(text.utf8)
        guard characters.allSatisfy({ $0 < 0x80 }) else { return nil }
        var bytes = [UInt8](repeating: 0, count: characters.count * 3 / 4 + 1)
        var count = 0
        characters.append(0)
        let status = characters.withUnsafeBufferPointer { input in
            input.withMemoryRebound(to: CChar.self) { input in
                sodium_base642bin(
                    &bytes, bytes.count, input.baseAddress, input.count - 1, nil, &count, nil, Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING))
            }
        }
        return status == 0 ? Array(bytes[..<count]) : nil
    }

    /// libsodium's encoding of `bytes` as URL-safe base64 without padding.
    public static func referenceEncode(_ bytes: [UInt8]) -> String {
        let variant = Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING)
        var characters = [CChar](repeating: 0, count: sodium_base64_encoded_len(bytes.count, variant))
        _ = sodium_bin2base64(&characters, characters.count, bytes, bytes.count, variant)
        return String(decoding: characters.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: - Wrapped keys and hand-overs

    static func checkWrappedKey(_ bytes: [UInt8]) -> String? {
        switch Result(catching: { () throws(NoteCryptoError) in try WrappedAccountKey(decoding: bytes) }) {
        case .failure(.malformed(.wrappedAccountKey, .tooShort(let length, _))):
            return length == bytes.count && length < WrappedAccountKey.byteCount ? nil : "tooShort at \(bytes.count)"
        case .failure(.malformed(.wrappedAccountKey, .tooLong(let length, _))):
            return length == bytes.count && length > WrappedAccountKey.byteCount ? nil : "tooLong at \(bytes.count)"
        case .failure(.unsupportedVersion(.wrappedAccountKey, let version)):
            return version != WrappedAccountKey.version && version == bytes[0] ? nil : "unsupported version \(version)"
        case .failure(.malformed(.wrappedAccountKey, .invalidField)):
            return bytes.count == WrappedAccountKey.byteCount ? nil : "invalid field at length \(bytes.count)"
        case .failure(let error):
            return "decoding a wrapped key: \(error)"
        case .success(let wrapped):
            if bytes.count != WrappedAccountKey.byteCount || bytes[0] != WrappedAccountKey.version || wrapped.bytes != bytes {
                return "accepted a malformed wrapped key"
            }
            if wrapped.generation == 0 || wrapped.wrapperGeneration == wrapped.generation { return "accepted generation \(wrapped.generation)" }
            guard let reread = try? WrappedAccountKey(text: wrapped.text), reread == wrapped else { return "the text form does not read back" }
            let unwrapped = Result { () throws(NoteCryptoError) in
                switch wrapped.wrapper {
                case .password: try wrapped.unwrap(account: account, with: wrapKey)
                case .recoveryKey: try wrapped.unwrap(account: account, with: recoveryKey)
                case .accountKey: try wrapped.unwrap(with: ring)
                }
            }
            switch unwrapped {
            case .success(let key):
                if key.account != account || key.generation != wrapped.generation { return "unwrapped the wrong key" }
            case .failure(.doesNotAuthenticate(.wrappedAccountKey)): break
            case .failure(.unknownKeyGeneration(.wrappedAccountKey, let generation)):
                if generation != wrapped.wrapperGeneration || ring.key(generation: generation) != nil { return "unknown generation \(generation)" }
            case .failure(let error): return "unwrapping: \(error)"
            }
        }
        return nil
    }

    static func checkHandover(_ bytes: [UInt8]) -> String? {
        switch Result(catching: { () throws(NoteCryptoError) in try KeyHandover(decoding: bytes) }) {
        case .failure(.malformed(.keyHandover, .tooShort)), .failure(.malformed(.keyHandover, .tooLong)):
            return bytes.count != KeyHandover.byteCount ? nil : "refused a hand-over of the right length"
        case .failure(let error): return "decoding a hand-over: \(error)"
        case .success(let handover):
            if bytes.count != KeyHandover.byteCount || handover.bytes != bytes { return "accepted a hand-over of \(bytes.count) bytes" }
            switch Result(catching: { () throws(NoteCryptoError) in try handover.open(with: device, keys: ring) }) {
            case .success(let key):
                if key.account != account { return "a hand-over opened to another account's key" }
            case .failure(.doesNotAuthenticate(.keyHandover)), .failure(.doesNotAuthenticate(.wrappedAccountKey)),
                .failure(.notAHandover), .failure(.unknownKeyGeneration(.wrappedAccountKey, _)):
                break
            case .failure(let error): return "opening a hand-over: \(error)"
            }
        }
        return nil
    }

    static func checkWrappedKeyText(_ text: String) -> String? {
        switch Result(catching: { () throws(NoteCryptoError) in try WrappedAccountKey(text: text) }) {
        case .success(let wrapped): return wrapped.text == text ? nil : "wrapped-key text read as another spelling"
        case .failure(.malformed(.wrappedAccountKey, _)), .failure(.unsupportedVersion(.wrappedAccountKey, _)): return nil
        case .failure(let error): return "wrapped-key text: \(error)"
        }
    }

    // MARK: - Recovery keys

    static func checkRecoveryKey(_ text: String) -> String? {
        let kept = text.filter { $0 != "-" && !$0.isWhitespace }
        switch Result(catching: { () throws(NoteCryptoError) in try RecoveryKey(parsing: text) }) {
        case .success(let key):
            let canonical = key.humanForm
            guard let again = try? RecoveryKey(parsing: canonical), again == key else { return "the human form does not read back" }
            // What was typed is the human form up to case, separators and look-alikes.
            let typed = String(kept.map(lenient))
            if typed != canonical.filter({ $0 != "-" }) { return "read \(text) as \(canonical)" }
        case .failure(.recoveryKeyInvalidCharacter(let character, let position)):
            let characters = Array(text)
            guard position >= 1, position <= characters.count, characters[position - 1] == character else {
                return "invalid character \(character) at \(position) is not there"
            }
            if characters[..<(position - 1)].contains(where: { !isSeparator($0) && lenient($0) == "?" }) { return "not the first invalid character" }
            if lenient(character) != "?" { return "refused a valid character \(character)" }
        case .failure(.recoveryKeyWrongLength(let count)):
            if count != kept.count || count == RecoveryKey.humanCharacterCount { return "wrong length \(count) for \(kept.count)" }
        case .failure(.recoveryKeyChecksumMismatch):
            if kept.count != RecoveryKey.humanCharacterCount { return "checksum checked at length \(kept.count)" }
        case .failure(let error): return "parsing: \(error)"
        }
        return nil
    }

    static func isSeparator(_ character: Character) -> Bool { character == "-" || character.isWhitespace }

    /// A character as the parser reads it: uppercase, look-alikes mapped; `?` when it cannot be in a recovery key.
    static func lenient(_ character: Character) -> Character {
        switch character {
        case "o", "O": "0"
        case "i", "I", "l", "L": "1"
        default:
            // ASCII first: the uppercase of some characters is two (ß), which is no Character.
            character.isASCII && "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains(Character(character.uppercased()))
                ? Character(character.uppercased()) : "?"
        }
    }
}
