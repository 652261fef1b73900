import MiniFlake

/// What the operator commands (`notesyncd users`, `check`, `stats`) need from a store beyond ``NoteStore``: both
/// stores implement it and the conformance suite runs it on both.
///
/// Every method is one transaction. Methods that change an account return false when it does not exist.
public protocol OperatorStore: InviteStore {
    /// Every account, by username, with its counts.
    func accountSummaries() async throws -> [AccountSummary]

    /// Replaces the account's password hash and deletes all its sessions, in one transaction: every device must sign
    /// in again with the new password.
    func resetPassword(accountID: FlakeID, passwordHash: String) async throws -> Bool

    /// Disables the account at `disabledAt` (Unix milliseconds) and deletes its sessions in one transaction, or
    /// enables it again with nil. Disabling a disabled account keeps its first time.
    func setDisabled(accountID: FlakeID, disabledAt: Int64?) async throws -> Bool

    /// The store's own invariants, checked in one snapshot: one human line per problem, empty when consistent.
    ///
    /// - One note per (account, client ID, origin), and one per (account, change sequence).
    /// - Every note's change sequence is 1...the account's change sequence; every version at least 1.
    /// - Every ID positive (accounts, sessions, notes, their client IDs and origins, conflict links); every session,
    ///   note and applied edit belongs to an existing account; a conflict copy names a note of its own account.
    /// - Every kept version belongs to a note of its account, numbered 1...the note's version; a kept version with the
    ///   note's own number agrees with it on whether it is deleted.
    /// - The accounts' running totals (notes, text, replay and history bytes) equal what they count.
    /// - SQLite also runs `PRAGMA integrity_check` and `PRAGMA foreign_key_check`.
    func checkInvariants() async throws -> [String]

    /// Counts and sizes, for `notesyncd stats` and the metrics endpoint.
    func statistics() async throws -> StoreStatistics
}

/// One account as `notesyncd users list` shows it.
public struct AccountSummary: Sendable, Equatable, Codable {
    public var id: FlakeID
    public var username: String
    /// Unix milliseconds.
    public var createdAt: Int64
    /// Unix milliseconds, nil while enabled.
    public var disabledAt: Int64?
    /// Notes that are not tombstones.
    public var notes: Int
    /// Signed-in devices.
    public var sessions: Int
}

/// The store's counts and size.
public struct StoreStatistics: Sendable, Equatable, Codable {
    public var accounts: Int
    public var disabledAccounts: Int
    public var sessions: Int
    /// Notes that are not tombstones.
    public var notes: Int
    public var tombstones: Int
    /// UTF-8 bytes of every note's text: the sum of the accounts' quota totals (kept by every push; `check` verifies
    /// them), so a metrics scrape never reads every note's text.
    public var textBytes: Int64
    /// UTF-8 bytes of the texts applied edits keep for replays: the sum of the accounts' `replay_text_bytes`.
    public var replayTextBytes: Int64
    /// Applied edits kept for replays (pruned by age).
    public var appliedEdits: Int
    /// Versions of notes kept in the history (pruned by age, `--history-days`).
    public var noteVersions: Int
    /// UTF-8 bytes of the kept versions' texts: the sum of the accounts' `history_bytes`.
    public var historyBytes: Int64
    /// The database's size on disk in bytes: SQLite's file and its WAL; PostgreSQL's `pg_database_size`.
    public var databaseBytes: Int64
    /// Attachment chunks stored (``ChunkStore/chunkStatistics()``; `notesyncd stats` fills it in).
    public var chunks: Int = 0
    /// Their bytes (with SQLite, in files beside the database: not in ``databaseBytes``).
    public var chunkBytes: Int64 = 0
    /// Accounts by encryption state (``EncryptionState``'s raw values), the plaintext ones included; absent from
    /// the JSON of older releases.
    public var encryption: [String: Int]?
    /// Notes the converting accounts still hold in the clear (``EncryptionState/converting``); absent from the JSON
    /// of older releases.
    public var plaintextNotes: Int?

    public init(
        accounts: Int, disabledAccounts: Int, sessions: Int, notes: Int, tombstones: Int, textBytes: Int64,
        replayTextBytes: Int64 = 0, appliedEdits: Int, noteVersions: Int = 0, historyBytes: Int64 = 0, databaseBytes: Int64,
        encryption: [String: Int]? = nil, plaintextNotes: Int? = nil
    ) {
        self.encryption = encryption
        self.plaintextNotes = plaintextNotes
        self.noteVersions = noteVersions
        self.historyBytes = historyBytes
        self.replayTextBytes = replayTextBytes
        self.accounts = accounts
        self.disabledAccounts = disabledAccounts
        self.sessions = sessions
        self.notes = notes
        self.tombstones = tombstones
        self.textBytes = textBytes
        self.appliedEdits = appliedEdits
        self.databaseBytes = databaseBytes
    }
}

/// The invariant queries both stores run (standard SQL that SQLite and PostgreSQL read alike). Each selects one text
/// column per problem found.
enum InvariantQueries {
    /// `(label, SQL)` pairs; the SQL returns one row with a describing text per problem (at most 20 each).
    static let all: [(String, String)] = [
        (
            "encryption state",
            """
            SELECT 'account ' || a.id || ' (' || a.username || '): encryption ' || a.encryption || ' at key generation '
                   || a.key_generation || CASE WHEN k.account_id IS NULL THEN ' without keys' ELSE ' with keys' END
            FROM accounts a LEFT JOIN account_keys k ON k.account_id = a.id
            WHERE a.encryption NOT IN ('plaintext', 'converting', 'encrypted', 'reset')
               OR (a.encryption = 'plaintext') <> (k.account_id IS NULL)
               OR (a.encryption = 'plaintext') <> (a.key_generation = 0)
            LIMIT 20
            """
        ),
        (
            // A conversion (``EncryptionState/converting``) marks notes and versions plaintext and finishes when none
            // is left: a mark outside a converting account, or a converting account with nothing left, is a fault.
            "conversion state",
            """
            SELECT 'account ' || a.id || ' (' || a.username || '): ' || a.encryption || ' with '
                   || (SELECT COUNT(*) FROM notes n WHERE n.account_id = a.id AND n.plaintext = \(plaintextTrue)) || ' notes and '
                   || (SELECT COUNT(*) FROM note_versions v WHERE v.account_id = a.id AND v.plaintext = \(plaintextTrue))
                   || ' history versions marked plaintext'
            FROM accounts a
            WHERE (a.encryption = 'converting')
                  <> EXISTS (SELECT 1 FROM notes n WHERE n.account_id = a.id AND n.plaintext = \(plaintextTrue))
               OR (a.encryption <> 'converting'
                   AND EXISTS (SELECT 1 FROM note_versions v WHERE v.account_id = a.id AND v.plaintext = \(plaintextTrue)))
            LIMIT 20
            """
        ),
        (
            "duplicate note key",
            """
            SELECT 'account ' || account_id || ': ' || COUNT(*) || ' notes with client ID ' || client_id || ' and origin ' || origin
            FROM notes GROUP BY account_id, client_id, origin HAVING COUNT(*) > 1 LIMIT 20
            """
        ),
        (
            "duplicate change sequence",
            """
            SELECT 'account ' || account_id || ': ' || COUNT(*) || ' notes with change sequence ' || change_seq
            FROM notes GROUP BY account_id, change_seq HAVING COUNT(*) > 1 LIMIT 20
            """
        ),
        (
            "change sequence out of range",
            """
            SELECT 'note ' || n.server_id || ' of account ' || n.account_id || ': change sequence ' || n.change_seq
                   || ' outside 1...' || a.change_seq
            FROM notes n JOIN accounts a ON a.id = n.account_id
            WHERE n.change_seq < 1 OR n.change_seq > a.change_seq LIMIT 20
            """
        ),
        (
            "bad version",
            "SELECT 'note ' || server_id || ': version ' || version || ' below 1' FROM notes WHERE version < 1 LIMIT 20"
        ),
        (
            "bad account",
            """
            SELECT 'account ' || id || ' (' || username || '): invalid ID or change sequence ' || change_seq
            FROM accounts WHERE id <= 0 OR change_seq < 0 LIMIT 20
            """
        ),
        (
            "bad session",
            """
            SELECT 'session ' || s.id || ': invalid ID, origin or account ' || s.account_id
            FROM sessions s LEFT JOIN accounts a ON a.id = s.account_id
            WHERE s.id <= 0 OR (s.origin IS NOT NULL AND s.origin <= 0) OR a.id IS NULL LIMIT 20
            """
        ),
        (
            "bad note IDs",
            """
            SELECT 'note ' || n.server_id || ': invalid server ID, client ID, origin, conflict link or account ' || n.account_id
            FROM notes n LEFT JOIN accounts a ON a.id = n.account_id
            WHERE n.server_id <= 0 OR n.client_id <= 0 OR n.origin <= 0 OR (n.conflict_of IS NOT NULL AND n.conflict_of <= 0)
               OR a.id IS NULL LIMIT 20
            """
        ),
        (
            "dangling conflict link",
            """
            SELECT 'note ' || c.server_id || ' of account ' || c.account_id || ': conflict copy of ' || c.conflict_of
                   || ', not a note of that account'
            FROM notes c LEFT JOIN notes o ON o.server_id = c.conflict_of AND o.account_id = c.account_id
            WHERE c.conflict_of IS NOT NULL AND o.server_id IS NULL LIMIT 20
            """
        ),
        (
            "orphan version",
            """
            SELECT 'version ' || v.version || ' of note ' || v.server_id || ' of account ' || v.account_id
                   || ': not a note of that account, or a version outside 1...' || COALESCE(n.version, 0)
            FROM note_versions v LEFT JOIN notes n ON n.server_id = v.server_id AND n.account_id = v.account_id
            WHERE n.server_id IS NULL OR v.version < 1 OR v.version > n.version LIMIT 20
            """
        ),
        (
            "version unlike its note",
            """
            SELECT 'note ' || n.server_id || ' of account ' || n.account_id || ': its kept version ' || v.version
                   || ' disagrees with it on whether it is deleted'
            FROM notes n
            JOIN note_versions v ON v.account_id = n.account_id AND v.server_id = n.server_id AND v.version = n.version
            WHERE v.deleted <> n.deleted LIMIT 20
            """
        ),
        (
            "orphan applied edit",
            """
            SELECT 'applied edit ' || e.edit_id || ': invalid ID or unknown account ' || e.account_id
            FROM applied_edits e LEFT JOIN accounts a ON a.id = e.account_id
            WHERE a.id IS NULL OR e.edit_id <= 0 OR e.client_id <= 0 OR e.origin <= 0 LIMIT 20
            """
        ),
    ]

    /// How many notes the converting accounts still hold in the clear (one integer).
    static let plaintextNotesLeft = "SELECT COUNT(*) FROM notes WHERE plaintext = \(plaintextTrue)"

    /// True as both backends compare the `plaintext` columns with it: SQLite keeps 1 in an INTEGER column, PostgreSQL
    /// a BOOLEAN (where `= 1` is an error); `(1 = 1)` is 1 in one and true in the other.
    static let plaintextTrue = "(1 = 1)"

    /// The quota's running totals (`accounts.note_count`, `text_bytes`) against the notes they count; `bytes` is the
    /// backend's UTF-8 byte length of the text column `n.text` (SQLite: `LENGTH(CAST(n.text AS BLOB))`, PostgreSQL:
    /// `octet_length(n.text)`).
    static func runningTotals(bytes: String) -> (String, String) {
        (
            "running totals",
            """
            SELECT 'account ' || a.id || ': ' || a.note_count || ' notes and ' || a.text_bytes || ' text bytes counted, '
                   || COALESCE(t.n, 0) || ' and ' || COALESCE(t.b, 0) || ' stored'
            FROM accounts a
            LEFT JOIN (SELECT n.account_id, COUNT(*) AS n, SUM(COALESCE(\(bytes), 0)) AS b FROM notes n GROUP BY n.account_id) t
                ON t.account_id = a.id
            WHERE a.note_count <> COALESCE(t.n, 0) OR a.text_bytes <> COALESCE(t.b, 0) LIMIT 20
            """
        )
    }

    /// The running total of the history's texts (`accounts.history_bytes`) against the kept versions it counts;
    /// `bytes` is the backend's byte length of `v.text`.
    static func historyTotals(bytes: String) -> (String, String) {
        (
            "history running total",
            """
            SELECT 'account ' || a.id || ': ' || a.history_bytes || ' history bytes counted, ' || COALESCE(t.b, 0) || ' stored'
            FROM accounts a
            LEFT JOIN (SELECT v.account_id, SUM(\(bytes)) AS b FROM note_versions v GROUP BY v.account_id) t
                ON t.account_id = a.id
            WHERE a.history_bytes <> COALESCE(t.b, 0) LIMIT 20
            """
        )
    }

    /// The running total of the texts kept for replays (`accounts.replay_text_bytes`) against the applied edits it
    /// counts; `bytes` is the backend's byte length of `e.text` (as for ``runningTotals(bytes:)``).
    static func replayTotals(bytes: String) -> (String, String) {
        (
            "replay running total",
            """
            SELECT 'account ' || a.id || ': ' || a.replay_text_bytes || ' replay text bytes counted, ' || COALESCE(t.b, 0) || ' stored'
            FROM accounts a
            LEFT JOIN (SELECT e.account_id, SUM(COALESCE(\(bytes), 0)) AS b FROM applied_edits e GROUP BY e.account_id) t
                ON t.account_id = a.id
            WHERE a.replay_text_bytes <> COALESCE(t.b, 0) LIMIT 20
            """
        )
    }
}
