import Foundation
import MiniFlake
import NoteSyncProtocol

/// Encodes pull pages straight to bytes: `JSONEncoder` costs several microseconds per note, which would dominate a
/// full pull; this writer costs a fraction of that.
///
/// The field names are not restated here: they are learnt once from the wire module by encoding sample values
/// with ``WireJSON/encoder()`` and finding each sample's key. If that ever fails (a field renamed beyond
/// recognition), pages are encoded with `JSONEncoder` instead. The output decodes to exactly the ``PullResponse``
/// `JSONEncoder` would produce (a test checks this on random notes).
enum PullJSON {
    /// The JSON of a ``PullResponse`` for a page.
    static func encode(_ result: SyncService.PullResult) throws -> Data {
        guard let keys = Keys.learnt else { return try WireJSON.encoder().encode(result.response) }
        var writer = Writer(keys: keys)
        return writer.page(result)
    }

    /// JSON key names, as quoted bytes with the colon (`"serverID":`).
    struct Keys {
        var changes, cursor, hasMore: [UInt8]
        var serverID, clientID, origin, version, text, deleted, conflictOf, updatedAt: [UInt8]

        static let learnt: Keys? = learn()

        /// Encodes samples whose every value is distinct and finds which key carries which value.
        static func learn() -> Keys? {
            do {
                let note = NoteRecord(
                    serverID: try FlakeID(validating: 1001), clientID: try FlakeID(validating: 1002),
                    origin: try FlakeID(validating: 1003), version: 1004, text: "sample-text", deleted: true,
                    conflictOf: try FlakeID(validating: 1005), updatedAt: "sample-updated"
                )
                let page = PullResponse(changes: [], cursor: SyncCursor(sequence: 1006), hasMore: true)
                guard
                    let noteObject = try JSONSerialization.jsonObject(with: WireJSON.encoder().encode(note)) as? [String: Any],
                    let pageObject = try JSONSerialization.jsonObject(with: WireJSON.encoder().encode(page)) as? [String: Any]
                else { return nil }
                func key(_ object: [String: Any], _ matches: (Any) -> Bool) -> [UInt8]? {
                    let found = object.filter { matches($0.value) }.map(\.key)
                    guard found.count == 1, let name = found.first, name.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x22 && $0 != 0x5C })
                    else { return nil }
                    return Array("\"\(name)\":".utf8)
                }
                func string(_ value: String) -> (Any) -> Bool { { ($0 as? String) == value } }
                guard noteObject.count == 8, pageObject.count == 3,
                    let serverID = key(noteObject, string("1001")), let clientID = key(noteObject, string("1002")),
                    let origin = key(noteObject, string("1003")), let version = key(noteObject, { ($0 as? Int) == 1004 }),
                    let text = key(noteObject, string("sample-text")), let deleted = key(noteObject, { $0 is Bool || ($0 as? Int) == 1 }),
                    let conflictOf = key(noteObject, string("1005")), let updatedAt = key(noteObject, string("sample-updated")),
                    let changes = key(pageObject, { $0 is [Any] }), let cursor = key(pageObject, string("c1006")),
                    let hasMore = key(pageObject, { ($0 as? Bool) == true || ($0 as? Int) == 1 })
                else { return nil }
                return Keys(
                    changes: changes, cursor: cursor, hasMore: hasMore, serverID: serverID, clientID: clientID, origin: origin,
                    version: version, text: text, deleted: deleted, conflictOf: conflictOf, updatedAt: updatedAt
                )
            } catch {
                return nil
            }
        }
    }

    /// Appends JSON to a byte buffer.
    struct Writer: JSONByteWriting {
        let keys: Keys
        let bytes = JSONBytes()
        /// The last formatted time: notes of one push share it.
        var lastTime: (Int64, [UInt8])?

        init(keys: Keys) {
            self.keys = keys
        }

        mutating func page(_ result: SyncService.PullResult) -> Data {
            var estimate = 64
            for note in result.notes { estimate += note.text.utf8.count + 256 }
            bytes.reserveCapacity(estimate)
            bytes.append(UInt8(ascii: "{"))
            bytes += keys.changes
            bytes.append(UInt8(ascii: "["))
            for (index, note) in result.notes.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                self.note(note)
            }
            bytes.append(UInt8(ascii: "]"))
            bytes.append(UInt8(ascii: ","))
            bytes += keys.cursor
            string(result.cursor.text)
            bytes.append(UInt8(ascii: ","))
            bytes += keys.hasMore
            bool(result.hasMore)
            bytes.append(UInt8(ascii: "}"))
            return bytes.takeData()
        }

        mutating func note(_ note: StoredNote) {
            bytes.append(UInt8(ascii: "{"))
            bytes += keys.serverID
            quotedInteger(note.serverID.rawValue)
            bytes.append(UInt8(ascii: ","))
            bytes += keys.clientID
            quotedInteger(note.clientID.rawValue)
            bytes.append(UInt8(ascii: ","))
            bytes += keys.origin
            quotedInteger(note.origin.rawValue)
            bytes.append(UInt8(ascii: ","))
            bytes += keys.version
            integer(note.version)
            bytes.append(UInt8(ascii: ","))
            bytes += keys.text
            string(note.text)
            bytes.append(UInt8(ascii: ","))
            bytes += keys.deleted
            bool(note.deleted)
            if let conflictOf = note.conflictOf {
                bytes.append(UInt8(ascii: ","))
                bytes += keys.conflictOf
                quotedInteger(conflictOf.rawValue)
            }
            bytes.append(UInt8(ascii: ","))
            bytes += keys.updatedAt
            if let (time, formatted) = lastTime, time == note.updatedAt {
                bytes += formatted
            } else {
                let formatted = Array("\"\(WireTime.format(unixMilliseconds: note.updatedAt))\"".utf8)
                lastTime = (note.updatedAt, formatted)
                bytes += formatted
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}
