import MiniFlake

/// Decides what a sign-in changes locally once the server accepted the credentials. Pure: a function of values.
///
/// The sync engine stores the new session in one transaction, in this order: when ``Plan/reconciling``, forget
/// the account state (token, account, cursor, every server ID and version); switch the base texts when
/// ``Plan/bases`` says so; store the session; when ``Plan/reconciling``, queue every note ``queues(_:)`` selects.
/// Then it revokes ``Plan/revoke`` and syncs, pulling first when ``Plan/reconciling``.
///
/// Rules:
/// - The same account (same account ID and server URL, and still signed in) only replaces the token. Anything
///   else (another account, another URL, or signed out) reconciles: the device's notes are matched against the
///   account's by (client ID, origin), by the first pull and then by the server when pushed.
/// - Base texts belong to one account, told apart by its server-minted ID alone (several daemons or names serve
///   one account). A base text is what was last synced with that account: the server merges a pushed edit against
///   it. Against another account's note it would make that merge drop lines, and without any base every note
///   edited elsewhere comes back as a conflict copy. So reconciling with an account other than the bases' sets
///   the current bases aside and takes the new account's back (none for an account never signed in to here).
/// - The replaced session, when there was one, is revoked on its server (best effort).
/// - Queueing (``queues(_:)``): what the account may not have. Notes changed since they were last synced with it
///   (or never synced with it), tombstones, and unacknowledged snapshots are queued. A note whose text is still
///   its base for this account is not: the sign-in's first pull finds it by (client ID, origin) and brings the
///   account's version (a later edit, or a delete from another device); if the pull does not return it, the push
///   that follows sends it after all (``OutboxPlanner/requeues(_:)``). A tombstone never synced anywhere is
///   never queued. Queueing clears the note's push error: the new account may take what the old one refused.
enum SignInPlanner {
    /// What a sign-in reads of the stored session.
    struct Stored: Sendable, Equatable {
        var token: String?
        var accountID: FlakeID?
        var serverURL: String?
        /// The account whose base texts the notes hold.
        var baseAccountID: FlakeID?
    }

    /// A session to revoke.
    struct Session: Sendable, Equatable {
        var token: String
        var serverURL: String
    }

    /// Which bases to swap.
    struct BaseSwitch: Sendable, Equatable {
        /// The account whose bases the notes hold now, set aside (nil: none to keep).
        var setAside: FlakeID?
        /// The account whose bases are taken back.
        var takeBack: FlakeID
    }

    /// What a sign-in does.
    struct Plan: Sendable, Equatable {
        /// Forget the account state, queue the notes, pull first: another account (or the first sign-in since
        /// sign-out).
        var reconciling: Bool
        /// Nil when the bases stay.
        var bases: BaseSwitch?
        /// The replaced session.
        var revoke: Session?
    }

    /// The plan for signing in to `accountID` on `serverURL` (normalized) over the `stored` session.
    static func plan(stored: Stored, accountID: FlakeID, serverURL: String) -> Plan {
        let sameAccount = stored.token != nil && stored.accountID == accountID && stored.serverURL == serverURL
        let bases =
            sameAccount || stored.baseAccountID == accountID
            ? nil : BaseSwitch(setAside: stored.baseAccountID, takeBack: accountID)
        var revoke: Session?
        if let token = stored.token, let server = stored.serverURL { revoke = Session(token: token, serverURL: server) }
        return Plan(reconciling: !sameAccount, bases: bases, revoke: revoke)
    }

    /// What the queueing rule reads of a local note, after the account state is forgotten and the bases switched.
    struct NoteState: Sendable, Equatable, Hashable {
        var isDirty: Bool
        var isDeleted: Bool
        var hasBaseText: Bool
        var hasServerID: Bool
        /// The text is not the base text byte for byte (true when there is no base).
        var textDiffersFromBase: Bool
        /// An outbox snapshot of the note waits for its answer.
        var hasSnapshot: Bool
    }

    /// Whether a reconciling sign-in queues the note (marks it dirty, clears its push error).
    static func queues(_ note: NoteState) -> Bool {
        let neverSyncedTombstone = note.isDeleted && !note.hasBaseText && !note.hasServerID && !note.hasSnapshot
        if neverSyncedTombstone { return false }
        return note.isDirty || note.isDeleted || !note.hasBaseText || note.textDiffersFromBase || note.hasSnapshot
    }
}
