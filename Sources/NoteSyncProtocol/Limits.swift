/// The size limits a server enforces. Served by `GET /v1/info` so clients size their batches to fit.
///
/// Every limit is a byte or item count; a request over a limit is answered with the error code named beside it.
public struct SyncLimits: Codable, Sendable, Equatable {
    /// Largest request body in bytes (`body_too_large`, 413).
    public var maxBodyBytes: Int
    /// Largest note text in UTF-8 bytes (`note_too_large`, a per-change error).
    public var maxNoteBytes: Int
    /// Most changes in one push (`batch_too_large`, 413).
    public var maxBatchChanges: Int
    /// Most notes in one pull page; larger `limit` values are clamped to it.
    public var maxPageSize: Int
    /// Page size when a pull names no `limit`.
    public var defaultPageSize: Int

    public init(
        maxBodyBytes: Int = 8 << 20,
        maxNoteBytes: Int = 256 << 10,
        maxBatchChanges: Int = 1000,
        maxPageSize: Int = 1000,
        defaultPageSize: Int = 500
    ) {
        self.maxBodyBytes = maxBodyBytes
        self.maxNoteBytes = maxNoteBytes
        self.maxBatchChanges = maxBatchChanges
        self.maxPageSize = maxPageSize
        self.defaultPageSize = defaultPageSize
    }

    public static let `default` = SyncLimits()
}

/// Rules for account credentials, shared so the client can check before sending.
public enum CredentialRules {
    /// Usernames: 3–64 characters from `a–z 0–9 . _ -`, compared case-insensitively (stored lowercased).
    public static let usernameLength = 3...64
    /// Passwords: 8–72 UTF-8 bytes without NUL (bcrypt reads at most 72 bytes and stops at a NUL byte; longer
    /// passwords and passwords holding NUL are refused, never truncated).
    public static let passwordBytes = 8...72
    /// Device names: at most ``SignInRequest/maxDeviceNameLength`` characters, none a control character.
    public static var deviceNameLength: Int { SignInRequest.maxDeviceNameLength }

    /// The username rule in words (`3–64 characters from a–z, 0–9, '.', '_' and '-', case-insensitive`): what every
    /// help text and error message says; Docs/PROTOCOL.md, OPERATIONS.md and openapi.yaml are checked against
    /// ``usernameLength`` by a test.
    public static var usernameRule: String {
        "\(usernameLength.lowerBound)–\(usernameLength.upperBound) characters from a–z, 0–9, '.', '_' and '-', case-insensitive"
    }

    /// The password rule in words (`8–72 UTF-8 bytes, without NUL characters`).
    public static var passwordRule: String {
        "\(passwordBytes.lowerBound)–\(passwordBytes.upperBound) UTF-8 bytes, without NUL characters"
    }

    /// The canonical (lowercased) username, or nil when it breaks the rules.
    ///
    /// The bytes the client sent are checked first, against ASCII `A–Z a–z 0–9 . _ -`; only then is the name
    /// lowercased (ASCII only). So no Unicode case folding can turn another character into an allowed one
    /// (U+212A KELVIN SIGN lowercases to `k`).
    public static func canonicalUsername(_ raw: String) -> String? {
        let bytes = raw.utf8
        guard usernameLength.contains(bytes.count) else { return nil }
        var lowered: [UInt8] = []
        lowered.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "-"):
                lowered.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                lowered.append(byte + 32)
            default:
                return nil
            }
        }
        return String(decoding: lowered, as: UTF8.self)
    }

    /// Whether a password is acceptable: ``passwordBytes`` UTF-8 bytes, none of them NUL.
    public static func isAcceptablePassword(_ password: String) -> Bool {
        passwordBytes.contains(password.utf8.count) && !password.utf8.contains(0)
    }

    /// Whether a device name is acceptable: at most ``deviceNameLength`` characters, no control character (C0,
    /// DEL or C1: a NUL cannot be stored in PostgreSQL text, and control characters have no place in a label or a
    /// log line).
    public static func isAcceptableDeviceName(_ name: String) -> Bool {
        name.count <= deviceNameLength && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
