import MiniFlake

/// The account this installation is signed in to.
public struct AccountInfo: Sendable, Equatable {
    public var accountID: FlakeID
    public var username: String
    public var serverURL: String
}

/// What ``NotesClient/signOut(wipe:)`` did.
public struct SignOutReport: Sendable, Equatable {
    /// Whether the server revoked the token (false when it was unreachable; the token is forgotten anyway).
    public var revoked: Bool
    /// Notes with unsynced changes at sign-out: kept on this device, they sync at the next sign-in (or were
    /// deleted when `wipe` was asked).
    public var pending: Int
    /// Notes deleted from this device (`wipe`: the account's and the unowned ones, live ones), 0 otherwise.
    public var wiped: Int
    /// The account whose notes stay on show (nil: never signed in).
    public var account: AccountName?
    /// The account's live notes kept on this device (0 with `wipe`).
    public var kept = 0
    /// Live notes without an owner (written while signed out, never synced), on show again (0 after `wipe`).
    public var unowned = 0
}

/// What ``NotesClient/signIn(server:username:password:progress:)`` did.
public struct SignInReport: Sendable {
    public var account: AccountInfo
    /// Whether local notes were queued to be reconciled with this account (a new account, or the first sign-in
    /// since sign-out).
    public var reconciling: Bool
    /// Whose notes are on show now, and what happened to the others.
    public var owners: OwnerReport
    /// The sync that followed the sign-in; a failure here leaves the installation signed in with its notes
    /// queued, and the next `sync()` finishes the job.
    public var sync: Result<SyncReport, NotesError>
    /// A new end-to-end encrypted account's recovery key (a sign-up with `encrypted`), in its human form: show it
    /// once; nothing keeps it. Nil otherwise.
    public var recoveryKey: String? = nil
    /// The sign-in set an empty plaintext account (one its server's operator made) up as end-to-end encrypted; its
    /// recovery key is ``recoveryKey``.
    public var setUpEncryption = false
}

/// What a sign-in does with the notes written while signed out and never synced (no owner, see ``OwnerPlanner``).
public enum UnownedNotes: String, Sendable, Equatable {
    /// They join the account signing in and are pushed to it.
    case carry
    /// They stay without an owner, set aside while that account is signed in; they come back at sign-out and
    /// are offered again at the next sign-in.
    case keepAside = "keep-aside"
}

/// What a sign-in did to the notes on this device, by owner (see ``OwnerPlanner``).
public struct OwnerReport: Sendable, Equatable {
    /// The account whose notes were on show before (nil: none, or the same account again).
    public var previous: AccountName?
    /// The previous account's notes set aside (live ones): hidden, kept, back when it signs in again.
    public var setAside = 0
    /// The previous account's notes deleted from this device (`wipe`; live ones).
    public var wiped = 0
    /// This account's notes that were set aside and are on show again (live ones).
    public var restored = 0
    /// Notes without an owner that joined this account (live ones).
    public var carried = 0
    /// Notes without an owner kept aside (live ones).
    public var keptAside = 0
    /// Attachments left out of the notes carried into an end-to-end encrypted account: their files must be sealed
    /// for it from this device's chunk cache, which does not hold them whole (``ChunkCache/resealed(_:for:)``).
    public var attachmentsDropped = 0
    /// Notes that became new notes of this device (a new client ID) because the account already held their (client
    /// ID, origin) with another text: see ``RekeyedNote``.
    public var rekeyed: [RekeyedNote] = []

    public init() {}
}

/// A note of no account that became a new note of this device, with a fresh client ID and this installation's
/// origin, because the account it joined (or the notes of no account) already held a note with its (client ID,
/// origin) and another text: after an account deletion, another device may have carried it there first. Nothing is
/// lost; the two are two notes.
public struct RekeyedNote: Sendable, Equatable {
    public var oldClientID: FlakeID
    public var oldOrigin: FlakeID
    public var clientID: FlakeID
    public var origin: FlakeID
}

/// What `wipe` on a sign-in to another account deletes from this device (see ``NotesClient/wipePreview(server:username:)``).
public struct WipePreview: Sendable, Equatable {
    public var account: AccountName
    /// Live notes of `account` on show.
    public var notes: Int
    /// Those of them (or deleted ones) with changes no server has.
    public var unsynced: Int
}

/// An account this device has signed in to: its server-minted ID and, when known, its username and server.
public struct AccountName: Sendable, Equatable {
    public var accountID: FlakeID
    public var username: String?
    public var serverURL: String?

    /// The username, else the account ID.
    public var display: String { username ?? "account \(accountID)" }
}
