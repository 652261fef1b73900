import MiniFlake
import NoteCrypto
import NoteSyncProtocol

extension PushPlanner {
    /// The push rules of an encrypted account (``PushPlanner`` rule 8): what the server can check of a change it
    /// cannot read.
    enum EncryptedRules {
        /// Why a change of an encrypted account is refused before it is planned, or nil when it may be planned: its
        /// text must be a well-formed ``NoteEnvelope`` (a delete's may be empty) sealed under a generation the account
        /// has, and it must carry nothing in the clear beside it (the base text, tags, flags, their bases).
        static func refusal(
            of change: NoteChange, generation: UInt32, limits: SyncLimits
        ) -> (APIErrorCode, NoteChange.CodingKeys, String)? {
            let plaintextFields: [(NoteChange.CodingKeys, Bool)] = [
                (.baseText, change.baseText != nil), (.tags, change.tags != nil), (.pinned, change.pinned != nil),
                (.archived, change.archived != nil), (.baseTags, change.baseTags != nil), (.basePinned, change.basePinned != nil),
                (.baseArchived, change.baseArchived != nil), (.attachments, change.attachments != nil),
                (.baseAttachments, change.baseAttachments != nil),
            ]
            if let (field, _) = plaintextFields.first(where: { $0.1 }) {
                return (
                    .invalidField, field,
                    "An encrypted account's change carries no \(field.rawValue): it would be stored in the clear (it belongs in the envelope)."
                )
            }
            if change.deleted, change.text.isEmpty { return nil }
            let envelope: NoteEnvelope
            do {
                envelope = try NoteEnvelope(text: change.text, maximumByteCount: limits.maxNoteBytes)
            } catch {
                return (
                    .notEncrypted, .text,
                    "The account is end-to-end encrypted and the text is not a note envelope (\(error.code)); nothing was stored."
                )
            }
            guard envelope.keyGeneration <= generation else {
                return (
                    .invalidField, .text,
                    "The envelope is sealed under key generation \(envelope.keyGeneration); the account's newest is \(generation)."
                )
            }
            return nil
        }

        /// Whether a change whose base is not the note's current version must go back to the device (`stale`): every
        /// change but a replay of the note's own text and a delete of a tombstone (both `unchanged`).
        static func isStale(_ change: NoteChange, note: StoredNote) -> Bool {
            if change.deleted { return !note.deleted }
            return change.text.utf8.count != note.text.utf8.count || !change.text.utf8.elementsEqual(note.text.utf8)
        }
    }
}
