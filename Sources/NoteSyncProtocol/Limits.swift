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
    /// Passwords: 8–72 UTF-8 bytes (bcrypt reads at most 72 bytes; longer ones are refused, not truncated).
    public static let passwordBytes = 8...72

    /// The canonical (lowercased) username, or nil when it breaks the rules.
    public static func canonicalUsername(_ raw: String) -> String? {
        let lowered = raw.lowercased()
        guard usernameLength.contains(lowered.count) else { return nil }
        let allowed = lowered.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "0" && s <= "9") || s == "." || s == "_" || s == "-"
        }
        return allowed ? lowered : nil
    }

    /// Whether a password is acceptable.
    public static func isAcceptablePassword(_ password: String) -> Bool {
        passwordBytes.contains(password.utf8.count)
    }
}
