import MiniFlake
import NoteSyncProtocol

/// Invite codes (sign-up policy `invite`) in a store: `notesyncd invites` makes, lists and revokes them, and a sign-up
/// consumes one use of a code in the transaction that inserts the account. Both stores implement it (the conformance
/// suite runs it on both).
///
/// A store holds only a code's hash (``InviteCodes/hash(_:)``), never the code.
public protocol InviteStore: NoteStore {
    /// Inserts an invite of `uses` uses (at least 1) and returns it with the ID the store gave it (1, 2, 3, ...: small,
    /// so that an operator can type it).
    func createInvite(codeHash: String, note: String?, uses: Int, expiresAt: Int64?, createdAt: Int64) async throws -> InviteRecord
    /// Every invite, oldest first, revoked and used-up ones included.
    func invites() async throws -> [InviteRecord]
    /// The invite whose code hashes to `codeHash`, whatever its state.
    func invite(byCodeHash codeHash: String) async throws -> InviteRecord?
    /// Revokes an invite at `revokedAt` (Unix milliseconds): its code stops working at once. Revoking a revoked invite
    /// keeps its first time. Returns false when there is no such invite.
    func revokeInvite(id: Int64, revokedAt: Int64) async throws -> Bool
    /// Inserts an account and consumes one use of the invite whose code hashes to `codeHash`, in one transaction: of
    /// two sign-ups racing for an invite's last use, exactly one gets it. A sign-up that fails (the username is taken)
    /// consumes nothing.
    ///
    /// - Throws: ``NoteStoreError/inviteNotUsable`` when the invite is unknown, used up, expired at `now` or revoked;
    ///   ``NoteStoreError/usernameTaken``.
    func createAccount(_ account: AccountRecord, consumingInvite codeHash: String, now: Int64) async throws
}

/// An invite as the store keeps it.
public struct InviteRecord: Sendable, Equatable {
    /// Positive; given by the store.
    public var id: Int64
    /// Lowercase hex SHA-256 of the canonical code.
    public var codeHash: String
    /// The operator's note (who it is for).
    public var note: String?
    /// Uses it was made with, at least 1.
    public var usesTotal: Int
    /// Uses left, 0...usesTotal.
    public var usesLeft: Int
    /// Unix milliseconds; the code stops working at this time. Nil: never expires.
    public var expiresAt: Int64?
    /// Unix milliseconds.
    public var createdAt: Int64
    /// Unix milliseconds; nil unless revoked.
    public var revokedAt: Int64?

    /// Whether a sign-up at `now` may use it: not revoked, a use left, not expired.
    public func isUsable(at now: Int64) -> Bool {
        revokedAt == nil && usesLeft > 0 && (expiresAt.map { now < $0 } ?? true)
    }
}

/// Making and hashing invite codes (their form is ``InviteCode``, in the wire module).
public enum InviteCodes {
    /// A new code in canonical form: ``InviteCode/length`` characters, each from one random byte's low 5 bits
    /// (uniform: 256 is a multiple of 32), so 140 random bits from `randomBytes` (the system CSPRNG in production).
    public static func make(randomBytes: RandomBytes) -> String {
        let bytes = randomBytes.bytes(InviteCode.length)
        return String(decoding: bytes.map { InviteCode.alphabet[Int($0 & 31)] }, as: UTF8.self)
    }

    /// What a store keeps of a canonical code: lowercase hex SHA-256, like a session token's (``SessionToken/hash(_:)``;
    /// a random code of 140 bits needs no slow hash).
    public static func hash(_ canonical: String) -> String {
        SessionToken.hash(canonical)
    }

    /// The most uses one invite may have.
    public static let maxUses = 10_000
    /// The most characters of an invite's note.
    public static let maxNoteLength = 200
}
