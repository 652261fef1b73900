/// What happened at one step on one lane, as the report's timeline draws it (a glyph, its detail on hover).
public struct SimEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case create, edit, delete, sync, signIn, signOut, clockJump, collide, restart, fault, conflict, merge, error, violation,
            revoke, deleteAccount, watch
    }

    public var step: Int
    /// The device, or nil for the server.
    public var device: Int?
    public var kind: Kind
    public var detail: String
}
