import MiniFlake
import NoteSyncProtocol

/// Decides what a pull does (`GET /v1/notes/changes?since=&limit=&wait=`): pure functions of values, tested alone
/// like ``PushPlanner``. ``PullDriver`` carries the decisions out, the same way for every transport.
///
/// Rules:
/// 1. Query: `since` is a cursor this server issued (absent: the start), else `invalid_cursor`; `limit` is ASCII
///    digits of a positive integer, any size, clamped to `maxPageSize` (absent: `defaultPageSize`), else
///    `invalid_limit`; `wait` is ASCII digits of a non-negative integer of seconds, clamped to `maxWaitSeconds`
///    (absent: 0), else `invalid_wait`.
/// 2. Page: the account's notes changed after the cursor, oldest change first, at most the page size, and no note
///    after the one whose text brings the page to ``pageBytes`` (so a page holds at least one note, and a page of
///    large notes stays a few MiB in memory on both sides); its cursor is after the last of them (the request's when
///    there is none); `hasMore` when the page is full (or cut at ``pageBytes``) and the account's change sequence is
///    past its last note; `remaining`: how many notes at most changed after the page's cursor (exact for a pull from
///    the start, which returns each of the account's notes once: its note count less the page; otherwise the
///    changes after the page's cursor, capped at the note count), 0 without more. A cursor beyond the account's
///    sequence (another account's, say) is `invalid_cursor`. Cost is proportional to the changes returned, never to
///    the account's size.
/// 3. Wait: with `wait` above 0, a change feed and an empty page, the pull registers a waiter, then re-reads the
///    account's change sequence: past the cursor (a commit between the page and the registration, whose signal found
///    nobody), the page after the cursor is the answer; else the pull waits. A commit after the registration signals
///    the waiter, so no change is ever missed.
/// 4. Wake-up: the daemon shutting down, or the client gone, answers the empty page at once, without reading. A
///    change or the deadline first checks the session: ended (revoked, every other device signed out, the password
///    changed, the account deleted or disabled, by the user or by the operator) → 401 `unauthorized`, and nothing
///    committed after it ended. Still standing: after a change, step 3 again (usually the page); at the deadline,
///    the empty page at the request's cursor. (A sign-out nobody heard, such as an operator's command on SQLite
///    before the daemon noticed it, is thus told at the deadline at the latest, never with an empty page.)
public enum PullPlanner {
    /// A pull's query, parsed (rule 1).
    public struct Query: Sendable, Equatable {
        /// Where the page starts.
        public var cursor: SyncCursor
        /// Most notes in a page.
        public var pageSize: Int
        /// How long the pull may wait for a change, in seconds (0: it answers at once).
        public var waitSeconds: Int

        public init(cursor: SyncCursor = .start, pageSize: Int, waitSeconds: Int = 0) {
            self.cursor = cursor
            self.pageSize = pageSize
            self.waitSeconds = waitSeconds
        }
    }

    /// Parses a pull's query parameters (rule 1).
    ///
    /// - Throws: `invalid_cursor`, `invalid_limit`, `invalid_wait`, naming the parameter.
    public static func query(since: String?, limit: String?, wait: String?, limits: SyncLimits, live: LiveLimits) throws(SyncError) -> Query {
        var query = Query(pageSize: limits.defaultPageSize)
        if let since {
            guard let cursor = SyncCursor(text: since) else {
                throw SyncError(.invalidCursor, "The cursor is not one this server issued.", field: PullQuery.since)
            }
            query.cursor = cursor
        }
        if let limit {
            guard let value = positiveLimit(limit) else {
                throw SyncError(.invalidLimit, "The limit must be a positive integer.", field: PullQuery.limit)
            }
            query.pageSize = min(value, limits.maxPageSize)
        }
        if let wait {
            guard let seconds = live.waitSeconds(wait) else {
                throw SyncError(.invalidWait, "The wait must be a non-negative integer of seconds.", field: PullQuery.wait)
            }
            query.waitSeconds = seconds
        }
        return query
    }

    /// A pull limit: ASCII digits (no sign, no space) of a positive integer, any size; a value beyond `Int` is
    /// `Int.max` (clamped to `maxPageSize` like any other large limit). Nil for anything else, `0` included.
    static func positiveLimit(_ text: String) -> Int? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        guard digits.contains(where: { $0 != UInt8(ascii: "0") }) else { return nil }
        return Int(text) ?? Int.max
    }

    /// The text bytes after which a page stops (rule 2): 4 MiB.
    public static let pageBytes = 4 << 20

    /// The answer for a page the store read after `cursor`, at most `pageSize` notes and ``pageBytes`` (rule 2).
    ///
    /// - Throws: `invalid_cursor` when the cursor is beyond the account's change sequence.
    public static func page(_ page: PullPage, after cursor: SyncCursor, pageSize: Int) throws(SyncError) -> PullResponse {
        guard cursor.sequence <= page.currentSequence else {
            throw SyncError(.invalidCursor, "The cursor is not one this server issued for this account.", field: PullQuery.since)
        }
        let last = page.notes.last?.changeSeq
        let next = last.map { SyncCursor(sequence: $0) } ?? cursor
        let hasMore = (page.notes.count == pageSize || page.cutByBytes) && (last ?? page.currentSequence) < page.currentSequence
        var remaining: Int64 = 0
        if hasMore {
            let notesLeft = max(0, page.noteCount - Int64(page.notes.count))
            remaining = cursor.sequence == 0 ? notesLeft : min(page.noteCount, page.currentSequence - next.sequence)
        }
        var times = WireTime.Cache()
        return PullResponse(
            changes: page.notes.map { $0.record(times: &times) }, cursor: next, hasMore: hasMore, remaining: Int(remaining))
    }

    /// Whether a transport must be ready for a pull with this `wait` parameter to wait (hold its connection, hear the
    /// client hang up): any value but none and `0`, an invalid one included (rule 1 refuses it, and the answer is the
    /// same whichever way it goes).
    public static func mayWait(_ wait: Substring?) -> Bool {
        wait.map { $0 != "0" } ?? false
    }

    /// Whether a pull whose first page is `first` waits for a change (rule 3): it asked to, a feed holds waiters,
    /// and the page is empty.
    public static func waits(_ query: Query, first: PullResponse, feedAvailable: Bool) -> Bool {
        query.waitSeconds > 0 && feedAvailable && first.changes.isEmpty
    }

    /// What a registered waiter does once it re-read the account's change sequence (rule 3).
    public enum AfterRegistering: Sendable, Equatable {
        /// The account moved past the cursor: read the page after it, that is the answer.
        case read
        /// Nothing after the cursor: wait for the feed.
        case wait
    }

    /// Rule 3, after the registration: `currentSequence` is the account's change sequence read after it.
    public static func afterRegistering(currentSequence: Int64, cursor: SyncCursor) -> AfterRegistering {
        currentSequence > cursor.sequence ? .read : .wait
    }

    /// What a waiting pull does when its wait ends (rule 4).
    public enum AfterWake: Sendable, Equatable {
        /// Answer the empty page at the request's cursor.
        case answerEmpty
        /// Check first that the session still stands, then decide again with the answer.
        case checkSession
        /// The session ended: 401 `unauthorized`.
        case unauthorized
        /// Register again and re-read (rule 3).
        case register
    }

    /// Rule 4: `sessionStands` is nil until the session was checked after this wake-up.
    public static func afterWake(_ wake: ChangeFeed.Wake, sessionStands: Bool?) -> AfterWake {
        switch wake {
        case .shutdown, .gone:
            return .answerEmpty
        case .changed, .expired:
            guard let sessionStands else { return .checkSession }
            guard sessionStands else { return .unauthorized }
            return wake == .changed ? .register : .answerEmpty
        }
    }
}
