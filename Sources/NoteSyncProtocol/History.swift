import MiniFlake

// A note's history: `GET /v1/notes/{serverID}/versions?after=V&limit=N` (``Endpoint/noteVersions``).

/// One version of a note as the server kept it: the note's state right after a change the server accepted (an edit,
/// a merge, a delete, a restore, a conflict copy's first version), in `GET /v1/notes/{serverID}/versions`.
public struct NoteVersion: Codable, Sendable, Equatable {
    /// The note's version number (1 when created, +1 per accepted change).
    public var version: Int64
    /// The text ("" for a delete).
    public var text: String
    /// Whether this version deleted the note.
    public var deleted: Bool
    /// The tags (display forms, in ``TagRules/sorted(_:)`` order).
    public var tags: [String]
    public var pinned: Bool
    public var archived: Bool
    /// The attachments (in ``AttachmentRules/sorted(_:)`` order). Always written by this server (`[]` for an
    /// encrypted account's version, whose manifests are in the envelope); absent from older servers.
    public var attachments: [AttachmentManifest]?
    /// When the content was edited, by the editing device's clock (``WireTime`` form; informational).
    public var editedAt: String
    /// When the server accepted the change (``WireTime`` form; informational).
    public var savedAt: String
    /// The device name of the session that pushed it, when it gave one at sign-in.
    public var device: String?
    /// The edit ID of the change that wrote this version (what an encrypted version's envelope is bound to); absent
    /// for versions saved before the server kept it, and from older servers.
    public var editID: FlakeID?

    public enum CodingKeys: String, WireKey {
        case version, text, deleted, tags, pinned, archived, attachments, editedAt, savedAt, device, editID
    }

    public init(
        version: Int64, text: String, deleted: Bool, tags: [String], pinned: Bool, archived: Bool, editedAt: String,
        savedAt: String, device: String?, editID: FlakeID? = nil, attachments: [AttachmentManifest]? = nil
    ) {
        self.attachments = attachments
        self.editID = editID
        self.version = version
        self.text = text
        self.deleted = deleted
        self.tags = tags
        self.pinned = pinned
        self.archived = archived
        self.editedAt = editedAt
        self.savedAt = savedAt
        self.device = device
    }
}

/// `GET /v1/notes/{serverID}/versions` answer.
public struct NoteVersionsResponse: Codable, Sendable, Equatable {
    /// The note's kept versions after the request's `after`, oldest first, at most the page size (and about
    /// ``HistoryLimits/maxPageBytes`` of text, at least one version).
    public var versions: [NoteVersion]
    /// More versions follow: ask again with `after` set to the last version of this page.
    public var hasMore: Bool

    public enum CodingKeys: String, WireKey { case versions, hasMore }

    public init(versions: [NoteVersion], hasMore: Bool) {
        self.versions = versions
        self.hasMore = hasMore
    }
}

/// The history a server keeps and how it pages it, served by `GET /v1/info` as `history`.
///
/// The server keeps every version of a note an account pushed and it accepted, for ``retentionDays`` (0: forever;
/// a note's current version is kept whatever its age), and counts their texts in the account's byte quota
/// (``StorageUsage/historyBytes``).
public struct HistoryLimits: Codable, Sendable, Equatable {
    /// Days a version is kept after it was saved; 0 keeps every version.
    public var retentionDays: Int
    /// Most versions in one page; larger `limit` values are clamped to it.
    public var maxPageSize: Int
    /// Page size when a request names no `limit`.
    public var defaultPageSize: Int
    /// About the most UTF-8 bytes of text one page holds: a page ends at the first version that reaches it (a page
    /// holds at least one version, whatever its size).
    public var maxPageBytes: Int

    public enum CodingKeys: String, WireKey { case retentionDays, maxPageSize, defaultPageSize, maxPageBytes }

    public init(retentionDays: Int = 90, maxPageSize: Int = 1000, defaultPageSize: Int = 500, maxPageBytes: Int = 4 << 20) {
        self.retentionDays = retentionDays
        self.maxPageSize = maxPageSize
        self.defaultPageSize = defaultPageSize
        self.maxPageBytes = maxPageBytes
    }

    public static let `default` = HistoryLimits()
}

/// Query parameter names of the history endpoint.
public enum HistoryQuery {
    /// The version after which the page starts (a non-negative integer; absent: 0, the first version).
    public static let after = "after"
    /// Most versions in the page (a positive integer, clamped to ``HistoryLimits/maxPageSize``).
    public static let limit = "limit"
}

/// A request for one page of a note's history: the route, its path parameter and its query, built once here so
/// that no caller restates them.
public struct NoteVersionsRequest: Sendable, Equatable {
    /// The note (its server ID in the account).
    public var serverID: FlakeID
    /// The page starts after this version (0: from the first).
    public var after: Int64
    /// Most versions in the page; nil: the server's default.
    public var limit: Int?

    public init(serverID: FlakeID, after: Int64 = 0, limit: Int? = nil) {
        self.serverID = serverID
        self.after = after
        self.limit = limit
    }

    /// The request, with the bearer token of the account the note belongs to.
    public func wireRequest(bearerToken: String?) -> WireRequest {
        var query = [(HistoryQuery.after, String(after))]
        if let limit { query.append((HistoryQuery.limit, String(limit))) }
        return WireRequest(
            method: Endpoint.noteVersions.method, path: Endpoint.noteVersions.path(parameter: String(serverID.rawValue)),
            query: query, bearerToken: bearerToken)
    }
}
