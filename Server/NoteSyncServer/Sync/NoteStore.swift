import MiniFlake
import NoteSyncProtocol

/// Persistent storage for accounts, sessions and notes.
///
/// A store only locks, loads and writes: every decision about a push is made by ``PushPlanner``, which every store
/// runs unchanged through ``PushDriver``, every decision about a pull by ``PullPlanner`` (run by ``PullDriver``), and
/// every other request rule by the services (``ServerServices``). Every query is scoped by account ID; nothing a store
/// returns for one account ever comes from another. The stores are ``SQLiteNoteStore`` and ``PostgresNoteStore``;
/// both pass one conformance suite (`NoteStoreConformance` in the tests), and a test checks that their schemas agree.
///
/// A store is also the chunk collector's ``ChunkReferences``: the chunks its notes and kept versions refer to.
public protocol NoteStore: ChunkReferences {
    /// The backend's name as `GET /healthz` reports it (`sqlite`, `postgres`).
    var backendName: String { get }

    /// Inserts an account.
    ///
    /// - Throws: ``NoteStoreError/usernameTaken`` when the username is already registered.
    func createAccount(_ account: AccountRecord) async throws
    /// The account with this canonical username, if any.
    func account(byUsername username: String) async throws -> AccountRecord?
    /// The account with this ID, if any.
    func account(byID id: FlakeID) async throws -> AccountRecord?

    /// Inserts a session (the token hash must be unique).
    func createSession(_ session: SessionRecord) async throws
    /// The session whose token hashes to `tokenHash`, if any.
    func session(byTokenHash tokenHash: String) async throws -> SessionRecord?
    /// Deletes a session of an account (its token stops working at once) and returns whether there was one;
    /// deleting a missing one, or another account's, is not an error and returns false.
    @discardableResult
    func deleteSession(id: FlakeID, accountID: FlakeID) async throws -> Bool
    /// The account's sessions (signed-in devices), most recently signed in first, at most `limit`.
    func sessions(accountID: FlakeID, limit: Int) async throws -> [SessionRecord]
    /// Deletes every session of the account except `except` (nil: all of them) and returns how many.
    @discardableResult
    func deleteSessions(accountID: FlakeID, except: FlakeID?) async throws -> Int
    /// Records that a session made a request at `time` (Unix milliseconds), only if its last-seen time is before
    /// `ifBefore` (or unset): the caller passes `time - 60_000` so that a session is written at most once a minute.
    func markSessionSeen(id: FlakeID, accountID: FlakeID, at time: Int64, ifBefore: Int64) async throws
    /// Replaces the account's password hash and deletes its sessions except `keepingSession` (nil: all), in one
    /// transaction; returns how many sessions were deleted.
    ///
    /// - Throws: ``NoteStoreError/accountNotFound``.
    @discardableResult
    func changePassword(accountID: FlakeID, passwordHash: String, keepingSession: FlakeID?) async throws -> Int
    /// Deletes the account with its notes, their history, applied edits and sessions, in one transaction serialized
    /// with its pushes; the username is free again. Returns false when there was no such account.
    @discardableResult
    func deleteAccount(id: FlakeID) async throws -> Bool
    /// The account's running totals (see ``AccountUsage``), nil when there is no such account.
    func usage(accountID: FlakeID) async throws -> AccountUsage?

    /// Applies a push in one transaction, serialized with every other push of the account, and returns one result
    /// per change, in order. Every version the plan writes goes into the note's history in the same transaction (one
    /// batched insert), and the account's ``AccountUsage`` is updated there too; a change that would take it over
    /// `context.quota` is rejected (`quota_exceeded`).
    ///
    /// The server's stores run ``PushDriver`` (lock the account, load, ``PushPlanner``, write). When this returns, the
    /// accepted changes are durable; when it throws, none are.
    ///
    /// - Throws: ``NoteStoreError/accountNotFound``, ``NoteStoreError/unavailable(_:)``, or a backend error.
    func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult]

    /// The account's notes changed after `sequence`, ascending by change sequence, at most `limit`, and none after
    /// the one whose text brings the page's text bytes to `maxBytes` or beyond (so a page holds at least one note);
    /// with the account's current change sequence and note count from the same snapshot.
    func pull(accountID: FlakeID, after sequence: Int64, limit: Int, maxBytes: Int) async throws -> PullPage

    /// The account's current change sequence (0 when it has no changes or does not exist).
    func currentChangeSequence(accountID: FlakeID) async throws -> Int64

    /// The largest ID the server ever minted into this store (accounts, sessions, notes), for the generator's
    /// high-water mark on start: IDs never repeat even when the clock was set back across a restart.
    func largestIssuedID() async throws -> FlakeID?

    /// One page of the kept versions of the account's note `query.serverID` (tombstones are notes), read in one
    /// snapshot under ``HistoryPlanner``'s page rule; nil when the account has no such note.
    func versions(accountID: FlakeID, query: HistoryPlanner.Query) async throws -> VersionPage?

    /// Deletes kept versions saved before `cutoff` (Unix milliseconds), in chunks, except each note's newest kept
    /// version (a note is never left without history), giving their texts' bytes back to their accounts' running
    /// totals; returns how many.
    func pruneHistory(savedBefore cutoff: Int64) async throws -> Int

    /// Deletes applied edits recorded before `cutoff` (Unix milliseconds), in chunks, and returns how many.
    ///
    /// Applied edits make replays idempotent; one is kept per accepted change, so they are pruned by age (the daemon's
    /// edit retention). A change re-sent after its edit was pruned is planned afresh, which is safe: a create finds
    /// its note by client ID (reconciled, no duplicate) and an edit the note already holds is unchanged.
    func pruneAppliedEdits(createdBefore cutoff: Int64) async throws -> Int

    /// A cheap round trip to the backend, for health checks.
    func ping() async throws

    /// Closes the store; later calls throw.
    func close() async throws
}

/// Errors with a meaning the service acts on. Any other error a store throws is a server fault (500).
public enum NoteStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The username is already registered (409 `username_taken`).
    case usernameTaken
    /// A push named an account that does not exist.
    case accountNotFound
    /// The backend cannot serve right now (busy, locked, unreachable): 503 `unavailable`, retry later.
    case unavailable(String)
    /// The store was closed.
    case closed
    /// The invite code a sign-up names is unknown, used up, expired or revoked (403 `invalid_invite`).
    case inviteNotUsable
    /// A stored value this build cannot read (a server fault).
    case unreadable(String)

    public var description: String {
        switch self {
        case .inviteNotUsable: "The invite code is unknown, used up, expired or revoked."
        case .usernameTaken: "The username is already registered."
        case .accountNotFound: "The account does not exist."
        case .unavailable(let reason): "The database is unavailable: \(reason)"
        case .closed: "The store is closed."
        case .unreadable(let what): "A stored value cannot be read: \(what)"
        }
    }
}

/// A stored ID back as a ``FlakeID`` (every stored ID is positive).
func flake(_ value: Int64) throws -> FlakeID {
    try FlakeID(validating: value)
}

extension NoteStore {
    /// A page bounded by `limit` only (tests).
    public func pull(accountID: FlakeID, after sequence: Int64, limit: Int) async throws -> PullPage {
        try await pull(accountID: accountID, after: sequence, limit: limit, maxBytes: Int.max)
    }
}
