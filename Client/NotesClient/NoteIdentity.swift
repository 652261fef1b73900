import MiniFlake

/// Who a note is, without its text: see ``NotesClient/identities()``.
public struct NoteIdentity: Sendable, Equatable {
    /// The local row ID (``LocalNote/id``).
    public let id: Int64
    public let clientID: FlakeID
    public let origin: FlakeID
    /// The server's ID in the signed-in account, when known.
    public let serverID: FlakeID?
    public let isDeleted: Bool
    /// The account the note belongs to (nil: written while signed out, never synced; see ``OwnerPlanner``).
    public var owner: FlakeID? = nil
    /// Set aside: another account's note (or an unowned one while an account is signed in), hidden.
    public var isSetAside = false
}

/// Every local note's identity (set-aside ones included), the signed-in account and the pull cursor, from one read: see
/// ``NotesClient/identities()``.
public struct NoteIdentities: Sendable, Equatable {
    /// Tombstones included, in local ID order.
    public let notes: [NoteIdentity]
    /// Nil when signed out.
    public let account: AccountInfo?
    /// The pull cursor of the signed-in account, nil before the first pull.
    public let cursor: String?
}
