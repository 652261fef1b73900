import MiniFlake

/// Who owns which local note, and what a sign-in or a sign-out does to the owners (issue 16: accounts on one
/// device). Pure: a function of values; the sync engine executes the plan in the sign-in's transaction.
///
/// Rules:
/// - Every local note has an owner: the account it was created under or synced with, by its server-minted ID
///   (several daemons or URLs serve one account), or none for a note written while signed out and never synced.
///   A note created while signed in belongs to that account; a pulled note to the account it came from.
/// - The device shows one account's notes (``Plan/restore``): the signed-in account's, else the last one's, plus
///   the unowned notes while signed out. The others are set aside: kept, hidden, never read by a sync.
/// - Every statement a sync runs reads only the notes on show, so a note is only ever pushed to its owner, and a
///   note pulled from an account is found among (or added to) that account's notes only.
/// - Signing in to another account sets the shown account's notes aside (or, with `wipe`, deletes them from this
///   device) and brings the new account's back. Signing in to the same account again changes no owner.
/// - Unowned notes join the account signing in only when the user says so (``UnownedNotes/carry``); otherwise
///   they are set aside while it is signed in and come back at sign-out (``afterSignOut``).
/// - A note reaches another account only as a copy (``NotesClient/copy(_:to:)``): a new note with a new client ID,
///   owned by that account.
enum OwnerPlanner {
    /// What a sign-in does to the owners.
    struct Plan: Sendable, Equatable {
        /// The account whose notes are set aside (nil: none).
        var setAside: FlakeID?
        /// The account whose notes are deleted from this device instead of set aside (nil: none).
        var wipe: FlakeID?
        /// The account whose notes are on show afterwards: the one signing in.
        var restore: FlakeID
        /// What happens to the notes without an owner.
        var unowned: UnownedNotes
    }

    /// The plan for signing in to `account` while `shown`'s notes are on show (nil: none, a new installation).
    static func signIn(shown: FlakeID?, account: FlakeID, unowned: UnownedNotes, wipe: Bool) -> Plan {
        let previous = shown == account ? nil : shown
        return Plan(
            setAside: wipe ? nil : previous, wipe: wipe ? previous : nil, restore: account, unowned: unowned)
    }

    /// Whether a sign-out brings the unowned notes back on show: always (the device shows the last account's
    /// notes and the unowned ones while signed out).
    static let afterSignOut = true
}
