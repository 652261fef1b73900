import CSodium
import MiniFlake

// The fixed-width integers of NoteCrypto's binary layouts (all big-endian) and their text form.

extension Array where Element == UInt8 {
    /// Appends `value` as 4 big-endian bytes.
    mutating func appendBigEndian(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    /// Appends `value` as 8 big-endian bytes.
    mutating func appendBigEndian(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// Appends a flake ID's 64-bit value as 8 big-endian bytes.
    mutating func appendBigEndian(_ id: FlakeID) {
        appendBigEndian(UInt64(bitPattern: id.rawValue))
    }

    /// The 4 big-endian bytes at `offset` as a `UInt32`; the caller has checked the length.
    func bigEndianUInt32(at offset: Int) -> UInt32 {
        var value: UInt32 = 0
        for index in offset..<(offset + 4) { value = value << 8 | UInt32(self[index]) }
        return value
    }
}

/// The one text form of every NoteCrypto blob: URL-safe base64 without padding (RFC 4648 §5: `A–Z a–z 0–9 - _`).
///
/// It needs no escaping in JSON (no `/`), URLs or file names. Reading is strict: only the alphabet, no padding, no
/// whitespace, and the unused bits of the last character must be zero, so every blob has exactly one text.
///
/// Written here rather than taken from libsodium, whose codec is constant-time and 6 to 10 times slower (64 KiB: 586
/// µs to encode, 944 µs to decode, against a 85 µs seal): what it spells is ciphertext and public keys, never a
/// secret, so its timing needs no hiding. Secrets that travel as text use libsodium's ``Hex``. libsodium's base64
/// (`sodium_bin2base64`, `sodium_base642bin`) is the reference the tests and the fuzz oracle hold this codec to.
enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// Each byte's 6-bit value, or 0xFF for a byte outside the alphabet.
    static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    /// The number of characters `byteCount` bytes take: ⌈4n/3⌉.
    static func encodedCount(_ byteCount: Int) -> Int {
        byteCount / 3 * 4 + [0, 2, 3][byteCount % 3]
    }

    /// The largest number of bytes a text of `characterCount` characters can hold.
    static func maximumDecodedCount(_ characterCount: Int) -> Int {
        characterCount / 4 * 3 + (characterCount % 4) * 3 / 4
    }

    static func encode(_ bytes: [UInt8]) -> String {
        let count = encodedCount(bytes.count)
        return String(unsafeUninitializedCapacity: count) { output in
            bytes.withUnsafeBufferPointer { input in
                alphabet.withUnsafeBufferPointer { alphabet in
                    var read = 0
                    var written = 0
                    while read + 3 <= input.count {
                        let group = UInt32(input[read]) << 16 | UInt32(input[read + 1]) << 8 | UInt32(input[read + 2])
                        output[written] = alphabet[Int(group >> 18)]
                        output[written + 1] = alphabet[Int(group >> 12 & 63)]
                        output[written + 2] = alphabet[Int(group >> 6 & 63)]
                        output[written + 3] = alphabet[Int(group & 63)]
                        read += 3
                        written += 4
                    }
                    switch input.count - read {
                    case 1:
                        let group = UInt32(input[read]) << 4
                        output[written] = alphabet[Int(group >> 6)]
                        output[written + 1] = alphabet[Int(group & 63)]
                        written += 2
                    case 2:
                        let group = (UInt32(input[read]) << 8 | UInt32(input[read + 1])) << 2
                        output[written] = alphabet[Int(group >> 12)]
                        output[written + 1] = alphabet[Int(group >> 6 & 63)]
                        output[written + 2] = alphabet[Int(group & 63)]
                        written += 3
                    default: break
                    }
                    return written
                }
            }
        }
    }

    /// The bytes of the text form of a `blob`, for its `init(text:)`.
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)``: ``NoteCryptoError/Malformation/tooLong(length:maximum:)`` when
    ///   the text could hold more than `maximumCount` bytes (checked before anything is decoded, and reported as
    ///   that many bytes), else ``NoteCryptoError/Malformation/notBase64URL`` when it is not canonical.
    static func decode(_ text: some StringProtocol, maximumCount: Int, blob: NoteCryptoError.Blob) throws(NoteCryptoError) -> [UInt8] {
        let capacity = maximumDecodedCount(text.utf8.count)
        guard capacity <= maximumCount else { throw .malformed(blob, .tooLong(length: capacity, maximum: maximumCount)) }
        guard let bytes = decode(text, maximumCount: maximumCount) else { throw .malformed(blob, .notBase64URL) }
        return bytes
    }

    /// The bytes of `text`, or nil when it is not canonical URL-safe base64 without padding or would decode to more
    /// than `maximumCount` bytes (checked before anything is decoded).
    static func decode(_ text: some StringProtocol, maximumCount: Int) -> [UInt8]? {
        let utf8 = text.utf8
        guard maximumDecodedCount(utf8.count) <= maximumCount else { return nil }
        if let decoded = utf8.withContiguousStorageIfAvailable({ decode(UnsafeRawBufferPointer($0)) }) { return decoded }
        return Array(utf8).withUnsafeBytes { decode($0) }
    }

    private static func decode(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        // A text of 4k + 1 characters holds no whole last byte: never canonical.
        guard input.count % 4 != 1 else { return nil }
        let count = maximumDecodedCount(input.count)
        var valid = true
        let bytes = values.withUnsafeBufferPointer { values in
            [UInt8](unsafeUninitializedCapacity: count) { output, initialized in
                var read = 0
                var written = 0
                // Each value is 0...63, or 0xFF outside the alphabet: one OR over a group tells whether all were valid.
                while read + 4 <= input.count {
                    let a = values[Int(input[read])], b = values[Int(input[read + 1])]
                    let c = values[Int(input[read + 2])], d = values[Int(input[read + 3])]
                    if (a | b | c | d) & 0x80 != 0 { valid = false; break }
                    let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[written] = UInt8(truncatingIfNeeded: group >> 16)
                    output[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    output[written + 2] = UInt8(truncatingIfNeeded: group)
                    read += 4
                    written += 3
                }
                if valid {
                    switch input.count - read {
                    case 2:
                        let a = values[Int(input[read])], b = values[Int(input[read + 1])]
                        // 12 bits: one byte, and 4 spare bits that must be zero.
                        if (a | b) & 0x80 != 0 || b & 0x0F != 0 { valid = false; break }
                        output[written] = a << 2 | b >> 4
                        written += 1
                    case 3:
                        let a = values[Int(input[read])], b = values[Int(input[read + 1])], c = values[Int(input[read + 2])]
                        // 18 bits: two bytes, and 2 spare bits that must be zero.
                        if (a | b | c) & 0x80 != 0 || c & 0x03 != 0 { valid = false; break }
                        output[written] = a << 2 | b >> 4
                        output[written + 1] = b << 4 | c >> 2
                        written += 2
                    default: break
                    }
                }
                initialized = valid ? written : 0
            }
        }
        return valid ? bytes : nil
    }
}

/// Lowercase hexadecimal through libsodium's constant-time encoder (for secrets that travel as text).
enum Hex {
    static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        Sodium.ensureInitialized()
        var characters = [CChar](repeating: 0, count: bytes.count * 2 + 1)
        _ = sodium_bin2hex(&characters, characters.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        let text = String(decoding: characters.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        sodium_memzero(&characters, characters.count)
        return text
    }
}
