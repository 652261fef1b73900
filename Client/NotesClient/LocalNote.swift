import MiniFlake
import NoteSyncProtocol

/// One note as this device stores it. A read-only value: change notes through ``NotesClient``.
public struct LocalNote: Sendable, Equatable, Identifiable {
    /// The local row ID: stable on this device while the note exists, meaningless anywhere else.
    public let id: Int64
    /// The note's permanent client ID, minted on the device that created it.
    public let clientID: FlakeID
    /// The installation ID (origin) of the device that created the note. `(clientID, origin)` is unique.
    public let origin: FlakeID
    /// The server's ID for the note in the signed-in account; nil before the first sync and after sign-out.
    public let serverID: FlakeID?
    /// The server version last synced; nil when unknown (never synced, after sign-out, or after a replayed push).
    public let serverVersion: Int64?
    /// The current text ("" for a synced tombstone).
    public let text: String
    /// Whether the note is deleted (a tombstone kept so the delete can sync).
    public let isDeleted: Bool
    /// The text last synced with a server (kept across sign-out); nil for a note never synced.
    public let baseText: String?
    /// Bumped by each local edit.
    public let revision: Int64
    /// Whether the note has changes the server has not acknowledged yet.
    public let isDirty: Bool
    /// Whether the note is a conflict copy the server split from another note.
    public let isConflict: Bool
    /// For a conflict copy: the server ID of the note it was split from.
    public let conflictOf: FlakeID?
    /// Why the server refused the note's last push; the note is not pushed again until it is edited (refused for the
    /// quota: until the next sync).
    public let pushError: PushError?
    /// When the note was created, Unix milliseconds (the creating device's clock).
    public let createdAt: Int64
    /// When the note's content was last edited, Unix milliseconds, by the clock of the device that edited it
    /// (carried through the server as the change's `editedAt`, so every device shows the same time; the server's
    /// time for edits from clients that do not send it). Shown as the note's time; never used to order syncs.
    public let updatedAt: Int64
    /// For a conflict copy: whether it holds this device's text (its own push overlapped another device's edit),
    /// rather than another device's.
    public var isConflictFromThisDevice: Bool = false
    /// The note's tags, as first written, in the order of their keys (see ``TagRules``).
    public var tags: [String] = []
    /// Pinned: listed first.
    public var isPinned = false
    /// Archived: hidden from `notes list` unless asked for; searches still find it.
    public var isArchived = false
    /// The tags last synced with the note's owner (empty for a note never synced): the base the server merges this
    /// device's tag changes against.
    public var baseTags: [String] = []
    /// The flags last synced with the note's owner (false for a note never synced).
    public var basePinned = false
    public var baseArchived = false
    /// The note's attached files (issue 33), sorted by name: each a manifest of its chunks; the bytes are in this
    /// device's chunk cache or on the server (``NotesClient/attachments(of:)`` says which).
    public var attachments: [AttachmentManifest] = []
    /// The attachments last synced with the note's owner (empty for a note never synced): the base of the server's
    /// three-way merge, as ``baseTags``.
    public var baseAttachments: [AttachmentManifest] = []

    /// The first non-blank line of the text, trimmed (for listings).
    public var title: String { NoteSummary.title(of: text) }
}

/// A listing: pinned notes first, then the most recently edited first, and the display ID of every note listed (see
/// ``ShortID``), keyed by local ID.
public struct Listing: Sendable, Equatable {
    public var notes: [NoteSummary]
    public var displayIDs: [Int64: String]
}

/// Which notes a listing shows (`notes list`).
public struct ListingFilter: Sendable, Equatable {
    /// What a listing does with archived notes.
    public enum Archived: Sendable, Equatable {
        /// Leaves them out (`notes list`).
        case hidden
        /// Shows only them (`--archived`).
        case only
        /// Shows them with the others (`--all`).
        case included
    }

    public var archived: Archived
    /// Tombstones too (`--all`). A tag filter lists live notes only: a deleted note is listed by no tag.
    public var includeDeleted: Bool
    /// Only the notes that have every one of these tags (compared by key, ``Tags/key(_:)``).
    public var tags: [String]

    public init(archived: Archived = .hidden, includeDeleted: Bool = false, tags: [String] = []) {
        self.archived = archived
        self.includeDeleted = includeDeleted
        self.tags = tags
    }

    /// Every note on show: archived and deleted ones too.
    public static let all = ListingFilter(archived: .included, includeDeleted: true)

    /// Whether a note with these properties is listed (tags aside).
    func lists(isDeleted: Bool, isArchived: Bool) -> Bool {
        if isDeleted && !includeDeleted { return false }
        switch archived {
        case .hidden: return !isArchived
        case .only: return isArchived
        case .included: return true
        }
    }

    /// The listing order: pinned notes first, then the most recently edited, then the highest local ID.
    static func precedes(_ a: NoteSummary, _ b: NoteSummary) -> Bool {
        if a.isPinned != b.isPinned { return a.isPinned }
        return a.updatedAt != b.updatedAt ? a.updatedAt > b.updatedAt : a.id > b.id
    }
}

/// What a listing shows of a note: lighter than ``LocalNote`` (no full text, no sync bookkeeping).
public struct NoteSummary: Sendable, Equatable, Identifiable {
    public let id: Int64
    public let clientID: FlakeID
    public let origin: FlakeID
    /// The first non-blank line, trimmed.
    public let title: String
    public let isDeleted: Bool
    public let isDirty: Bool
    public let isConflict: Bool
    /// The code of the server's refusal (see ``LocalNote/pushError``).
    public let pushErrorCode: String?
    public let updatedAt: Int64
    /// The note's tags, in the order of their keys.
    public var tags: [String] = []
    public var isPinned = false
    public var isArchived = false

    /// The first line holding something other than whitespace, without surrounding whitespace.
    public static func title(of text: String) -> String {
        var text = text
        let range: Range<Int>? = text.withUTF8 { bytes in
            var lineStart = 0
            var index = 0
            while true {
                let atEnd = index == bytes.count
                if atEnd || bytes[index] == UInt8(ascii: "\n") {
                    var start = lineStart
                    var end = index
                    while start < end, isASCIIWhitespace(bytes[start]) { start += 1 }
                    while start < end, isASCIIWhitespace(bytes[end - 1]) { end -= 1 }
                    if start < end { return start..<end }
                    if atEnd { return nil }
                    lineStart = index + 1
                }
                index += 1
            }
        }
        guard let range else { return "" }
        // Byte offsets of ASCII characters are character boundaries, so this slices `text` safely.
        let utf8 = text.utf8
        var line = text[utf8.index(utf8.startIndex, offsetBy: range.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: range.upperBound)]
        if let first = line.utf8.first, let last = line.utf8.last, first >= 0x80 || last >= 0x80 {
            // Rare non-ASCII whitespace (no-break space, ideographic space): trim it character by character.
            while let first = line.first, first.isWhitespace { line.removeFirst() }
            while let last = line.last, last.isWhitespace { line.removeLast() }
            if line.isEmpty {
                let rest = text[line.endIndex...]
                return rest.isEmpty ? "" : title(of: String(rest))
            }
        }
        return String(line)
    }

    private static func isASCIIWhitespace(_ byte: UInt8) -> Bool {
        byte == 32 || (byte >= 9 && byte <= 13)
    }
}

extension NoteSummary {
    public init(_ note: LocalNote) {
        self.init(
            id: note.id, clientID: note.clientID, origin: note.origin, title: note.title, isDeleted: note.isDeleted,
            isDirty: note.isDirty, isConflict: note.isConflict, pushErrorCode: note.pushError?.code, updatedAt: note.updatedAt,
            tags: note.tags, isPinned: note.isPinned, isArchived: note.isArchived)
    }
}
