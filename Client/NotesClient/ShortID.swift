import MiniFlake

/// Short note IDs for people: the shortest prefix of the 13-character base32 client ID that is unique among the
/// local notes, at least ``minimumLength`` characters.
///
/// Two local notes share a client ID only after a rare collision between devices (same instance number, same
/// millisecond); such notes are shown with the full ID, `-` and the last 4 base32 characters of their origin.
/// ``Prefix`` reads what people type back: any unique prefix, case-insensitive, with Crockford's aliases.
public enum ShortID {
    /// The shortest prefix shown.
    public static let minimumLength = 8
    /// Characters of the origin shown after a colliding client ID.
    public static let originSuffixLength = 4

    /// The display ID of every note in `keys`, which must hold every local note (deleted ones too) so that the
    /// prefixes are unique among all of them. Fastest when `keys` is sorted by client ID.
    public static func assign(_ keys: [(id: Int64, clientID: FlakeID, origin: FlakeID)]) -> [Int64: String] {
        let isSorted = zip(keys, keys.dropFirst()).allSatisfy { $0.clientID <= $1.clientID }
        let sorted = isSorted ? keys : keys.sorted { $0.clientID < $1.clientID }
        var result: [Int64: String] = [:]
        result.reserveCapacity(sorted.count)
        for index in sorted.indices {
            let entry = sorted[index]
            var shared = 0
            var collides = false
            func compare(_ other: FlakeID) {
                if other == entry.clientID {
                    collides = true
                } else {
                    shared = max(shared, commonPrefix(entry.clientID, other))
                }
            }
            if index > sorted.startIndex { compare(sorted[index - 1].clientID) }
            if index + 1 < sorted.endIndex { compare(sorted[index + 1].clientID) }
            result[entry.id] = display(entry.clientID, shared: shared, collides: collides, origin: entry.origin)
        }
        return result
    }

    /// The display form given the longest prefix shared with a neighbour and whether the client ID collides.
    static func display(_ clientID: FlakeID, shared: Int, collides: Bool, origin: FlakeID) -> String {
        let code = clientID.base32
        if collides {
            return code + "-" + String(origin.base32.utf8.suffix(originSuffixLength))!
        }
        let length = min(13, max(minimumLength, shared + 1))
        return length == 13 ? code : String(code.utf8.prefix(length))!
    }

    /// How many leading base32 characters two different IDs share. The 13 characters hold 65 bits whose top bit
    /// is always 0, so the equal leading bits are one more than the XOR's leading zeros.
    static func commonPrefix(_ a: FlakeID, _ b: FlakeID) -> Int {
        let difference = UInt64(bitPattern: a.rawValue ^ b.rawValue)
        guard difference != 0 else { return 13 }
        return (1 + difference.leadingZeroBitCount) / 5
    }

    /// What a person typed to name a note, parsed.
    public struct Prefix: Sendable, Equatable {
        /// The normalized base32 prefix (uppercase, aliases resolved), 1–13 characters.
        public var code: String
        /// The inclusive range of client IDs whose base32 form starts with `code` (empty when none can).
        public var range: ClosedRange<Int64>?
        /// The origin suffix after `-`, normalized, when given.
        public var originSuffix: String?
        /// A full decimal client ID, when the text was one (14 or more digits).
        public var decimal: FlakeID?

        /// Parses `text`; nil when it is not a base32 prefix (optionally with `-ORIGIN`) nor a decimal ID.
        public init?(_ text: String) {
            let trimmed = text.trimmingWhitespace()
            let parts = trimmed.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = parts.first, !first.isEmpty, first.utf8.count <= 13 || parts.count == 1 else { return nil }
            if parts.count == 1, first.utf8.count >= 14, first.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
                guard let id = FlakeID(String(first)) else { return nil }
                decimal = id
                code = id.base32
                range = id.rawValue...id.rawValue
                originSuffix = nil
                return
            }
            guard let normalized = Self.normalize(first) else { return nil }
            code = normalized
            decimal = nil
            if parts.count == 2 {
                guard let suffix = Self.normalize(parts[1]), suffix.utf8.count <= 13 else { return nil }
                originSuffix = suffix
            } else {
                originSuffix = nil
            }
            range = Self.range(of: Array(normalized.utf8))
        }

        /// Uppercase base32 with Crockford's aliases resolved; nil for other characters or an empty string.
        static func normalize(_ text: Substring) -> String? {
            guard !text.isEmpty, text.utf8.count <= 13 else { return nil }
            var out: [UInt8] = []
            for byte in text.utf8 {
                guard let value = base32Value(byte) else { return nil }
                out.append(alphabet[Int(value)])
            }
            return String(decoding: out, as: UTF8.self)
        }

        static let alphabet: [UInt8] = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

        static func base32Value(_ byte: UInt8) -> UInt8? {
            var upper = byte
            if upper >= 97 && upper <= 122 { upper -= 32 }
            switch upper {
            case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
            case UInt8(ascii: "O"): return 0
            default: return alphabet.firstIndex(of: upper).map { UInt8($0) }
            }
        }

        /// The client IDs whose 13-character form starts with `code` (nil when none can: the first character of a
        /// positive 64-bit ID is 0–7).
        static func range(of code: [UInt8]) -> ClosedRange<Int64>? {
            guard let first = code.first, let firstDigit = base32Value(first), firstDigit <= 7 else { return nil }
            var low: UInt64 = 0
            var high: UInt64 = 0
            for index in 0..<13 {
                if index < code.count {
                    let digit = UInt64(base32Value(code[index]) ?? 0)
                    low = low << 5 | digit
                    high = high << 5 | digit
                } else {
                    low <<= 5
                    high = high << 5 | 31
                }
            }
            let lowValue = max(Int64(bitPattern: low), 1)
            let highValue = Int64(bitPattern: high)
            guard lowValue <= highValue else { return nil }
            return lowValue...highValue
        }

        /// Whether an origin matches the suffix (when one was given).
        public func matches(origin: FlakeID) -> Bool {
            guard let originSuffix else { return true }
            return origin.base32.hasSuffix(originSuffix)
        }
    }
}

extension StringProtocol {
    /// The text without whitespace at either end.
    func trimmingWhitespace() -> SubSequence {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}
