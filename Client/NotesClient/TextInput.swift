/// Turning bytes from outside (standard input, the editor's file, imported files) into note text: byte-exact, or
/// refused. Nothing is ever replaced or cut: a NUL is kept, invalid UTF-8 is refused with its byte offset.
public enum TextInput {
    /// The text `bytes` spell in UTF-8.
    ///
    /// - Parameter source: what the bytes are, capitalised, for the message ("Standard input", "The file x.md").
    /// - Throws: `invalid_text` naming the offset of the first byte that is not valid UTF-8.
    public static func decode(_ bytes: [UInt8], source: String) throws(NotesError) -> String {
        if let offset = firstInvalidOffset(bytes) {
            let shown = bytes[offset..<min(offset + 4, bytes.count)].map { byte in
                "0x" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
            throw NotesError(
                .invalidText,
                "\(source) is not valid UTF-8 at byte offset \(offset) (\(shown.joined(separator: " "))); nothing was stored.")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The offset of the first byte that does not start a valid UTF-8 sequence (overlong forms, surrogates and
    /// values above U+10FFFF are invalid, as are truncated sequences), or nil when all of `bytes` is valid.
    public static func firstInvalidOffset(_ bytes: [UInt8]) -> Int? {
        var index = 0
        let count = bytes.count
        while index < count {
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            var scalar: UInt32
            let minimum: UInt32
            switch lead {
            case 0xC2...0xDF: length = 2; minimum = 0x80; scalar = UInt32(lead & 0x1F)
            case 0xE0...0xEF: length = 3; minimum = 0x800; scalar = UInt32(lead & 0x0F)
            case 0xF0...0xF4: length = 4; minimum = 0x10000; scalar = UInt32(lead & 0x07)
            default: return index
            }
            guard index + length <= count else { return index }
            for next in bytes[(index + 1)..<(index + length)] {
                guard next & 0xC0 == 0x80 else { return index }
                scalar = scalar << 6 | UInt32(next & 0x3F)
            }
            if scalar < minimum || scalar > 0x10FFFF || (0xD800...0xDFFF).contains(scalar) { return index }
            index += length
        }
        return nil
    }
}
