import NoteSyncProtocol

/// The plaintext inside a note's ``NoteEnvelope``: the note as the device holds it.
///
/// **Canonical JSON**, one encoding per payload, so that the same note always seals the same plaintext and a decoder
/// can refuse anything else:
///
///     {"archived":false,"pinned":true,"seq":3,"tags":["a/b","work"],"text":"Buy milk\n"}
///
/// and with attachments (issue 33), `"attachments"` between `archived` and `pinned`, each a manifest with its keys
/// sorted (`key`, the file's ``AttachmentKey`` text, only when present):
///
///     {"archived":false,"attachments":[{"chunkSize":1048576,"chunks":["9f86…"],"key":"3a1c…","mediaType":"image/png",
///     "name":"photo.png","sha256":"2c26…","size":5}],"pinned":true,"seq":3,"tags":[],"text":"…"}
///
/// - the five keys, in this (sorted) order, each once, nothing else; no whitespace; `attachments` only when the note
///   has some (so a note without attachments seals exactly the bytes it sealed before attachments existed);
/// - `seq` a decimal integer from 1 to 2⁵³ without sign, leading zeros, fraction or exponent;
/// - strings in UTF-8 as is, except `"` and `\` (escaped `\"`, `\\`), and the control characters below U+0020
///   (`\b \t \n \f \r`, the others `\u00XX` with lowercase hex); no other escape (`\/`, `\u` for a printable
///   character, surrogates) is read;
/// - `tags` in the order the device keeps them (its ``TagRules`` order; this codec checks the JSON, not the tags).
/// - `attachments` in the order the device keeps them; in each, `size` and `chunkSize` decimal integers from 0 to 2⁵³
///   as `seq` is (0 written `0`), the hashes 64 lowercase hexadecimal digits; this codec checks the JSON, not the
///   manifests (``AttachmentManifest/validate()`` does, before a download).
///
/// `seq` is 1 + the `seq` of the version the edit is based on, 1 for a new note: an accepted chain's `seq` only grows,
/// so a device that remembers the newest `seq` (and its edit ID) per note catches a server serving an older version as
/// the current one.
public struct NotePayload: Sendable, Hashable {
    public var text: String
    public var tags: [String]
    public var pinned: Bool
    public var archived: Bool
    /// The note's attachments, each with its file's ``AttachmentKey`` text as `key` (issue 33).
    public var attachments: [AttachmentManifest]
    /// 1 + the base version's `seq`; 1 for a new note.
    public var seq: UInt64

    /// The largest `seq` (2⁵³: exact in every JSON reader).
    public static let maximumSeq: UInt64 = 1 << 53
    /// The largest payload ``init(decoding:maximumByteCount:)`` reads unless told otherwise (4 MiB, as envelopes).
    public static let defaultMaximumByteCount = NoteEnvelope.defaultMaximumByteCount

    public init(
        text: String, tags: [String] = [], pinned: Bool = false, archived: Bool = false, attachments: [AttachmentManifest] = [], seq: UInt64
    ) {
        self.text = text
        self.tags = tags
        self.pinned = pinned
        self.archived = archived
        self.attachments = attachments
        self.seq = seq
    }

    /// The canonical encoding.
    ///
    /// - Precondition: `seq` is 1 through ``maximumSeq``; each attachment's `size` and `chunkSize` are 0 through
    ///   ``maximumSeq`` (a validated manifest's are).
    public var bytes: [UInt8] {
        precondition((1...Self.maximumSeq).contains(seq), "a payload's seq is 1 through 2^53")
        var out: [UInt8] = []
        out.reserveCapacity(
            text.utf8.count + 64 + tags.reduce(0) { $0 + $1.utf8.count + 3 }
                + attachments.reduce(0) { $0 + 300 + $1.name.utf8.count + 67 * $1.chunks.count })
        out += Array(#"{"archived":"#.utf8) + Array((archived ? "true" : "false").utf8)
        if !attachments.isEmpty {
            out += Array(#","attachments":["#.utf8)
            for (index, manifest) in attachments.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.appendManifest(manifest, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out += Array(#","pinned":"#.utf8) + Array((pinned ? "true" : "false").utf8)
        out += Array(#","seq":"#.utf8) + Array(String(seq).utf8)
        out += Array(#","tags":["#.utf8)
        for (index, tag) in tags.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            Self.appendString(tag, to: &out)
        }
        out += Array(#"],"text":"#.utf8)
        Self.appendString(text, to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Reads a payload, accepting only its canonical encoding.
    ///
    /// - Throws: ``NoteCryptoError/malformed(_:_:)`` (blob ``NoteCryptoError/Blob/notePayload``): more than
    ///   `maximumByteCount` bytes, or anything but the canonical encoding (the field names the first thing wrong).
    public init(decoding bytes: [UInt8], maximumByteCount: Int = defaultMaximumByteCount) throws(NoteCryptoError) {
        guard bytes.count <= maximumByteCount else {
            throw .malformed(.notePayload, .tooLong(length: bytes.count, maximum: maximumByteCount))
        }
        var reader = Reader(bytes: bytes)
        try reader.expect(#"{"archived":"#)
        archived = try reader.bool()
        var attachments: [AttachmentManifest] = []
        if reader.consume(#","attachments":["#) {
            // Written only when there are some: an empty list is not canonical.
            repeat { attachments.append(try reader.manifest()) } while reader.consume(UInt8(ascii: ","))
            try reader.expect("]")
        }
        self.attachments = attachments
        try reader.expect(#","pinned":"#)
        pinned = try reader.bool()
        try reader.expect(#","seq":"#)
        seq = try reader.seq()
        try reader.expect(#","tags":["#)
        var tags: [String] = []
        if !reader.consume(UInt8(ascii: "]")) {
            repeat { tags.append(try reader.string()) } while reader.consume(UInt8(ascii: ","))
            try reader.expect("]")
        }
        self.tags = tags
        try reader.expect(#","text":"#)
        text = try reader.string()
        try reader.expect("}")
        guard reader.index == bytes.count else { throw Reader.malformed("bytes after the object") }
    }

    /// Appends `manifest` as a canonical JSON object (keys sorted, `key` only when present).
    static func appendManifest(_ manifest: AttachmentManifest, to out: inout [UInt8]) {
        precondition((0...Int64(maximumSeq)).contains(manifest.size), "an attachment's size is 0 through 2^53")
        precondition((0...Int(maximumSeq)).contains(manifest.chunkSize), "an attachment's chunk size is 0 through 2^53")
        out += Array(#"{"chunkSize":"#.utf8) + Array(String(manifest.chunkSize).utf8)
        out += Array(#","chunks":["#.utf8)
        for (index, hash) in manifest.chunks.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            out += Array(hash.hex.utf8)
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "]"))
        if let key = manifest.key {
            out += Array(#","key":"#.utf8)
            appendString(key, to: &out)
        }
        out += Array(#","mediaType":"#.utf8)
        appendString(manifest.mediaType, to: &out)
        out += Array(#","name":"#.utf8)
        appendString(manifest.name, to: &out)
        out += Array(#","sha256":""#.utf8) + Array(manifest.sha256.hex.utf8)
        out += Array(#"","size":"#.utf8) + Array(String(manifest.size).utf8)
        out.append(UInt8(ascii: "}"))
    }

    /// Appends `string` as a canonical JSON string.
    static func appendString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0C: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static let hex = Array("0123456789abcdef".utf8)

    /// A cursor over the bytes that reads only the canonical forms.
    struct Reader {
        let bytes: [UInt8]
        var index = 0

        static func malformed(_ what: String) -> NoteCryptoError { .malformed(.notePayload, .invalidField(what)) }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// Consumes `literal` when the bytes at the cursor spell it; moves nothing otherwise.
        mutating func consume(_ literal: String) -> Bool {
            guard bytes[index...].starts(with: literal.utf8) else { return false }
            index += literal.utf8.count
            return true
        }

        mutating func expect(_ literal: String) throws(NoteCryptoError) {
            for byte in literal.utf8 {
                guard consume(byte) else { throw Self.malformed("expected \(literal) at byte \(index)") }
            }
        }

        mutating func bool() throws(NoteCryptoError) -> Bool {
            if bytes[index...].starts(with: "true".utf8) {
                index += 4
                return true
            }
            if bytes[index...].starts(with: "false".utf8) {
                index += 5
                return false
            }
            throw Self.malformed("expected true or false at byte \(index)")
        }

        mutating func seq() throws(NoteCryptoError) -> UInt64 {
            let start = index
            let value = try natural("seq")
            guard value >= 1 else { throw Self.malformed("seq is not an integer from 1 to 2^53 at byte \(start)") }
            return UInt64(value)
        }

        /// A decimal integer from 0 to 2⁵³ without sign, leading zeros, fraction or exponent.
        mutating func natural(_ what: String) throws(NoteCryptoError) -> Int64 {
            let start = index
            var value: Int64 = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                guard index - start < 16 else { throw Self.malformed("\(what) has too many digits") }
                value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
                index += 1
            }
            guard index > start, bytes[start] != UInt8(ascii: "0") || index == start + 1, value <= Int64(NotePayload.maximumSeq) else {
                throw Self.malformed("\(what) is not an integer from 0 to 2^53 at byte \(start)")
            }
            return value
        }

        /// A content hash: a string of 64 lowercase hexadecimal digits.
        mutating func hash(_ what: String) throws(NoteCryptoError) -> ContentHash {
            let start = index
            guard let hash = ContentHash(try string()) else { throw Self.malformed("\(what) is not a SHA-256 hash at byte \(start)") }
            return hash
        }

        /// An attachment's manifest, as ``NotePayload/appendManifest(_:to:)`` writes it.
        mutating func manifest() throws(NoteCryptoError) -> AttachmentManifest {
            try expect(#"{"chunkSize":"#)
            let chunkSize = try natural("chunkSize")
            try expect(#","chunks":["#)
            var chunks: [ContentHash] = []
            if !consume(UInt8(ascii: "]")) {
                repeat { chunks.append(try hash("a chunk")) } while consume(UInt8(ascii: ","))
                try expect("]")
            }
            let key = consume(#","key":"#) ? try string() : nil
            try expect(#","mediaType":"#)
            let mediaType = try string()
            try expect(#","name":"#)
            let name = try string()
            try expect(#","sha256":"#)
            let sha256 = try hash("sha256")
            try expect(#","size":"#)
            let size = try natural("size")
            try expect("}")
            return AttachmentManifest(
                name: name, size: size, mediaType: mediaType, chunkSize: Int(chunkSize), chunks: chunks, sha256: sha256, key: key)
        }

        /// A canonical string: raw UTF-8 (validated) but for the escapes ``NotePayload/appendString(_:to:)`` writes.
        mutating func string() throws(NoteCryptoError) -> String {
            try expect("\"")
            var out: [UInt8] = []
            while true {
                guard index < bytes.count else { throw Self.malformed("unterminated string") }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let string = String(validating: out, as: UTF8.self) else { throw Self.malformed("a string is not UTF-8") }
                    return string
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw Self.malformed("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
                    case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "u"):
                        // Only \u00XX, lowercase, for a control character without a short escape.
                        guard index + 4 <= bytes.count, bytes[index] == UInt8(ascii: "0"), bytes[index + 1] == UInt8(ascii: "0"),
                            let high = NotePayload.hex.firstIndex(of: bytes[index + 2]), high < 2,
                            let low = NotePayload.hex.firstIndex(of: bytes[index + 3])
                        else { throw Self.malformed("a \\u escape that is not canonical at byte \(index)") }
                        let value = UInt8(high << 4 | low)
                        guard ![0x08, 0x09, 0x0A, 0x0C, 0x0D].contains(value) else {
                            throw Self.malformed("a \\u escape of a character with a short escape at byte \(index)")
                        }
                        out.append(value)
                        index += 4
                    default:
                        throw Self.malformed("an escape that is not canonical at byte \(index - 1)")
                    }
                case 0..<0x20:
                    throw Self.malformed("an unescaped control character at byte \(index - 1)")
                default:
                    out.append(byte)
                }
            }
        }
    }
}
