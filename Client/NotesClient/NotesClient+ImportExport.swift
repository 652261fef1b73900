import Foundation
import MiniFlake
import NoteSyncProtocol

// Export and import: every note with its identity out, exports and plain texts in; each one transaction.

extension NotesClient {
    /// Every live note (unsynced ones and conflict copies included) with its identity: what `notes export` writes.
    public func export() throws(NotesError) -> NotesExport {
        let notes = try store.read { tx in try tx.notes(includeDeleted: false) }
        return NotesExport(
            exportedAt: WireTime.format(unixMilliseconds: now),
            notes: notes.map { note in
                ExportedNote(
                    clientID: note.clientID, origin: note.origin, text: note.text, conflict: note.isConflict,
                    createdAt: WireTime.format(unixMilliseconds: note.createdAt),
                    editedAt: WireTime.format(unixMilliseconds: note.updatedAt), pending: note.isDirty)
            })
    }

    /// Adds notes from exports and plain texts, in one transaction (all or nothing), reporting progress as it goes.
    ///
    /// - Notes of an export keep their client ID, origin, creation and edit times. A note this device already has
    ///   (same client ID and origin) is left as it is; so importing an export on a fresh device of the same
    ///   account, before or after signing in, creates no duplicate: the sign-in finds the notes by client ID.
    /// - A plain text becomes a new note, unless a live note already holds the same text (trailing newlines
    ///   aside), so importing the same files twice adds nothing the second time.
    ///
    /// - Throws: `empty_note` never (empty texts are skipped and counted); `invalid_text` for a text over the
    ///   remembered server's limit (nothing is imported).
    public func importNotes(
        _ items: [ImportItem], progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws(NotesError) -> ImportReport {
        let total = items.reduce(0) { count, item in
            switch item {
            case .export(let export): count + export.notes.count
            case .text: count + 1
            }
        }
        let now = now
        return try store.write { tx in
            var report = ImportReport()
            let settings = try tx.requireSettings()
            var texts = Set(try tx.liveTextKeys())
            var done = 0
            func advance() {
                done += 1
                if done % 500 == 0 || done == total { progress?(done, total) }
            }
            var highest: FlakeID?
            for item in items {
                switch item {
                case .export(let export):
                    for note in export.notes {
                        defer { advance() }
                        if try tx.hasNote(clientID: note.clientID, origin: note.origin) {
                            report.alreadyHere += 1
                            continue
                        }
                        if note.text.allSatisfy(\.isWhitespace) {
                            report.empty += 1
                            continue
                        }
                        try Self.requireFits(note.text, baseText: nil, settings: settings)
                        let edited = WireTime.parse(note.editedAt ?? "") ?? now
                        try tx.insertNote(
                            clientID: note.clientID, origin: note.origin, text: note.text, createdAt: note.clientID.unixMilliseconds,
                            editedAt: edited)
                        texts.insert(Self.importKey(note.text))
                        if note.origin == origin { highest = max(highest ?? note.clientID, note.clientID) }
                        report.added += 1
                    }
                case .text(let text, _):
                    defer { advance() }
                    let text = Self.trimmingTrailingNewlines(text)
                    if text.allSatisfy(\.isWhitespace) {
                        report.empty += 1
                        continue
                    }
                    guard texts.insert(Self.importKey(text)).inserted else {
                        report.sameText += 1
                        continue
                    }
                    try Self.requireFits(text, baseText: nil, settings: settings)
                    let clientID = try tx.mintClientID(with: minter, createdAt: now)
                    _ = try tx.insertNote(clientID: clientID, origin: origin, text: text, now: now)
                    report.added += 1
                }
            }
            // Client IDs of this installation's origin, imported from its own export: never mint them again.
            if let highest { try tx.raiseHighWaterMark(to: highest) }
            return report
        }
    }

    /// What decides that a plain text is already here: the text without trailing newlines.
    static func importKey(_ text: String) -> String { trimmingTrailingNewlines(text) }

    static func trimmingTrailingNewlines(_ text: String) -> String {
        var text = Substring(text)
        while let last = text.last, last == "\n" || last == "\r\n" || last == "\r" { text.removeLast() }
        return String(text)
    }
}

/// A `notes export --format json` document.
public struct NotesExport: Codable, Sendable, Equatable {
    /// Always ``formatName``: what tells an export from any other JSON.
    public var format: String
    public var version: Int
    public var exportedAt: String
    public var notes: [ExportedNote]

    public static let formatName = "flakenotes-export"

    public init(exportedAt: String, notes: [ExportedNote]) {
        format = Self.formatName
        version = 1
        self.exportedAt = exportedAt
        self.notes = notes
    }
}

/// One note of an export: its identity (client ID and origin, which the server reconciles by), text and times.
public struct ExportedNote: Codable, Sendable, Equatable {
    public var clientID: FlakeID
    public var origin: FlakeID
    public var text: String
    /// A conflict copy (informational: an imported copy is an ordinary note until a sync says otherwise).
    public var conflict: Bool
    public var createdAt: String?
    public var editedAt: String?
    /// It had changes no server had when exported (informational).
    public var pending: Bool?

    public init(
        clientID: FlakeID, origin: FlakeID, text: String, conflict: Bool = false, createdAt: String? = nil,
        editedAt: String? = nil, pending: Bool? = nil
    ) {
        self.clientID = clientID
        self.origin = origin
        self.text = text
        self.conflict = conflict
        self.createdAt = createdAt
        self.editedAt = editedAt
        self.pending = pending
    }
}

/// Something `notes import` reads.
public enum ImportItem: Sendable {
    /// A JSON export.
    case export(NotesExport)
    /// A Markdown or text file's content: one note.
    case text(String, source: String)
}

/// What an import did.
public struct ImportReport: Sendable, Equatable, Codable {
    /// Notes added.
    public var added = 0
    /// Exported notes this device already had (same client ID and origin), left as they are.
    public var alreadyHere = 0
    /// Plain texts a live note already holds, not added again.
    public var sameText = 0
    /// Empty texts, skipped.
    public var empty = 0
}
