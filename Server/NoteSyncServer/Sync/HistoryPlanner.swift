import MiniFlake
import NoteSyncProtocol

/// Decides what a history request does (`GET /v1/notes/{serverID}/versions?after=&limit=`): pure functions of values,
/// tested alone like ``PullPlanner``. ``SyncService/versions(_:session:)`` carries the decisions out with the store.
///
/// Rules:
/// 1. Query: the path's `serverID` is a MiniFlake ID (else `invalid_id`); `after` is ASCII digits of a non-negative
///    integer (absent: 0; else `invalid_field`); `limit` is ASCII digits of a positive integer, any size, clamped to
///    ``HistoryLimits/maxPageSize`` (absent: ``HistoryLimits/defaultPageSize``; else `invalid_limit`).
/// 2. Page: the note's kept versions after `after`, oldest first: at most the page size, and none after the version
///    that brings the page's texts to ``HistoryLimits/maxPageBytes`` or beyond (so a page holds at least one version
///    when one follows); `hasMore` when a version follows the page's last. A store reads the sizes of at most the
///    page size plus one versions, lets ``pageLength(sizes:query:)`` decide, then reads those versions' rows: cost is
///    proportional to the page, never to the note's history.
/// 3. The note must be one of the account's (tombstones included): else 404 `note_not_found`, whether or not the ID
///    is another account's note.
public enum HistoryPlanner {
    /// A history request, parsed (rule 1).
    public struct Query: Sendable, Equatable {
        public var serverID: FlakeID
        /// The page starts after this version.
        public var after: Int64
        /// Most versions in a page.
        public var pageSize: Int
        /// A page ends after the version that brings its texts to this many bytes.
        public var maxBytes: Int

        public init(serverID: FlakeID, after: Int64 = 0, pageSize: Int, maxBytes: Int) {
            self.serverID = serverID
            self.after = after
            self.pageSize = pageSize
            self.maxBytes = maxBytes
        }
    }

    /// Parses a history request's path parameter and query (rule 1).
    ///
    /// - Throws: `invalid_id` (the server ID), `invalid_field` (`after`), `invalid_limit`, naming the parameter.
    public static func query(serverID: Substring, after: String?, limit: String?, limits: HistoryLimits) throws(SyncError) -> Query {
        guard let value = Int64(serverID), String(value) == serverID, let id = try? FlakeID(validating: value) else {
            throw SyncError(.invalidID, "The note's server ID in the path is not a MiniFlake ID.", field: "serverID")
        }
        var query = Query(serverID: id, pageSize: limits.defaultPageSize, maxBytes: limits.maxPageBytes)
        if let after {
            guard let version = nonNegative(after) else {
                throw SyncError(.invalidField, "after must be a non-negative integer (a version number).", field: HistoryQuery.after)
            }
            query.after = version
        }
        if let limit {
            guard let value = PullPlanner.positiveLimit(limit) else {
                throw SyncError(.invalidLimit, "The limit must be a positive integer.", field: HistoryQuery.limit)
            }
            query.pageSize = min(value, limits.maxPageSize)
        }
        return query
    }

    /// ASCII digits (no sign, no space) of a non-negative integer, any size (a value beyond `Int64` is `Int64.max`: no
    /// version is after it). Nil for anything else.
    static func nonNegative(_ text: String) -> Int64? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int64(text) ?? .max
    }

    /// How many of the versions after the query's `after`, given the UTF-8 sizes of their texts in order (a store
    /// reads at most `pageSize + 1`), the page holds, and whether a version follows them (rule 2).
    public static func pageLength(sizes: some Sequence<Int>, query: Query) -> (count: Int, hasMore: Bool) {
        var count = 0
        var bytes = 0
        for size in sizes {
            if count == query.pageSize || (count > 0 && bytes >= query.maxBytes) { return (count, true) }
            count += 1
            bytes += size
        }
        return (count, false)
    }

    /// The answer for a page a store read.
    public static func response(_ page: VersionPage) -> NoteVersionsResponse {
        var times = WireTime.Cache()
        return NoteVersionsResponse(versions: page.versions.map { $0.record(times: &times) }, hasMore: page.hasMore)
    }
}
