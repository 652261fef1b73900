import Foundation
import MiniFlake
import NoteSyncProtocol

// Export and import: every note with its identity out, exports and plain texts in; each one transaction.

extension NotesClient {
    /// Every live note (unsynced ones, archived ones and conflict copies included) with its identity, tags and
    /// flags: what `notes export` writes.
    public func export() throws(NotesError) -> NotesExport {
        let notes = try store.read { tx in try tx.notes(includeDeleted: false) }
        return NotesExport(
            exportedAt: WireTime.format(unixMilliseconds: now),
            notes: notes.map { note in
                ExportedNote(
                    clientID: note.clientID, origin: note.origin, text: note.text, conflict: note.isConflict,
                    createdAt: WireTime.format(unixMilliseconds: note.createdAt),
                    editedAt: WireTime.format(unixMilliseconds: note.updatedAt), pending: note.isDirty,
                    tags: note.tags.isEmpty ? nil : note.tags, pinned: note.isPinned ? true : nil,
                    archived: note.isArchived ? true : nil,
                    attachments: note.attachments.isEmpty ? nil : note.attachments.map { ExportedAttachment($0) })
            })
    }

    /// Adds notes from exports and plain texts, in one transaction (all or nothing), reporting progress as it goes.
    ///
    /// - Notes of an export keep their client ID, origin, creation and edit times, tags and flags. A note this device
    ///   already has (same client ID and origin) is left as it is; so importing an export on a fresh device of the
    ///   same account, before or after signing in, creates no duplicate: the sign-in finds the notes by client ID.
    /// - A plain text becomes a new note, unless a live note already holds the same text (trailing newlines
    ///   aside), so importing the same files twice adds nothing the second time. A Markdown file's front matter
    ///   (``MarkdownNote``) gives the note its tags and flags.
    ///
    /// - An exported note's attachments (``ExportedAttachment/file``, a path the caller made absolute) are read into
    ///   this device's chunk cache, before the transaction, and must have the checksum the export gives.
    ///
    /// - Throws: `empty_note` never (empty texts are skipped and counted); `invalid_text` for a text over the
    ///   remembered server's limit, `invalid_input` for a tag that breaks ``TagRules``; `file_access` (an attachment
    ///   file that cannot be read, or an export that lists one without its file), `attachment_corrupt` (an attachment
    ///   file whose checksum is not the export's), `invalid_input` also for an encrypted account's note whose text
    ///   and attachments would not fit the server's limit sealed (``requireSealedFits(_:state:in:)``). Nothing is
    ///   imported then.
    public func importNotes(
        _ items: [ImportItem], progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws(NotesError) -> ImportReport {
        let attachments = try stageAttachments(of: items)
        let total = items.reduce(0) { count, item in
            switch item {
            case .export(let export): count + export.notes.count
            case .text, .markdown: count + 1
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
            /// A file's text as a new note, unless empty or already here.
            func addText(_ content: String, state: TagsAndFlags) throws {
                let text = Self.trimmingTrailingNewlines(content)
                if text.allSatisfy(\.isWhitespace) {
                    report.empty += 1
                    return
                }
                guard texts.insert(Self.importKey(text)).inserted else {
                    report.sameText += 1
                    return
                }
                try Self.requireFits(text, baseText: nil, settings: settings)
                let clientID = try tx.mintClientID(with: minter, createdAt: now)
                _ = try tx.insertNote(clientID: clientID, origin: origin, text: text, now: now, state: state)
                report.added += 1
            }
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
                        let state = TagsAndFlags(
                            tags: try Tags.validatedSet(note.tags ?? []), pinned: note.pinned ?? false, archived: note.archived ?? false,
                            attachments: attachments[NoteKey(clientID: note.clientID, origin: note.origin)] ?? [])
                        try Self.requireSealedFits(note.text, state: state, in: tx)
                        try tx.insertNote(
                            clientID: note.clientID, origin: note.origin, text: note.text, createdAt: note.clientID.unixMilliseconds,
                            editedAt: edited, state: state)
                        texts.insert(Self.importKey(note.text))
                        if note.origin == origin { highest = max(highest ?? note.clientID, note.clientID) }
                        report.added += 1
                    }
                case .text(let content, _):
                    defer { advance() }
                    try addText(content, state: TagsAndFlags())
                case .markdown(let content, _):
                    defer { advance() }
                    let parsed = MarkdownNote.parse(content)
                    try addText(
                        parsed.text,
                        state: TagsAndFlags(tags: try Tags.validatedSet(parsed.tags), pinned: parsed.pinned, archived: parsed.archived))
                }
            }
            // Client IDs of this installation's origin, imported from its own export: never mint them again.
            if let highest { try tx.raiseHighWaterMark(to: highest) }
            return report
        }
    }

    /// The attachments of the exported notes among `items`, read into the chunk cache and checked against the
    /// export's checksums, by note.
    private func stageAttachments(of items: [ImportItem]) throws(NotesError) -> [NoteKey: [AttachmentManifest]] {
        var staged: [NoteKey: [AttachmentManifest]] = [:]
        let cache = chunkCache
        for case .export(let export) in items {
            for note in export.notes {
                guard let attachments = note.attachments, !attachments.isEmpty else { continue }
                try Self.requireAttachmentCount(attachments.count)
                var manifests: [AttachmentManifest] = []
                for attachment in attachments {
                    guard let file = attachment.file else {
                        throw NotesError(.fileAccess, "The export lists the attachment \(attachment.name) without its file; export to a file (`notes export PATH`).")
                    }
                    guard AttachmentManifest.isAcceptableName(attachment.name), !manifests.contains(where: { $0.name == attachment.name }) else {
                        throw NotesError(.invalidInput, "The export's attachment name '\(attachment.name)' is not one a note can have twice or at all.")
                    }
                    let mediaType = AttachmentManifest.isAcceptableMediaType(attachment.mediaType)
                        ? attachment.mediaType : Chunker.mediaType(forName: attachment.name)
                    let url = URL(fileURLWithPath: file)
                    let manifest = try cache.stage(file: url, name: attachment.name, mediaType: mediaType, sealing: attachmentSealing(for: url))
                    guard manifest.sha256.hex == attachment.sha256, manifest.size == attachment.size else {
                        throw NotesError(
                            .attachmentCorrupt, "\(file) is not the attachment the export lists (its checksum or size differs); nothing was imported.")
                    }
                    manifests.append(manifest)
                }
                staged[NoteKey(clientID: note.clientID, origin: note.origin)] = StoredAttachments.canonical(manifests)
            }
        }
        return staged
    }

    /// A note's identity.
    private struct NoteKey: Hashable {
        var clientID: FlakeID
        var origin: FlakeID
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
    public var conflict = false
    public var createdAt: String?
    public var editedAt: String?
    /// It had changes no server had when exported (informational).
    public var pending: Bool?
    /// Its tags, as written (absent: none; absent from exports older than tags).
    public var tags: [String]?
    /// Pinned (absent: no).
    public var pinned: Bool?
    /// Archived (absent: no).
    public var archived: Bool?
    /// Its attachments (absent: none; absent from exports older than attachments).
    public var attachments: [ExportedAttachment]?
}

/// An attachment of an exported note: what it is, and where its file was written beside the export.
public struct ExportedAttachment: Codable, Sendable, Equatable {
    public var name: String
    public var mediaType: String
    /// Bytes.
    public var size: Int64
    /// The file's SHA-256 (hex): `notes import` checks the file against it.
    public var sha256: String
    /// The file, relative to the export's directory (`notes export PATH` writes it under `PATH.attachments/`); absent
    /// when the export went to standard output. ``NotesClient/importNotes(_:progress:)`` reads it as given: the
    /// caller makes it absolute.
    public var file: String?

    public init(_ manifest: AttachmentManifest, file: String? = nil) {
        name = manifest.name
        mediaType = manifest.mediaType
        size = manifest.size
        sha256 = manifest.sha256.hex
        self.file = file
    }
}

/// Something `notes import` reads.
public enum ImportItem: Sendable {
    /// A JSON export.
    case export(NotesExport)
    /// A text file's content: one note.
    case text(String, source: String)
    /// A Markdown file's content: one note, whose front matter (``MarkdownNote``), when it has one, gives its tags
    /// and flags.
    case markdown(String, source: String)
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
