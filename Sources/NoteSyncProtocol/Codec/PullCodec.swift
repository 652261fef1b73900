import Foundation
import MiniFlake

// The pull answer's hand-written codecs: the server writes pages with ``PullResponse/Writer``; the client reads them
// with ``PullResponse/fastDecode(_:)``. Each record is written and read by NoteCodec.swift. Same contract as the push
// codecs (see PushCodec.swift).

/// The key table of the pull answer.
enum PullKeys {
    static let response = KeyTable<PullResponse.CodingKeys>()
}

extension PullResponse: WireFastDecodable {
    /// The JSON `WireJSON.encoder()` writes for this page (the same bytes), written by ``Writer``.
    public func encodedJSON() -> Data {
        var writer = Writer(count: changes.count, textBytes: changes.reduce(0) { $0 + $1.text.utf8.count })
        for record in changes { writer.note(record) }
        return writer.finish(cursor: cursor, hasMore: hasMore, remaining: remaining)
    }

    /// Writes a pull page straight to bytes, one record at a time: exactly what `WireJSON.encoder()` writes for the
    /// ``PullResponse`` holding the same records.
    public struct Writer: JSONByteWriting {
        public let bytes: JSONBytes
        private var notes = 0
        private var records: NoteRecord.Writer

        private static let changes = PullKeys.response.quoted(.changes)
        private static let cursor = PullKeys.response.quoted(.cursor)
        private static let hasMore = PullKeys.response.quoted(.hasMore)
        private static let remaining = PullKeys.response.quoted(.remaining)

        /// A writer for a page of about `textBytes` bytes of text in `count` notes (a capacity hint).
        public init(count: Int, textBytes: Int) {
            bytes = JSONBytes(capacity: 64 + textBytes + count * 256)
            records = NoteRecord.Writer(bytes: bytes)
            bytes.append(UInt8(ascii: "{"))
            field(Self.changes, first: true)
            bytes.append(UInt8(ascii: "["))
        }

        /// Appends one record.
        public mutating func note(_ record: NoteRecord) {
            if notes > 0 { bytes.append(UInt8(ascii: ",")) }
            notes += 1
            records.record(record)
        }

        /// Ends the page and returns its bytes.
        public mutating func finish(cursor: SyncCursor, hasMore: Bool, remaining: Int?) -> Data {
            bytes.append(UInt8(ascii: "]"))
            field(Self.cursor)
            string(cursor.text)
            field(Self.hasMore)
            bool(hasMore)
            if let remaining {
                field(Self.remaining)
                integer(Int64(remaining))
            }
            bytes.append(UInt8(ascii: "}"))
            return bytes.takeData()
        }
    }

    public static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> PullResponse? {
        var reader = JSONByteReader(bytes)
        var changes: [NoteRecord]?, cursor: SyncCursor?, hasMore: Bool?, remaining: Int?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = PullKeys.response.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .changes: changes = reader.array { NoteRecord.read(&$0) }; return changes != nil
            case .cursor: cursor = reader.string().flatMap(SyncCursor.init(text:)); return cursor != nil
            case .hasMore: hasMore = reader.bool(); return hasMore != nil
            case .remaining: remaining = reader.integer().flatMap { Int(exactly: $0) }; return remaining != nil
            }
        }
        guard complete, reader.atEnd(), let changes, let cursor, let hasMore else { return nil }
        return PullResponse(changes: changes, cursor: cursor, hasMore: hasMore, remaining: remaining)
    }
}
