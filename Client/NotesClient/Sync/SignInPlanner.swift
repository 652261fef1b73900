import MiniFlake

/// Decides what a sign-in changes locally once the server accepted the credentials. Pure: a function of values.
///
/// The sync engine stores the new session in one transaction, in this order: when ``Plan/reconciling``, forget
/// the account state (token, account, cursor, every server ID and version); execute ``Plan/owners`` (whose notes
/// are on show, see ``OwnerPlanner``); store the session; when ``Plan/reconciling``, queue every note on show that
/// ``queues(_:)`` selects. Then it revokes ``Plan/revoke`` and syncs, pulling first when ``Plan/reconciling``.
///
/// Rules:
/// - The same account (same account ID and server URL, and still signed in) only replaces the token. Anything
///   else (another account, another URL, or signed out) reconciles: the account's notes on this device are
///   matched against the account's by (client ID, origin), by the first pull and then by the server when pushed.
/// - Resuming (issue 30): an account that kept its pull cursor here (``Stored/keptCursor``: its last session on
///   this device ended, and its notes were not wiped since) still holds every note it pulled, with their server IDs,
///   versions and bases, and every change made here since is dirty. Its sign-in pulls from that cursor, so only
///   what changed meanwhile comes down, and queues nothing: what the account may not have is already pending (and a
///   note without a server ID is requeued by the push, ``OutboxPlanner/requeues(_:)``). A cursor the server no
///   longer knows (`invalid_cursor`: its store was restored from an older backup) makes that pull start over, which
///   matches every note by server ID, else by (client ID, origin).
/// - Owners (``OwnerPlanner``): only the account's own notes (and the unowned ones the user carries into it) are
///   on show, so only they are queued, pushed or matched; the previous account's notes are set aside (or wiped)
///   and come back when it signs in again. A note's base text is always its owner's: what was last synced with
///   that account, against which the server merges a pushed edit.
/// - The replaced session, when there was one, is revoked on its server (best effort).
/// - Queueing (``queues(_:)``): what the account may not have. Notes changed since they were last synced with it
///   (or never synced with it: text, tags or flags), tombstones, and unacknowledged snapshots are queued. A note
///   whose text, tags and flags are still their bases is not: the sign-in's first pull finds it by (client ID, origin) and brings the account's version
///   (a later edit, or a delete from another device); if the pull does not return it, the push that follows sends
///   it after all (``OutboxPlanner/requeues(_:)``). A tombstone never synced anywhere is never queued. Queueing
///   clears the note's push error.
enum SignInPlanner {
    /// What a sign-in reads of the stored session.
    struct Stored: Sendable, Equatable {
        var token: String?
        var accountID: FlakeID?
        var serverURL: String?
        /// The account whose notes are on show (the signed-in one, else the last one; nil before any sign-in).
        var shownAccountID: FlakeID?
        /// The pull cursor the account signing in kept here when its last session ended (nil: none).
        var keptCursor: String? = nil
    }

    /// A session to revoke.
    struct Session: Sendable, Equatable {
        var token: String
        var serverURL: String
    }

    /// What a sign-in does.
    struct Plan: Sendable, Equatable {
        /// Forget the account state, queue the notes (unless resuming), pull first: another account (or the first
        /// sign-in since sign-out).
        var reconciling: Bool
        /// When reconciling an account that kept its cursor: the cursor its first pull starts from; nothing is queued.
        var resumeCursor: String? = nil
        /// Whose notes are on show afterwards, and what happens to the others.
        var owners: OwnerPlanner.Plan
        /// The replaced session.
        var revoke: Session?
    }

    /// The plan for signing in to `accountID` on `serverURL` (normalized) over the `stored` session; `unowned` and
    /// `wipe` are the user's choices (see ``OwnerPlanner/signIn(shown:account:unowned:wipe:)``).
    static func plan(
        stored: Stored, accountID: FlakeID, serverURL: String, unowned: UnownedNotes = .keepAside, wipe: Bool = false
    ) -> Plan {
        let sameAccount = stored.token != nil && stored.accountID == accountID && stored.serverURL == serverURL
        var revoke: Session?
        if let token = stored.token, let server = stored.serverURL { revoke = Session(token: token, serverURL: server) }
        let owners = OwnerPlanner.signIn(shown: stored.shownAccountID, account: accountID, unowned: unowned, wipe: wipe)
        return Plan(
            reconciling: !sameAccount, resumeCursor: sameAccount ? nil : stored.keptCursor, owners: owners, revoke: revoke)
    }

    /// What the queueing rule reads of a local note on show, after the account state is forgotten and the owners'
    /// plan executed.
    struct NoteState: Sendable, Equatable, Hashable {
        var isDirty: Bool
        var isDeleted: Bool
        var hasBaseText: Bool
        var hasServerID: Bool
        /// The text is not the base text byte for byte (true when there is no base), or the tags or flags are not
        /// their bases.
        var differsFromBase: Bool
        /// An outbox snapshot of the note waits for its answer.
        var hasSnapshot: Bool
    }

    /// Whether a reconciling sign-in queues the note (marks it dirty, clears its push error).
    static func queues(_ note: NoteState) -> Bool {
        let neverSyncedTombstone = note.isDeleted && !note.hasBaseText && !note.hasServerID && !note.hasSnapshot
        if neverSyncedTombstone { return false }
        return note.isDirty || note.isDeleted || !note.hasBaseText || note.differsFromBase || note.hasSnapshot
    }
}
