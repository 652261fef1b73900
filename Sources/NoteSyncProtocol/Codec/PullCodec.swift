import Foundation
import MiniFlake

// The pull answer's hand-written codecs: the server writes pages with ``PullResponse/Writer``; the client reads them
// with ``PullResponse/fastDecode(_:)``. Same contract as the push codecs (see PushCodec.swift).

/// The key tables of the pull answer.
enum PullKeys {
    static let response = KeyTable<PullResponse.CodingKeys>()
    static let record = KeyTable<NoteRecord.CodingKeys>()
}

extension PullResponse: WireFastDecodable {
    /// Writes a pull page straight to bytes, one note at a time: exactly what `WireJSON.encoder()` writes for the
    /// ``PullResponse`` holding the same records.
    ///
    /// The caller passes each note's fields rather than a ``NoteRecord``, so that a page of stored notes is written
    /// without building records (and their time strings) first.
    public struct Writer: JSONByteWriting {
        public let bytes: JSONBytes
        private var notes = 0
        /// The last formatted time: notes changed by one push share it.
        private var lastTime: (Int64, [UInt8])?

        private static let changes = PullKeys.response.quoted(.changes)
        private static let cursor = PullKeys.response.quoted(.cursor)
        private static let hasMore = PullKeys.response.quoted(.hasMore)
        private static let serverID = PullKeys.record.quoted(.serverID)
        private static let clientID = PullKeys.record.quoted(.clientID)
        private static let origin = PullKeys.record.quoted(.origin)
        private static let version = PullKeys.record.quoted(.version)
        private static let text = PullKeys.record.quoted(.text)
        private static let deleted = PullKeys.record.quoted(.deleted)
        private static let conflictOf = PullKeys.record.quoted(.conflictOf)
        private static let updatedAt = PullKeys.record.quoted(.updatedAt)
        private static let editedAt = PullKeys.record.quoted(.editedAt)

        /// A writer for a page of about `textBytes` bytes of text in `count` notes (a capacity hint).
        public init(count: Int, textBytes: Int) {
            bytes = JSONBytes(capacity: 64 + textBytes + count * 256)
            bytes.append(UInt8(ascii: "{"))
            bytes += Self.changes
            bytes.append(UInt8(ascii: "["))
        }

        /// Appends one note; `updatedAt` and `editedAt` in Unix milliseconds (written as ``WireTime``; no
        /// `editedAt` field when nil).
        public mutating func note(
            serverID: FlakeID, clientID: FlakeID, origin: FlakeID, version: Int64, text: String, deleted: Bool,
            conflictOf: FlakeID?, updatedAt: Int64, editedAt: Int64? = nil
        ) {
            if notes > 0 { bytes.append(UInt8(ascii: ",")) }
            notes += 1
            bytes.append(UInt8(ascii: "{"))
            bytes += Self.serverID
            quotedInteger(serverID.rawValue)
            bytes.append(UInt8(ascii: ","))
            bytes += Self.clientID
            quotedInteger(clientID.rawValue)
            bytes.append(UInt8(ascii: ","))
            bytes += Self.origin
            quotedInteger(origin.rawValue)
            bytes.append(UInt8(ascii: ","))
            bytes += Self.version
            integer(version)
            bytes.append(UInt8(ascii: ","))
            bytes += Self.text
            string(text)
            bytes.append(UInt8(ascii: ","))
            bytes += Self.deleted
            bool(deleted)
            if let conflictOf {
                bytes.append(UInt8(ascii: ","))
                bytes += Self.conflictOf
                quotedInteger(conflictOf.rawValue)
            }
            bytes.append(UInt8(ascii: ","))
            bytes += Self.updatedAt
            time(updatedAt)
            if let editedAt {
                bytes.append(UInt8(ascii: ","))
                bytes += Self.editedAt
                time(editedAt)
            }
            bytes.append(UInt8(ascii: "}"))
        }

        /// A quoted ``WireTime``; the last one is kept, since notes changed by one push share it.
        private mutating func time(_ unixMilliseconds: Int64) {
            if let (time, formatted) = lastTime, time == unixMilliseconds {
                bytes += formatted
            } else {
                let formatted = Array("\"\(WireTime.format(unixMilliseconds: unixMilliseconds))\"".utf8)
                lastTime = (unixMilliseconds, formatted)
                bytes += formatted
            }
        }

        /// Ends the page and returns its bytes.
        public mutating func finish(cursor: SyncCursor, hasMore: Bool) -> Data {
            bytes.append(UInt8(ascii: "]"))
            bytes.append(UInt8(ascii: ","))
            bytes += Self.cursor
            string(cursor.text)
            bytes.append(UInt8(ascii: ","))
            bytes += Self.hasMore
            bool(hasMore)
            bytes.append(UInt8(ascii: "}"))
            return bytes.takeData()
        }
    }

    public static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> PullResponse? {
        var reader = JSONByteReader(bytes)
        var changes: [NoteRecord]?, cursor: SyncCursor?, hasMore: Bool?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = PullKeys.response.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .changes: changes = reader.array { NoteRecord.read(&$0) }; return changes != nil
            case .cursor: cursor = reader.string().flatMap(SyncCursor.init(text:)); return cursor != nil
            case .hasMore: hasMore = reader.bool(); return hasMore != nil
            }
        }
        guard complete, reader.atEnd(), let changes, let cursor, let hasMore else { return nil }
        return PullResponse(changes: changes, cursor: cursor, hasMore: hasMore)
    }
}

extension NoteRecord {
    static func read(_ reader: inout JSONByteReader) -> NoteRecord? {
        var serverID: FlakeID?, clientID: FlakeID?, origin: FlakeID?, version: Int64?, text: String?, deleted: Bool?
        var conflictOf: FlakeID?, updatedAt: String?, editedAt: String?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = PullKeys.record.match(name), seen & bit == 0 else { return false }
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
            }
        }
        guard complete, let serverID, let clientID, let origin, let version, let text, let deleted, let updatedAt
        else { return nil }
        return NoteRecord(
            serverID: serverID, clientID: clientID, origin: origin, version: version, text: text, deleted: deleted,
            conflictOf: conflictOf, updatedAt: updatedAt, editedAt: editedAt)
    }
}
