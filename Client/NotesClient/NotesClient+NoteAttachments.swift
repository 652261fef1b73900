import Foundation
import NoteSyncProtocol

/// An attachment of a note as `notes attachments` lists it: its manifest, and whether every chunk of it is on this
/// device (so that saving it needs no server).
public struct NoteAttachment: Sendable, Equatable {
    public var manifest: AttachmentManifest
    /// Every chunk is in this device's chunk cache.
    public var isOnDevice: Bool

    public var name: String { manifest.name }
    public var size: Int64 { manifest.size }
    public var mediaType: String { manifest.mediaType }
}

// Attachments on notes (issue 33): a note's attachments are metadata that travel, merge and are versioned like its
// tags (``TagsAndFlags/attachments``); attaching or detaching a file is a local edit of the note. The bytes are
// chunks: attaching puts them in this device's chunk cache, a sync sends those the server lacks before the push that
// refers to them, and `save` fetches those this device lacks (never a pull: downloads are lazy).

extension NotesClient {
    /// Attaches files to a live note, each under its file name: every file is read once, a chunk at a time, into this
    /// device's chunk cache (nothing is sent: the next sync does; an encrypted account's note's file is read twice,
    /// hashed for its key first, and its chunks are sealed, signed in or not: ``attachmentSealing(for:note:)``), then
    /// the note's attachments gain their manifests,
    /// in one local edit (revision bumped, dirty, edit time now). All or nothing: an unreadable file, or a name
    /// clash, leaves the note as it was.
    ///
    /// - Parameter names: The attachments' names, one per file; the files' own names when nil.
    /// - Throws: `note_not_found` (also for a deleted note), `file_access` (a file that cannot be read),
    ///   `attachment_exists` (the note has an attachment of that name, or two files share one: detach it first),
    ///   `invalid_input` (a name the protocol does not take, more attachments than a note may have, an encrypted
    ///   account's note whose envelope would be over the server's limit: ``requireSealedFits(_:state:in:)``),
    ///   `data_directory`.
    @discardableResult
    public func attach(_ files: [URL], to id: LocalNote.ID, names: [String]? = nil) throws(NotesError) -> LocalNote {
        precondition(names == nil || names?.count == files.count, "one name per file")
        let names = names ?? files.map(\.lastPathComponent)
        let note = try note(id)
        try Self.requireAttachable(note)
        var taken = Set(note.attachments.map(\.name))
        for name in names {
            guard AttachmentManifest.isAcceptableName(name) else {
                throw NotesError(
                    .invalidInput, "'\(name)' cannot name an attachment: 1–\(AttachmentManifest.maxNameBytes) UTF-8 bytes, without '/' or control characters.")
            }
            guard taken.insert(name).inserted else {
                throw NotesError(.attachmentExists, "The note already has an attachment named \(name); detach it first (`notes detach`).")
            }
        }
        try Self.requireAttachmentCount(note.attachments.count + files.count)
        let cache = chunkCache
        var added: [AttachmentManifest] = []
        for (file, name) in zip(files, names) {
            added.append(
                try cache.stage(file: file, name: name, mediaType: Chunker.mediaType(forName: name), sealing: attachmentSealing(for: file, note: id)))
        }
        let now = now
        return try store.write { tx in
            let current = try tx.note(id)
            guard !current.isDeleted else { throw Self.deletedNote() }
            if let clash = added.first(where: { manifest in current.attachments.contains { $0.name == manifest.name } }) {
                throw NotesError(.attachmentExists, "The note already has an attachment named \(clash.name); detach it first (`notes detach`).")
            }
            var state = current.tagsAndFlags
            state.attachments = StoredAttachments.canonical(state.attachments + added)
            try Self.requireChunkAddresses(state.attachments, base: current.baseAttachments)
            try Self.requireSealedFits(current.text, state: state, in: tx)
            try tx.replaceState(ofNote: current, with: state, now: now)
            return try tx.note(id)
        }
    }

    /// Takes the attachment `name` off a live note, as a local edit (the chunks stay in the cache and, on the server,
    /// until no note refers to them and the collector's grace period has passed).
    ///
    /// - Throws: `note_not_found` (also for a deleted note), `attachment_not_found`.
    @discardableResult
    public func detach(_ name: String, from id: LocalNote.ID) throws(NotesError) -> LocalNote {
        let now = now
        return try store.write { tx in
            let note = try tx.note(id)
            guard !note.isDeleted else { throw Self.deletedNote() }
            _ = try Self.attachment(name, of: note)
            var state = note.tagsAndFlags
            state.attachments.removeAll { $0.name == name }
            try tx.replaceState(ofNote: note, with: state, now: now)
            return try tx.note(id)
        }
    }

    /// A note's attachments, by name, each with whether every chunk of it is on this device.
    ///
    /// - Throws: `note_not_found`.
    public func attachments(of id: LocalNote.ID) throws(NotesError) -> [NoteAttachment] {
        try note(id).attachments.map { NoteAttachment(manifest: $0, isOnDevice: hasAttachment($0)) }
    }

    /// Writes the attachment `name` of a note to `destination` (created or replaced once the whole file checked
    /// out), fetching only the chunks this device lacks (see ``downloadAttachment(_:to:progress:)``). Needs no server
    /// when every chunk is here.
    ///
    /// - Throws: `note_not_found`, `attachment_not_found`, and those of ``downloadAttachment(_:to:progress:)``
    ///   (`not_signed_in` only when a chunk must be fetched).
    public func saveAttachment(
        _ name: String, of id: LocalNote.ID, to destination: URL, progress: (@Sendable (AttachmentProgress) -> Void)? = nil
    ) async throws(NotesError) -> AttachmentTransfer {
        try await downloadAttachment(try Self.attachment(name, of: note(id)), to: destination, progress: progress)
    }

    /// Writes the attachment `name` of a note to `output` (standard output) as it is assembled (see
    /// ``downloadAttachment(_:to:progress:)-(_,FileHandle,_)``).
    public func saveAttachment(
        _ name: String, of id: LocalNote.ID, to output: FileHandle, progress: (@Sendable (AttachmentProgress) -> Void)? = nil
    ) async throws(NotesError) -> AttachmentTransfer {
        try await downloadAttachment(try Self.attachment(name, of: note(id)), to: output, progress: progress)
    }

    /// The attachment `name` of `note`.
    ///
    /// - Throws: `attachment_not_found`, naming the ones it has.
    static func attachment(_ name: String, of note: LocalNote) throws(NotesError) -> AttachmentManifest {
        guard let manifest = note.attachments.first(where: { $0.name == name }) else {
            let names = note.attachments.map(\.name)
            throw NotesError(
                .attachmentNotFound,
                "The note has no attachment named \(name)" + (names.isEmpty ? "; it has none." : "; it has: \(names.joined(separator: ", ")).")
            )
        }
        return manifest
    }

    /// Refuses more attachments than a note may have (``AttachmentRules/maxAttachmentsPerNote``).
    static func requireAttachmentCount(_ count: Int) throws(NotesError) {
        if count > AttachmentRules.maxAttachmentsPerNote {
            throw NotesError(.invalidInput, "A note has at most \(AttachmentRules.maxAttachmentsPerNote) attachments; this would give it \(count).")
        }
    }

    /// Refuses attachments whose change could not be pushed: more chunk addresses, with what was last synced of them
    /// (`base`), than one change may carry (``AttachmentRules/maxChunkAddressesPerChange``, 48 GiB of files).
    static func requireChunkAddresses(_ attachments: [AttachmentManifest], base: [AttachmentManifest]) throws(NotesError) {
        let count = AttachmentRules.chunkAddressCount(attachments: attachments, baseAttachments: base, chunkRefs: nil)
        if count > AttachmentRules.maxChunkAddressesPerChange {
            throw NotesError(
                .invalidInput,
                "A note's change refers to at most \(AttachmentRules.maxChunkAddressesPerChange) chunks (48 GiB of attachments); this one would refer to \(count).")
        }
    }

    /// Refuses attachments an encrypted account's note could not carry (attached or imported): its manifests travel in its envelope, whose
    /// text the remembered server takes up to its `maxNoteBytes` (each chunk's address is about 90 characters of it,
    /// so about 2,900 chunks, 2.8 GiB of files, fit on a note without text at the default 256 KiB). Without
    /// remembered limits (never synced), or for a plaintext account, nothing is refused here.
    static func requireSealedFits(_ text: String, state: TagsAndFlags, in tx: LocalStore.Transaction) throws {
        let settings = try tx.requireSettings()
        guard let limit = settings.maxNoteBytes, let account = settings.account, try tx.keyRing(of: account.accountID) != nil else { return }
        let count = NoteSealing.sealedTextCount(text: text, state: state)
        if count > limit {
            let server = settings.serverURL.map { " at \($0)" } ?? ""
            throw NotesError(
                .invalidInput,
                "The note's text and attachments would encrypt to \(count) bytes; the server\(server) takes notes of at most \(limit) bytes, so it could never sync. Nothing was changed.")
        }
    }

    /// A live note. An encrypted account's note takes attachments as any: its files' chunks are sealed on the way into
    /// the cache (``attachmentSealing(for:note:)``) and its manifests, with the files' keys, travel inside its envelope
    /// (`NotePayload.attachments`; the change carries only the sealed chunks' addresses, `chunkRefs`).
    static func requireAttachable(_ note: LocalNote) throws(NotesError) {
        guard !note.isDeleted else { throw deletedNote() }
    }

    private static func deletedNote() -> NotesError {
        NotesError(.noteNotFound, "The note is deleted; restore it first (`notes restore`).")
    }
}
