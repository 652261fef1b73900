import Crypto
import Synchronization

/// Bearer tokens: `fn_` followed by 32 CSPRNG bytes in base64url without padding (46 characters in all).
///
/// The server stores only ``hash(_:)`` of a token (lowercase hex SHA-256), so a leaked database holds no usable token.
public enum SessionToken {
    /// Every token starts with this.
    public static let prefix = "fn_"
    /// Random bytes per token.
    public static let byteCount = 32
    /// Characters in a token: the prefix plus 43 base64url characters.
    public static let length = prefix.utf8.count + (byteCount * 4 + 2) / 3

    /// A new token from `randomBytes`.
    public static func make(randomBytes: RandomBytes) -> String {
        prefix + base64URL(randomBytes.bytes(byteCount))
    }

    /// Lowercase hex SHA-256 of the token's UTF-8 bytes.
    public static func hash(_ token: String) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(2 * SHA256.byteCount)
        for byte in SHA256.hash(data: Array(token.utf8)) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// Whether text has a token's shape (prefix, length, alphabet); checked before any lookup.
    public static func isWellFormed(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard utf8.count == length, token.hasPrefix(prefix) else { return false }
        return utf8.dropFirst(prefix.utf8.count).allSatisfy { byte in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: "_")
        }
    }

    /// Base64url without padding (RFC 4648 §5).
    static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
            output.append(alphabet[Int(value >> 6 & 63)])
            output.append(alphabet[Int(value & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let value = UInt32(bytes[index]) << 16
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
        } else if rest == 2 {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
            output.append(alphabet[Int(value >> 6 & 63)])
        }
        return String(decoding: output, as: UTF8.self)
    }
}

/// A source of random bytes, injected so tests can use a seeded generator (tokens must come from a CSPRNG in
/// production: ``system``).
public struct RandomBytes: Sendable {
    private let generate: @Sendable (Int) -> [UInt8]

    /// Random bytes from `generate(count)`.
    public init(_ generate: @escaping @Sendable (Int) -> [UInt8]) {
        self.generate = generate
    }

    /// `count` bytes.
    public func bytes(_ count: Int) -> [UInt8] { generate(count) }

    /// The system CSPRNG (`SystemRandomNumberGenerator`: getrandom(2) on Linux).
    public static let system = RandomBytes { count in
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// Bytes from a generator (e.g. a seeded one in tests), shared under a lock.
    public static func using<G: RandomNumberGenerator & Sendable>(_ generator: G) -> RandomBytes {
        let shared = Mutex(generator)
        return RandomBytes { count in
            shared.withLock { generator in (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) } }
        }
    }
}
