import ArgumentParser
import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// A note as `--json` prints it.
struct NoteOutput: Encodable {
    /// The short ID people type.
    var id: String
    /// The full client ID, decimal (the wire form) and base32.
    var clientID: String
    var clientIDBase32: String
    var origin: String
    var serverID: String?
    var text: String
    var deleted: Bool
    /// Has changes not yet acknowledged by a server.
    var pending: Bool
    var conflict: Bool
    /// For a conflict copy: the short ID of the note it was split from, when that note is on this device.
    var conflictOf: String?
    var error: PushError?
    var createdAt: String
    /// When the note was last edited (by the editing device's clock; the same on every device).
    var editedAt: String
    /// The same time as `editedAt` (kept for scripts written before `editedAt`).
    var updatedAt: String
    /// For a conflict copy: whose text it holds (`this device`, `another device`).
    var conflictFrom: String?
    /// Its tags, as written, in the order of their keys.
    var tags: [String]
    var pinned: Bool
    var archived: Bool
    /// Its attachments (name, size, media type), by name.
    var attachments: [AttachedFile]

    /// An attachment as a note's `--json` lists it (`notes attachments --json` says more).
    struct AttachedFile: Encodable {
        var name: String
        var size: Int64
        var mediaType: String
    }

    init(_ note: LocalNote, id: String, conflictOf: String? = nil) {
        self.id = id
        clientID = note.clientID.description
        clientIDBase32 = note.clientID.base32
        origin = note.origin.description
        serverID = note.serverID?.description
        text = note.text
        deleted = note.isDeleted
        pending = note.isDirty
        conflict = note.isConflict
        self.conflictOf = conflictOf
        error = note.pushError
        createdAt = NotesTime.iso8601(unixMilliseconds: note.createdAt)
        editedAt = NotesTime.iso8601(unixMilliseconds: note.updatedAt)
        updatedAt = editedAt
        if note.isConflict { conflictFrom = note.isConflictFromThisDevice ? "this device" : "another device" }
        tags = note.tags
        pinned = note.isPinned
        archived = note.isArchived
        attachments = note.attachments.map { AttachedFile(name: $0.name, size: $0.size, mediaType: $0.mediaType) }
    }
}

/// A version of a note's history as `--json` prints it.
struct VersionOutput: Encodable {
    /// The note's short ID.
    var id: String
    var version: Int64
    var text: String
    var deleted: Bool
    var tags: [String]
    var pinned: Bool
    var archived: Bool
    /// When it was edited (the editing device's clock) and saved (the server's).
    var editedAt: String
    var savedAt: String
    /// The device that pushed it, when it gave a name.
    var device: String?
    /// The UTF-8 bytes of its text.
    var bytes: Int

    init(_ version: NoteHistory.Version, id: String) {
        self.id = id
        self.version = version.version
        text = version.text
        deleted = version.isDeleted
        tags = version.tags
        pinned = version.isPinned
        archived = version.isArchived
        editedAt = NotesTime.iso8601(unixMilliseconds: version.editedAt)
        savedAt = NotesTime.iso8601(unixMilliseconds: version.savedAt)
        device = version.device
        bytes = version.text.utf8.count
    }
}

/// A listing, one line a note: `ID  2 hours ago  first line  [pinned]  #tag #tag`, built as one UTF-8 buffer (no
/// newline at the end). Markers after the title: `[pinned]`, `[archived]`, `[conflict copy]`, `[not synced: CODE]`.
///
/// - Parameters:
///   - suffixes: text added to the end of a note's line, keyed by local ID.
///   - now: show times relative to this (Unix milliseconds) when given, else as dates.
func listing(_ notes: [NoteSummary], ids: [Int64: String], suffixes: [Int64: String] = [:], now: Int64? = nil) -> [UInt8] {
    let width = notes.reduce(ShortID.minimumLength) { max($0, ids[$1.id]?.utf8.count ?? 13) }
    var times = LocalTime.Cache()
    let shownTimes = notes.map { note in now.map { LocalTime.relative(note.updatedAt, now: $0) } ?? times.format(note.updatedAt) }
    let timeWidth = shownTimes.reduce(0) { max($0, $1.count) }
    var output: [UInt8] = []
    output.reserveCapacity(notes.count * 72)
    let space = UInt8(ascii: " ")
    for (index, note) in notes.enumerated() {
        if index > 0 { output.append(UInt8(ascii: "\n")) }
        let id = ids[note.id] ?? note.clientID.base32
        output.append(contentsOf: id.utf8)
        output.append(contentsOf: repeatElement(space, count: width - id.utf8.count + 2))
        output.append(contentsOf: shownTimes[index].utf8)
        output.append(contentsOf: repeatElement(space, count: timeWidth - shownTimes[index].count + 2))
        if note.isDeleted {
            output.append(contentsOf: "(deleted)".utf8)
        } else {
            output.append(contentsOf: note.title.utf8)
            if note.isPinned { output.append(contentsOf: "  [pinned]".utf8) }
            if note.isArchived { output.append(contentsOf: "  [archived]".utf8) }
            if note.isConflict { output.append(contentsOf: "  [conflict copy]".utf8) }
        }
        if let code = note.pushErrorCode { output.append(contentsOf: "  [not synced: \(code)]".utf8) }
        if !note.tags.isEmpty && !note.isDeleted {
            output.append(contentsOf: "  ".utf8)
            output.append(contentsOf: shownTags(note.tags).utf8)
        }
        if let suffix = suffixes[note.id] { output.append(contentsOf: suffix.utf8) }
    }
    return output
}

/// Tags as a listing shows them: `#work #idea`.
func shownTags(_ tags: [String]) -> String {
    tags.map { "#" + $0 }.joined(separator: " ")
}

/// Now, in Unix milliseconds (for relative times on screen; the library's clock stamps notes).
var nowMilliseconds: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

/// Prints notes as a listing or JSON.
func printNotes(_ notes: [LocalNote], ids: [Int64: String], json: Bool, empty: String) throws {
    if json {
        try Console.json(notes.map { NoteOutput($0, id: ids[$0.id] ?? $0.clientID.base32) })
    } else if notes.isEmpty {
        Console.out(empty)
    } else {
        Console.out(bytes: listing(notes.map(NoteSummary.init), ids: ids))
    }
}
