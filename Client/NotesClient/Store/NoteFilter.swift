import NoteSyncProtocol

/// The planners' rules the store runs over many notes at once, each as one SQL condition on a row of `notes`, named
/// after the rule it carries out and spelled only here: every statement interpolates these (`WHERE dirty AND
/// \(NoteFilter.onShow)`), and `StoreRuleTests` checks each against its rule.
///
/// The conditions name their columns without a table: statements that join `notes` with `outbox`, `trash` or
/// `notes_search` use only ``onShow`` and ``setAside``, whose column (`aside`) only `notes` has.
enum NoteFilter {
    // MARK: - Owners (OwnerPlanner)

    /// The note is on show (``OwnerPlanner``: the shown account's, and the unowned ones while signed out). Every
    /// statement on notes reads only these, so a note is only ever pushed to its owner; only the owners' own
    /// statements (setting aside, bringing back, counting per account, disowning) read the others.
    static let onShow = "NOT aside"

    /// The note is set aside (``OwnerPlanner``: another account's, or unowned while an account is signed in).
    static let setAside = "aside"

    /// A row of `note_tags` whose note is on show: only the notes set aside (index `notes_aside`, usually none) are
    /// looked up, so counting tags does not read the notes on show.
    static let tagOfNoteOnShow = "note_id NOT IN (SELECT id FROM notes WHERE \(setAside))"

    /// The note on show that has a server ID, taking that ID as its one argument. Server IDs belong to the notes'
    /// owner (kept while it is signed out or set aside, and unique per owner only: two servers may mint the same
    /// one), and the notes on show that have one are the shown account's (``OwnerPlanner``), so a lookup names that
    /// owner (the index `notes_owner_server_id`).
    static let onShowWithServerID = "owner_account_id = (SELECT last_account_id FROM settings WHERE id = 1) AND server_id = ?"

    // MARK: - Outbox (OutboxPlanner)

    /// An outbox snapshot of the note waits for its answer (``OutboxPlanner/NoteState/hasSnapshot``).
    static let hasSnapshot = "id IN (SELECT note_id FROM outbox)"

    /// No outbox snapshot of the note waits for its answer.
    static let hasNoSnapshot = "id NOT IN (SELECT note_id FROM outbox)"

    /// ``OutboxPlanner/requeues(_:)``: a clean live note without a server ID. (The same terms as the partial index
    /// `notes_unmatched`, which SQLite uses only when the statement spells each of them.)
    static let requeues = "server_id IS NULL AND NOT dirty AND NOT deleted"

    /// ``OutboxPlanner/settles(_:)``: a dirty tombstone never synced anywhere.
    static let settles = "dirty AND deleted AND base_text IS NULL AND server_id IS NULL AND \(hasNoSnapshot)"

    /// ``OutboxPlanner/isPending(_:)``: dirty, and not refused until edited.
    static let isPending = "dirty AND push_error IS NULL"

    /// ``OutboxPlanner/needsSnapshot(_:)``: pending, and no snapshot in flight.
    static let needsSnapshot = "\(isPending) AND \(hasNoSnapshot)"

    /// The server refused the note's last push (``LocalNote/pushError``).
    static let isRefused = "push_error IS NOT NULL"

    /// ``OutboxPlanner/retriesAtEverySync(_:)``: refused for a reason every sync tries again (the account's quota).
    static let retriesAtEverySync =
        "push_error IN (" + OutboxPlanner.retriedAtEverySync.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")"
}
