import Foundation

// Attachments (issue 33): a file is split into chunks of ``ChunkRules/chunkSize`` bytes, each stored once per account
// under its content address (the SHA-256 of its bytes as stored); an ``AttachmentManifest`` lists them. The chunk
// endpoints (`POST /v1/chunks/missing`, `PUT` and `GET /v1/chunks/{hash}`) move the bytes; a note will refer to its
// attachments by manifest (phase 2).

/// A SHA-256 digest as the protocol writes it: 64 lowercase hexadecimal digits. A chunk's content address (the hash
/// of its bytes as stored: for an encrypted account, later, of its ciphertext, so that the address never reveals the
/// plaintext) and a whole file's checksum.
///
/// Codable as its string; decoding anything else (uppercase, another length, a non-hex digit) throws a
/// `DecodingError` whose underlying error is ``ContentHashError``, which requests answer 400 `invalid_hash`.
public struct ContentHash: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The 64 lowercase hex digits.
    public let hex: String

    /// The hash written as `text`, or nil when it is not 64 lowercase hexadecimal digits.
    public init?(_ text: some StringProtocol) {
        let utf8 = text.utf8
        guard utf8.count == 64, utf8.allSatisfy(Self.isLowerHex) else { return nil }
        hex = String(text)
    }

    /// The hash of a 32-byte digest.
    public init(digest: some Sequence<UInt8>) {
        var text = ""
        text.reserveCapacity(64)
        for byte in digest {
            text.unicodeScalars.append(Self.digits[Int(byte >> 4)])
            text.unicodeScalars.append(Self.digits[Int(byte & 0x0f)])
        }
        precondition(text.utf8.count == 64, "a SHA-256 digest is 32 bytes")
        hex = text
    }

    /// The 32 bytes the digits stand for.
    public var bytes: [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(32)
        var high: UInt8 = 0
        for (index, byte) in hex.utf8.enumerated() {
            let value = byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : byte - UInt8(ascii: "a") + 10
            if index % 2 == 0 { high = value } else { result.append(high << 4 | value) }
        }
        return result
    }

    public var description: String { hex }

    public static func < (a: ContentHash, b: ContentHash) -> Bool { a.hex < b.hex }

    private static let digits = Array("0123456789abcdef".unicodeScalars)

    private static func isLowerHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let hash = ContentHash(text) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath, debugDescription: ContentHashError.rule, underlyingError: ContentHashError()))
        }
        self = hash
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}

/// A value that is not a ``ContentHash`` (the underlying error of its `DecodingError`).
public struct ContentHashError: Error, Sendable, CustomStringConvertible {
    public init() {}
    /// The rule in words.
    public static let rule = "a SHA-256 hash is 64 lowercase hexadecimal digits"
    public var description: String { Self.rule }
}

/// The fixed sizes of the chunk protocol. They are the protocol's, not an operator's option: every server and client
/// agrees on them, so that the same file always splits into the same chunks (and the same chunk is never sent twice).
public enum ChunkRules {
    /// The size of every chunk of a file but its last (which is shorter, never empty): 1 MiB.
    public static let chunkSize = 1 << 20
    /// What an encrypted account's device adds to each chunk when it seals it (NoteCrypto's `AttachmentCipher`: a
    /// version byte and the 16-byte Poly1305 tag).
    public static let sealingOverhead = 17
    /// The largest chunk body `PUT /v1/chunks/{hash}` takes (413 `chunk_too_large` past it): a whole chunk, sealed
    /// (``chunkSize`` + ``sealingOverhead`` = 1,048,593 bytes).
    public static let maxChunkBytes = chunkSize + sealingOverhead
    /// The most hashes one `POST /v1/chunks/missing` may ask about (413 `batch_too_large` past it): 1,000 hashes are
    /// 1 GiB of file, in a body of 67 KB.
    public static let maxMissingHashes = 1000
    /// The media type of a chunk's body, both ways.
    public static let mediaType = "application/octet-stream"

    /// How many chunks a file of `size` bytes has: `ceil(size / chunkSize)`, 0 for an empty file.
    public static func chunkCount(size: Int64, chunkSize: Int = ChunkRules.chunkSize) -> Int {
        size <= 0 ? 0 : Int((size + Int64(chunkSize) - 1) / Int64(chunkSize))
    }
}

/// `POST /v1/chunks/missing` body: which of these chunks does the account lack?
public struct MissingChunksRequest: Codable, Sendable, Equatable {
    /// At most ``ChunkRules/maxMissingHashes``; duplicates are allowed and answered once.
    public var hashes: [ContentHash]

    public init(hashes: [ContentHash]) { self.hashes = hashes }

    public enum CodingKeys: String, WireKey { case hashes }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        hashes = try c.decode([ContentHash].self, forKey: .hashes)
    }
}

/// `POST /v1/chunks/missing` answer.
public struct MissingChunksResponse: Codable, Sendable, Equatable {
    /// The asked hashes the account has no chunk for, in the order asked, each once. A hash not listed is stored
    /// for this account (and its grace period before garbage collection starts again).
    public var missing: [ContentHash]

    public init(missing: [ContentHash]) { self.missing = missing }
    public enum CodingKeys: String, WireKey { case missing }
}

/// `PUT /v1/chunks/{hash}` answer (201 when the chunk was stored now, 200 when the account had it already).
public struct ChunkStoredResponse: Codable, Sendable, Equatable {
    public var hash: ContentHash
    /// The chunk's size in bytes.
    public var size: Int

    public init(hash: ContentHash, size: Int) {
        self.hash = hash
        self.size = size
    }
    public enum CodingKeys: String, WireKey { case hash, size }
}

/// What a note will refer to for one attached file (phase 2): its name, size and type, and the content addresses of
/// its chunks in order, with the whole file's SHA-256 to check the assembled file against.
///
/// An encrypted account's manifest (inside the note's envelope only, never in the clear on the wire) carries the
/// file's key in ``key``: its chunks are stored sealed, so ``chunks`` are the sealed chunks' addresses while
/// ``size``, ``chunkSize`` and ``sha256`` stay the plaintext file's.
///
/// Decoding is strict (unknown fields refused) and ``validate()`` checks the rest; ``encodedJSON()`` writes it.
public struct AttachmentManifest: Codable, Sendable, Equatable, Hashable {
    /// The file's name, without a directory (see ``validate()``).
    public var name: String
    /// The file's size in bytes.
    public var size: Int64
    /// Its media type (`image/png`), ``defaultMediaType`` when unknown.
    public var mediaType: String
    /// The size of each chunk but the last (``ChunkRules/chunkSize``).
    public var chunkSize: Int
    /// The chunks' content addresses, in file order: ``ChunkRules/chunkCount(size:chunkSize:)`` of them.
    public var chunks: [ContentHash]
    /// The SHA-256 of the whole file (its plaintext, for an encrypted account's).
    public var sha256: ContentHash
    /// The file's key (NoteCrypto's `AttachmentKey` text: 64 lowercase hexadecimal digits) when its chunks are sealed:
    /// present only inside a note envelope of an encrypted account, nil on the wire and for a plaintext account.
    public var key: String?

    public init(
        name: String, size: Int64, mediaType: String, chunkSize: Int = ChunkRules.chunkSize, chunks: [ContentHash], sha256: ContentHash,
        key: String? = nil
    ) {
        self.name = name
        self.size = size
        self.mediaType = mediaType
        self.chunkSize = chunkSize
        self.chunks = chunks
        self.sha256 = sha256
        self.key = key
    }

    /// The media type of a file whose type is not known.
    public static let defaultMediaType = "application/octet-stream"
    /// The longest name, in UTF-8 bytes (what most file systems take).
    public static let maxNameBytes = 255
    /// The longest media type, in bytes.
    public static let maxMediaTypeBytes = 127

    public enum CodingKeys: String, WireKey { case name, size, mediaType, chunkSize, chunks, sha256, key }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        size = try c.decode(Int64.self, forKey: .size)
        mediaType = try c.decode(String.self, forKey: .mediaType)
        chunkSize = try c.decode(Int.self, forKey: .chunkSize)
        chunks = try c.decode([ContentHash].self, forKey: .chunks)
        sha256 = try c.decode(ContentHash.self, forKey: .sha256)
        key = try c.decodeIfPresentRefusingNull(String.self, forKey: .key)
    }

    /// The manifest as JSON, its keys sorted, so that one manifest always encodes to the same bytes.
    public func encodedJSON() -> Data {
        let encoder = WireJSON.encoder()
        encoder.outputFormatting.insert(.sortedKeys)
        return (try? encoder.encode(self)) ?? Data()
    }

    /// A manifest read from JSON and checked (``validate()``).
    ///
    /// - Throws: the ``APIErrorBody`` a request carrying it would be answered with (`invalid_json`, `unknown_field`,
    ///   `invalid_hash`, `invalid_field`).
    public static func decode(_ data: Data) throws(APIErrorBody) -> AttachmentManifest {
        let manifest = try WireJSON.decodeRequest(AttachmentManifest.self, from: data)
        try manifest.validate()
        return manifest
    }

    /// Checks what the types cannot: a name of 1–255 UTF-8 bytes without `/`, NUL or another control character, and
    /// not `.` or `..`; a media type `type/subtype` of ASCII letters, digits and `!#$&^_.+-` (at most 127 bytes);
    /// a chunk size in 1...``ChunkRules/chunkSize`` (so that a sealed chunk, ``ChunkRules/sealingOverhead`` more,
    /// fits ``ChunkRules/maxChunkBytes``); a
    /// ``key``, when present, of 64 lowercase hexadecimal digits; a size of 0 or more with exactly the chunks it needs.
    ///
    /// - Throws: `invalid_field` naming the field.
    public func validate() throws(APIErrorBody) {
        func refuse(_ key: CodingKeys, _ message: String) -> APIErrorBody {
            APIErrorBody(code: .invalidField, message: message, field: key.stringValue)
        }
        guard Self.isAcceptableName(name) else {
            throw refuse(.name, "An attachment's name is 1–\(Self.maxNameBytes) UTF-8 bytes, without '/' or control characters, and not '.' or '..'.")
        }
        guard Self.isAcceptableMediaType(mediaType) else {
            throw refuse(.mediaType, "An attachment's media type is type/subtype (at most \(Self.maxMediaTypeBytes) bytes), such as image/png.")
        }
        // At most the protocol's chunk size, so that every chunk fits the limit sealed too (a key: the overhead more).
        guard (1...ChunkRules.chunkSize).contains(chunkSize) else {
            throw refuse(.chunkSize, "An attachment's chunk size is 1–\(ChunkRules.chunkSize) bytes, not \(chunkSize).")
        }
        if let key, ContentHash(key) == nil {
            throw refuse(.key, "An attachment's key is 64 lowercase hexadecimal digits.")
        }
        guard size >= 0 else { throw refuse(.size, "An attachment's size is 0 or more bytes, not \(size).") }
        let expected = ChunkRules.chunkCount(size: size, chunkSize: chunkSize)
        guard chunks.count == expected else {
            throw refuse(.chunks, "A file of \(size) bytes in chunks of \(chunkSize) has \(expected) chunks; the manifest lists \(chunks.count).")
        }
    }

    /// The size of chunk `index` of the file (every chunk is ``chunkSize`` but the last, which holds the rest); a
    /// sealed chunk as stored is ``ChunkRules/sealingOverhead`` bytes more.
    public func size(ofChunk index: Int) -> Int {
        index == chunks.count - 1 ? Int(size - Int64(chunkSize) * Int64(chunks.count - 1)) : chunkSize
    }

    /// The size of chunk `index` as stored (what the server holds under its address): ``size(ofChunk:)``, plus
    /// ``ChunkRules/sealingOverhead`` when the chunks are sealed (a ``key``).
    public func storedSize(ofChunk index: Int) -> Int {
        size(ofChunk: index) + (key == nil ? 0 : ChunkRules.sealingOverhead)
    }

    /// Whether `name` can name an attachment (see ``validate()``).
    public static func isAcceptableName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard (1...maxNameBytes).contains(bytes.count), name != ".", name != ".." else { return false }
        return !bytes.contains(UInt8(ascii: "/")) && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// Whether `mediaType` is `type/subtype` of token characters (RFC 6838's restricted names).
    public static func isAcceptableMediaType(_ mediaType: String) -> Bool {
        let bytes = Array(mediaType.utf8)
        guard (3...maxMediaTypeBytes).contains(bytes.count) else { return false }
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        let extra = Set("!#$&^_.+-".utf8)
        return parts.allSatisfy { part in
            part.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || extra.contains(byte)
            }
        }
    }
}
