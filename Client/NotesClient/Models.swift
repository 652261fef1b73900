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

    /// The first non-blank line of the text, trimmed (for listings).
    public var title: String { NoteSummary.title(of: text) }
}

/// Who a note is, without its text: see ``NotesClient/identities()``.
public struct NoteIdentity: Sendable, Equatable {
    /// The local row ID (``LocalNote/id``).
    public let id: Int64
    public let clientID: FlakeID
    public let origin: FlakeID
    /// The server's ID in the signed-in account, when known.
    public let serverID: FlakeID?
    public let isDeleted: Bool
    /// The account the note belongs to (nil: written while signed out, never synced; see ``OwnerPlanner``).
    public var owner: FlakeID? = nil
    /// Set aside: another account's note (or an unowned one while an account is signed in), hidden.
    public var isSetAside = false
}

/// Every local note's identity (set-aside ones included), the signed-in account and the pull cursor, from one read: see
/// ``NotesClient/identities()``.
public struct NoteIdentities: Sendable, Equatable {
    /// Tombstones included, in local ID order.
    public let notes: [NoteIdentity]
    /// Nil when signed out.
    public let account: AccountInfo?
    /// The pull cursor of the signed-in account, nil before the first pull.
    public let cursor: String?
}

/// A listing: notes newest first and the display ID of every local note (see ``ShortID``), keyed by local ID.
public struct Listing: Sendable, Equatable {
    public var notes: [NoteSummary]
    public var displayIDs: [Int64: String]
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

    public init(_ note: LocalNote) {
        id = note.id
        clientID = note.clientID
        origin = note.origin
        title = note.title
        isDeleted = note.isDeleted
        isDirty = note.isDirty
        isConflict = note.isConflict
        pushErrorCode = note.pushError?.code
        updatedAt = note.updatedAt
    }

    init(
        id: Int64, clientID: FlakeID, origin: FlakeID, title: String, isDeleted: Bool, isDirty: Bool, isConflict: Bool,
        pushErrorCode: String?, updatedAt: Int64
    ) {
        self.id = id
        self.clientID = clientID
        self.origin = origin
        self.title = title
        self.isDeleted = isDeleted
        self.isDirty = isDirty
        self.isConflict = isConflict
        self.pushErrorCode = pushErrorCode
        self.updatedAt = updatedAt
    }

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

/// Why a note's change was refused: the protocol's stable error code (e.g. `note_too_large`) and the server's
/// sentence.
public struct PushError: Sendable, Equatable, Codable {
    public var code: String
    public var message: String

    /// Refused for the account's quota (`quota_exceeded`): every sync tries the note again.
    public var isOverQuota: Bool { code == APIErrorCode.quotaExceeded.rawValue }

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    init(_ body: APIErrorBody) {
        self.init(code: body.code.rawValue, message: body.message)
    }
}

/// One change the server refused (or the client refused to send because it cannot fit the server's limits).
public struct PushFailure: Sendable, Equatable {
    /// The local note.
    public var noteID: Int64
    public var clientID: FlakeID
    public var origin: FlakeID
    /// The reason, e.g. `note_too_large`.
    public var error: PushError
}

/// What a ``NotesClient/sync(progress:)`` did.
public struct SyncReport: Sendable, Equatable {
    /// Changes sent and accepted by the server (every status except `rejected`), including replays.
    public var pushed = 0
    public var created = 0
    public var reconciled = 0
    public var updated = 0
    public var unchanged = 0
    public var merged = 0
    /// Pushes that overlapped another device's edit: the pushed text became a conflict copy.
    public var conflicts = 0
    public var deleted = 0
    /// Deletes refused because the note changed on the server meanwhile: the note came back.
    public var kept = 0
    /// Results the server had already applied (an earlier answer was lost): nothing was applied twice.
    public var replayed = 0
    /// Records received from the pull.
    public var pulled = 0
    /// Pulled records of notes this device had without their server ID, found by (client ID, origin): after a
    /// sign-in, the notes the account already holds. Like ``reconciled`` (found by the server when pushed), each is
    /// a duplicate avoided.
    public var matched = 0
    /// Pulled records that added a note here or changed one (the rest were already up to date, e.g. this
    /// device's own pushes coming back).
    public var applied = 0
    /// Local IDs of notes whose push overlapped another device's edit: the note keeps the other device's text, and
    /// this device's text went into a new conflict copy.
    public var conflictNotes: [Int64] = []
    /// Conflict copies the pull brought from other devices (their text; the note kept this device's or another's).
    public var pulledConflictCopies = 0
    /// Local IDs of notes this device had deleted that came back because another device edited them meanwhile
    /// (an edit wins over a delete): refused deletes (`kept`) and tombstones a pull restored.
    public var undeleted: [Int64] = []
    /// Changes refused by this sync; each note keeps its error and is not pushed again until edited (refused for the
    /// quota: until the next sync).
    public var failures: [PushFailure] = []
    /// Every note the server refuses once this sync ended: this sync's ``failures`` and those refused by earlier
    /// syncs and not edited since (they are not sent again, but they are not synced either).
    public var refused: [PushFailure] = []
    /// Notes still waiting to be pushed after this sync (edited while it ran); refused ones are not counted (see
    /// ``NotesStatus/failed``).
    public var pending = 0
    /// How many push requests and pull pages were exchanged.
    public var requests = 0

    public init() {}

    mutating func count(_ status: ChangeStatus) {
        switch status {
        case .created: created += 1
        case .reconciled: reconciled += 1
        case .updated: updated += 1
        case .unchanged: unchanged += 1
        case .merged: merged += 1
        case .conflict: conflicts += 1
        case .deleted: deleted += 1
        case .kept: kept += 1
        case .rejected: break
        }
    }
}

/// Progress of a sync, for a progress line.
public struct SyncProgress: Sendable, Equatable {
    public enum Phase: String, Sendable {
        /// Sending local changes; `total` is the number of changes in this round.
        case pushing
        /// Receiving changes; `total` is nil (the server does not say how many are waiting).
        case pulling
    }

    public var phase: Phase
    public var done: Int
    public var total: Int?

    public init(phase: Phase, done: Int, total: Int?) {
        self.phase = phase
        self.done = done
        self.total = total
    }
}

/// The account this installation is signed in to.
public struct AccountInfo: Sendable, Equatable {
    public var accountID: FlakeID
    public var username: String
    public var serverURL: String
}

/// A summary of the local state, for `notes status` and for the simulation's invariant checks.
public struct NotesStatus: Sendable, Equatable {
    /// This installation's origin ID (random, minted once).
    public var origin: FlakeID
    /// This installation's MiniFlake instance number (random in 0..<1024, chosen once).
    public var flakeInstance: Int
    /// The last ID minted here (client IDs and edit IDs), persisted with the note it minted.
    public var highWaterMark: FlakeID?
    /// The last client ID minted here with a scheme other than MiniFlake (``NotesEnvironment/clientIDScheme``);
    /// nil when there is none.
    public var clientIDHighWaterMark: FlakeID?
    /// The remembered server (kept after sign-out so the next sign-in needs no URL).
    public var serverURL: String?
    /// The signed-in account, nil when signed out.
    public var account: AccountInfo?
    /// The stored pull cursor (opaque), nil before the first pull and after sign-out.
    public var cursor: String?
    /// When a sync last completed, Unix milliseconds.
    public var lastSyncAt: Int64?
    /// Live (not deleted) notes.
    public var notes: Int
    /// Local tombstones.
    public var deletedNotes: Int
    /// Notes with changes not yet acknowledged by a server.
    public var pending: Int
    /// Notes whose last push was refused (see ``LocalNote/pushError``).
    public var failed: Int
    /// Live conflict copies.
    public var conflicts: Int
    /// Push snapshots waiting for an answer (re-sent unchanged at the next sync).
    public var inFlight: Int
    /// Whether the last sync stopped while the server still had changes to send (an interrupted pull): the next
    /// sync resumes it.
    public var pullUnfinished: Bool = false
    /// The remembered server's largest note, in bytes (from the last sync), if known.
    public var maxNoteBytes: Int? = nil
}

/// What ``NotesClient/signOut(wipe:)`` did.
public struct SignOutReport: Sendable, Equatable {
    /// Whether the server revoked the token (false when it was unreachable; the token is forgotten anyway).
    public var revoked: Bool
    /// Notes with unsynced changes at sign-out: kept on this device, they sync at the next sign-in (or were
    /// deleted when `wipe` was asked).
    public var pending: Int
    /// Notes deleted from this device (`wipe`: the account's and the unowned ones, live ones), 0 otherwise.
    public var wiped: Int
    /// The account whose notes stay on show (nil: never signed in).
    public var account: AccountName?
    /// The account's live notes kept on this device (0 with `wipe`).
    public var kept = 0
    /// Live notes without an owner (written while signed out, never synced), on show again (0 after `wipe`).
    public var unowned = 0
}

/// What ``NotesClient/signIn(server:username:password:progress:)`` did.
public struct SignInReport: Sendable {
    public var account: AccountInfo
    /// Whether local notes were queued to be reconciled with this account (a new account, or the first sign-in
    /// since sign-out).
    public var reconciling: Bool
    /// Whose notes are on show now, and what happened to the others.
    public var owners: OwnerReport
    /// The sync that followed the sign-in; a failure here leaves the installation signed in with its notes
    /// queued, and the next `sync()` finishes the job.
    public var sync: Result<SyncReport, NotesError>
}

/// Formats times the way the protocol does (ISO 8601 UTC with milliseconds), for JSON output.
public enum NotesTime {
    public static func iso8601(unixMilliseconds: Int64) -> String {
        WireTime.format(unixMilliseconds: unixMilliseconds)
    }
}

/// What a sign-in does with the notes written while signed out and never synced (no owner, see ``OwnerPlanner``).
public enum UnownedNotes: String, Sendable, Equatable {
    /// They join the account signing in and are pushed to it.
    case carry
    /// They stay without an owner, set aside while that account is signed in; they come back at sign-out and
    /// are offered again at the next sign-in.
    case keepAside = "keep-aside"
}

/// What a sign-in did to the notes on this device, by owner (see ``OwnerPlanner``).
public struct OwnerReport: Sendable, Equatable {
    /// The account whose notes were on show before (nil: none, or the same account again).
    public var previous: AccountName?
    /// The previous account's notes set aside (live ones): hidden, kept, back when it signs in again.
    public var setAside = 0
    /// The previous account's notes deleted from this device (`wipe`; live ones).
    public var wiped = 0
    /// This account's notes that were set aside and are on show again (live ones).
    public var restored = 0
    /// Notes without an owner that joined this account (live ones).
    public var carried = 0
    /// Notes without an owner kept aside (live ones).
    public var keptAside = 0
    /// Notes that became new notes of this device (a new client ID) because the account already held their (client
    /// ID, origin) with another text: see ``RekeyedNote``.
    public var rekeyed: [RekeyedNote] = []

    public init() {}
}

/// A note of no account that became a new note of this device, with a fresh client ID and this installation's
/// origin, because the account it joined (or the notes of no account) already held a note with its (client ID,
/// origin) and another text: after an account deletion, another device may have carried it there first. Nothing is
/// lost; the two are two notes.
public struct RekeyedNote: Sendable, Equatable {
    public var oldClientID: FlakeID
    public var oldOrigin: FlakeID
    public var clientID: FlakeID
    public var origin: FlakeID
}

/// An account this device has signed in to: its server-minted ID and, when known, its username and server.
/// What `wipe` on a sign-in to another account deletes from this device (see ``NotesClient/wipePreview(server:username:)``).
public struct WipePreview: Sendable, Equatable {
    public var account: AccountName
    /// Live notes of `account` on show.
    public var notes: Int
    /// Those of them (or deleted ones) with changes no server has.
    public var unsynced: Int
}

public struct AccountName: Sendable, Equatable {
    public var accountID: FlakeID
    public var username: String?
    public var serverURL: String?

    /// The username, else the account ID.
    public var display: String { username ?? "account \(accountID)" }
}
