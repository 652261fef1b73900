import Foundation
import MiniFlake

// Resolving conflict copies: each resolution is one transaction of ordinary edits and deletes.

extension NotesClient {
    /// What to keep of a conflict copy and the note it was split from.
    public enum ConflictResolution: Sendable, Equatable {
        /// The note as it is; the copy is deleted.
        case keepNote
        /// The copy's text becomes the note's; the copy is deleted.
        case keepCopy
        /// Both texts: the copy's becomes a new, ordinary note (with the copy's tags and flags); the copy is deleted.
        case keepBoth
        /// This text (a merge) becomes the note's; the copy is deleted.
        case merged(String)
    }

    /// The note a conflict copy was split from, when it is on this device.
    public func original(ofConflictCopy copy: LocalNote) throws(NotesError) -> LocalNote? {
        guard let serverID = copy.conflictOf else { return nil }
        return try note(serverID: serverID)
    }

    /// Resolves a conflict: keeps what `resolution` says and deletes the copy, in one transaction. Everything it
    /// does syncs like ordinary edits and deletes, so the copy disappears from every device.
    ///
    /// - Returns: the note that holds the result (the original, or the new note for ``ConflictResolution/keepBoth``);
    ///   nil for ``ConflictResolution/keepNote`` when the original is not on this device.
    /// - Throws: `invalid_input` when `copyID` is not a live conflict copy, or the original is needed and not here;
    ///   `empty_note`, `invalid_text` for a merged text add or edit would refuse.
    @discardableResult
    public func resolveConflict(copy copyID: LocalNote.ID, _ resolution: ConflictResolution) throws(NotesError) -> LocalNote? {
        if case .merged(let text) = resolution { try Self.requireContent(text) }
        let now = now
        return try store.write { tx in
            let copy = try tx.note(copyID)
            guard copy.isConflict && !copy.isDeleted else {
                throw NotesError(.invalidInput, "That note is not a conflict copy (see `notes conflicts`).")
            }
            let original = try copy.conflictOf.flatMap { serverID in try tx.note(serverID: serverID) }
            func requireOriginal() throws -> LocalNote {
                guard let original, !original.isDeleted else {
                    throw NotesError(
                        .invalidInput,
                        "The note this copy was split from is not on this device (or was deleted); keep both or keep the copy as a note with --keep both.")
                }
                return original
            }
            var result: LocalNote?
            switch resolution {
            case .keepNote:
                result = original
            case .keepCopy, .merged:
                let target = try requireOriginal()
                let text: String
                if case .merged(let merged) = resolution { text = merged } else { text = copy.text }
                try Self.requireFits(text, baseText: target.baseText, settings: try tx.requireSettings())
                if target.text != text { try tx.replaceText(ofNote: target.id, with: text, now: now) }
                result = try tx.note(target.id)
            case .keepBoth:
                let clientID = try tx.mintClientID(with: minter, createdAt: now)
                result = try tx.insertNote(clientID: clientID, origin: origin, text: copy.text, now: now, state: copy.tagsAndFlags)
            }
            _ = try Self.delete(copyID, in: tx, now: now)
            return result
        }
    }
}
