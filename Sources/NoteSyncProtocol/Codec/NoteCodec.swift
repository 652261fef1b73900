import Foundation
import MiniFlake

// A note's hand-written codecs, both ways: the change a client pushes (``NoteChange``) and the record a pull returns
// (``NoteRecord``). A field of a note is written and read here, once per direction; the messages around them (the
// push body and answer, the pull page) are in PushCodec.swift and PullCodec.swift. Same contract as every codec here:
// writers write the bytes `WireJSON.encoder()` writes, readers read the common shape and give up (nil) on anything
// else, which goes to `JSONDecoder`.

/// The key tables of a note's two wire forms.
enum NoteKeys {
    static let change = KeyTable<NoteChange.CodingKeys>()
    static let record = KeyTable<NoteRecord.CodingKeys>()
}

// MARK: - The pushed change

extension NoteChange {
    /// The JSON `WireJSON.encoder()` writes for this change (the same bytes, in its encoding order).
    public func encodedJSON() -> Data {
        let tagBytes = (tags ?? []).reduce(0) { $0 + $1.utf8.count + 3 } + (baseTags ?? []).reduce(0) { $0 + $1.utf8.count + 3 }
        let attachmentBytes = AttachmentManifest.estimatedBytes(attachments) + AttachmentManifest.estimatedBytes(baseAttachments)
            + 67 * (chunkRefs?.count ?? 0)
        let writer = Writer(
            bytes: JSONBytes(capacity: 200 + text.utf8.count + (baseText?.utf8.count ?? 0) + tagBytes + attachmentBytes))
        writer.change(self)
        return writer.bytes.takeData()
    }

    private struct Writer: JSONByteWriting {
        let bytes: JSONBytes

        func change(_ change: NoteChange) {
            let keys = NoteKeys.change
            bytes.append(UInt8(ascii: "{"))
            field(keys.quoted(.clientID), first: true)
            quotedInteger(change.clientID.rawValue)
            field(keys.quoted(.origin))
            quotedInteger(change.origin.rawValue)
            field(keys.quoted(.serverID), ifPresent: change.serverID) { quotedInteger($0.rawValue) }
            field(keys.quoted(.editID))
            quotedInteger(change.editID.rawValue)
            field(keys.quoted(.text))
            string(change.text)
            field(keys.quoted(.deleted))
            bool(change.deleted)
            field(keys.quoted(.baseVersion), ifPresent: change.baseVersion) { integer($0) }
            field(keys.quoted(.baseText), ifPresent: change.baseText) { string($0) }
            field(keys.quoted(.editedAt), ifPresent: change.editedAt) { string($0) }
            field(keys.quoted(.tags), ifPresent: change.tags) { strings($0) }
            field(keys.quoted(.pinned), ifPresent: change.pinned) { bool($0) }
            field(keys.quoted(.archived), ifPresent: change.archived) { bool($0) }
            field(keys.quoted(.baseTags), ifPresent: change.baseTags) { strings($0) }
            field(keys.quoted(.basePinned), ifPresent: change.basePinned) { bool($0) }
            field(keys.quoted(.baseArchived), ifPresent: change.baseArchived) { bool($0) }
            field(keys.quoted(.attachments), ifPresent: change.attachments) { manifests($0) }
            field(keys.quoted(.baseAttachments), ifPresent: change.baseAttachments) { manifests($0) }
            field(keys.quoted(.chunkRefs), ifPresent: change.chunkRefs) { hashes($0) }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Reads one change in the common shape (string IDs, known keys once each). `null` is refused for every field
    /// (the protocol answers it `invalid_json`), so the reader gives up on it and `JSONDecoder` refuses it; so it does
    /// on a set of tags that breaks ``TagRules`` and on attachments that break ``AttachmentRules`` (`invalid_field`).
    static func read(_ reader: inout JSONByteReader) -> NoteChange? {
        var clientID: FlakeID?, origin: FlakeID?, serverID: FlakeID?, editID: FlakeID?
        var text: String?, deleted: Bool?, baseVersion: Int64?, baseText: String?, editedAt: String?
        var tags: [String]?, pinned: Bool?, archived: Bool?, baseTags: [String]?, basePinned: Bool?, baseArchived: Bool?
        var attachments: [AttachmentManifest]?, baseAttachments: [AttachmentManifest]?, chunkRefs: [ContentHash]?
        func validTags(_ reader: inout JSONByteReader) -> [String]? {
            reader.strings().flatMap { TagRules.violation(in: $0) == nil ? $0 : nil }
        }
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = NoteKeys.change.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .clientID: clientID = reader.id(); return clientID != nil
            case .origin: origin = reader.id(); return origin != nil
            case .editID: editID = reader.id(); return editID != nil
            case .text: text = reader.string(); return text != nil
            case .serverID: serverID = reader.id(); return serverID != nil
            case .deleted: deleted = reader.bool(); return deleted != nil
            case .baseVersion: baseVersion = reader.integer(); return baseVersion != nil
            case .baseText: baseText = reader.string(); return baseText != nil
            // A time that does not parse is left to JSONDecoder, which refuses it naming the field.
            case .editedAt:
                editedAt = reader.string().flatMap { WireTime.parse($0) == nil ? nil : $0 }
                return editedAt != nil
            case .tags: tags = validTags(&reader); return tags != nil
            case .pinned: pinned = reader.bool(); return pinned != nil
            case .archived: archived = reader.bool(); return archived != nil
            case .baseTags: baseTags = validTags(&reader); return baseTags != nil
            case .basePinned: basePinned = reader.bool(); return basePinned != nil
            case .baseArchived: baseArchived = reader.bool(); return baseArchived != nil
            case .attachments: attachments = reader.validManifests(); return attachments != nil
            case .baseAttachments: baseAttachments = reader.validManifests(); return baseAttachments != nil
            case .chunkRefs: chunkRefs = reader.hashes(); return chunkRefs != nil
            }
        }
        guard complete, let clientID, let origin, let editID, let text,
            AttachmentRules.chunkAddressCount(attachments: attachments, baseAttachments: baseAttachments, chunkRefs: chunkRefs)
                <= AttachmentRules.maxChunkAddressesPerChange
        else { return nil }
        return NoteChange(
            clientID: clientID, origin: origin, serverID: serverID, editID: editID, text: text,
            deleted: deleted ?? false, baseVersion: baseVersion, baseText: baseText, editedAt: editedAt,
            tags: tags, pinned: pinned, archived: archived, baseTags: baseTags, basePinned: basePinned,
            baseArchived: baseArchived, attachments: attachments, baseAttachments: baseAttachments, chunkRefs: chunkRefs)
    }
}

// MARK: - The pulled record

extension NoteRecord {
    /// Writes records into a pull page (``PullResponse/Writer``): each as `WireJSON.encoder()` writes it, in its
    /// encoding order, absent optionals left out. The keys are ready-made bytes (a page writes thousands of them), and
    /// so is the last time written: the notes of one push share their times.
    struct Writer: JSONByteWriting {
        let bytes: JSONBytes
        /// The last time written and its JSON.
        private var lastTime: (text: String, json: [UInt8])?

        init(bytes: JSONBytes) {
            self.bytes = bytes
        }

        private static let serverID = NoteKeys.record.quoted(.serverID)
        private static let clientID = NoteKeys.record.quoted(.clientID)
        private static let origin = NoteKeys.record.quoted(.origin)
        private static let version = NoteKeys.record.quoted(.version)
        private static let text = NoteKeys.record.quoted(.text)
        private static let deleted = NoteKeys.record.quoted(.deleted)
        private static let conflictOf = NoteKeys.record.quoted(.conflictOf)
        private static let updatedAt = NoteKeys.record.quoted(.updatedAt)
        private static let editedAt = NoteKeys.record.quoted(.editedAt)
        private static let tags = NoteKeys.record.quoted(.tags)
        private static let pinned = NoteKeys.record.quoted(.pinned)
        private static let archived = NoteKeys.record.quoted(.archived)
        private static let attachments = NoteKeys.record.quoted(.attachments)
        private static let editID = NoteKeys.record.quoted(.editID)

        mutating func record(_ record: NoteRecord) {
            bytes.append(UInt8(ascii: "{"))
            field(Self.serverID, first: true)
            quotedInteger(record.serverID.rawValue)
            field(Self.clientID)
            quotedInteger(record.clientID.rawValue)
            field(Self.origin)
            quotedInteger(record.origin.rawValue)
            field(Self.version)
            integer(record.version)
            field(Self.text)
            string(record.text)
            field(Self.deleted)
            bool(record.deleted)
            field(Self.conflictOf, ifPresent: record.conflictOf) { quotedInteger($0.rawValue) }
            field(Self.updatedAt)
            time(record.updatedAt)
            if let editedAt = record.editedAt {
                field(Self.editedAt)
                time(editedAt)
            }
            field(Self.tags, ifPresent: record.tags) { strings($0) }
            field(Self.pinned, ifPresent: record.pinned) { bool($0) }
            field(Self.archived, ifPresent: record.archived) { bool($0) }
            field(Self.attachments, ifPresent: record.attachments) { manifests($0) }
            field(Self.editID, ifPresent: record.editID) { quotedInteger($0.rawValue) }
            bytes.append(UInt8(ascii: "}"))
        }

        /// A time as ``string(_:)`` writes it; the bytes of the last one are kept.
        private mutating func time(_ text: String) {
            if let lastTime, lastTime.text == text {
                bytes += lastTime.json
                return
            }
            let start = bytes.count
            string(text)
            lastTime = (text, bytes.bytes(from: start))
        }
    }

    /// Reads one record in the common shape (string IDs, known keys once each; `null` accepted for the optionals).
    static func read(_ reader: inout JSONByteReader) -> NoteRecord? {
        var serverID: FlakeID?, clientID: FlakeID?, origin: FlakeID?, version: Int64?, text: String?, deleted: Bool?
        var conflictOf: FlakeID?, updatedAt: String?, editedAt: String?
        var tags: [String]?, pinned: Bool?, archived: Bool?, attachments: [AttachmentManifest]?, editID: FlakeID?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = NoteKeys.record.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .serverID: serverID = reader.id(); return serverID != nil
            case .clientID: clientID = reader.id(); return clientID != nil
            case .origin: origin = reader.id(); return origin != nil
            case .version: version = reader.integer(); return version != nil
            case .text: text = reader.string(); return text != nil
            case .deleted: deleted = reader.bool(); return deleted != nil
            case .conflictOf: return reader.optional(&conflictOf) { $0.id() }
            case .updatedAt: updatedAt = reader.string(); return updatedAt != nil
            case .editedAt: return reader.optional(&editedAt) { $0.string() }
            case .tags: return reader.optional(&tags) { $0.strings() }
            case .pinned: return reader.optional(&pinned) { $0.bool() }
            case .archived: return reader.optional(&archived) { $0.bool() }
            case .attachments: return reader.optional(&attachments) { $0.manifests() }
            case .editID: return reader.optional(&editID) { $0.id() }
            }
        }
        guard complete, let serverID, let clientID, let origin, let version, let text, let deleted, let updatedAt
        else { return nil }
        return NoteRecord(
            serverID: serverID, clientID: clientID, origin: origin, version: version, text: text, deleted: deleted,
            conflictOf: conflictOf, updatedAt: updatedAt, editedAt: editedAt, tags: tags, pinned: pinned,
            archived: archived, attachments: attachments, editID: editID)
    }
}
