import Foundation
import MiniFlake

/// A body with a hand-written decoder for its common shape; ``decode(_:)`` falls back to `JSONDecoder`.
///
/// The client decodes push and pull answers with it: `JSONDecoder` cost about 11 % of the simulation's time and
/// most of a large pull's client-side CPU. The fast path reads exactly the shape the server writes (the known keys,
/// string IDs, no escaped keys) and gives up on anything else (an unknown key from a newer server, a repeated key,
/// numeric IDs, malformed JSON), which then goes to `JSONDecoder`: the same value or the same error as before.
public protocol WireFastDecodable: Decodable {
    /// The value, or nil when the body is not the common shape (or not valid).
    static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> Self?
}

extension WireFastDecodable {
    /// The fast path, else `JSONDecoder`.
    public static func decode(_ data: Data) throws -> Self {
        if let value = data.withUnsafeBytes({ fastDecode($0) }) { return value }
        return try WireJSON.decoder().decode(Self.self, from: data)
    }
}

// MARK: - Push

extension NoteChange {
    /// The JSON `WireJSON.encoder()` writes for this change (the same object and bytes, in `CodingKeys` order).
    public func encodedJSON() -> Data {
        let writer = ChangeWriter(bytes: JSONBytes(capacity: 160 + text.utf8.count + (baseText?.utf8.count ?? 0)))
        writer.change(self)
        return writer.bytes.takeData()
    }

    private struct ChangeWriter: JSONByteWriting {
        let bytes: JSONBytes

        func change(_ change: NoteChange) {
            raw(#"{"clientID":"#)
            quotedInteger(change.clientID.rawValue)
            raw(#","origin":"#)
            quotedInteger(change.origin.rawValue)
            if let serverID = change.serverID {
                raw(#","serverID":"#)
                quotedInteger(serverID.rawValue)
            }
            raw(#","editID":"#)
            quotedInteger(change.editID.rawValue)
            raw(#","text":"#)
            string(change.text)
            raw(#","deleted":"#)
            bool(change.deleted)
            if let baseVersion = change.baseVersion {
                raw(#","baseVersion":"#)
                integer(baseVersion)
            }
            if let baseText = change.baseText {
                raw(#","baseText":"#)
                string(baseText)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}

extension PushResponse: WireFastDecodable {
    public static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> PushResponse? {
        var reader = JSONByteReader(bytes)
        var results: [ChangeResult]?
        let complete = reader.object { reader, key in
            guard JSONByteReader.equals(key, "results"), results == nil else { return false }
            results = reader.array { reader in ChangeResult.read(&reader) }
            return results != nil
        }
        guard complete, reader.atEnd(), let results else { return nil }
        return PushResponse(results: results)
    }
}

extension ChangeResult {
    static func read(_ reader: inout JSONByteReader) -> ChangeResult? {
        var clientID: FlakeID?, editID: FlakeID?, status: ChangeStatus?, serverID: FlakeID?, version: Int64?
        var text: String?, conflict: ConflictCopy?, replayed: Bool?, error: APIErrorBody?
        var seen: UInt16 = 0
        let complete = reader.object { reader, key in
            let bit: UInt16
            switch key.count {
            case 4 where JSONByteReader.equals(key, "text"): bit = 1 << 0
            case 5 where JSONByteReader.equals(key, "error"): bit = 1 << 1
            case 6 where JSONByteReader.equals(key, "editID"): bit = 1 << 2
            case 6 where JSONByteReader.equals(key, "status"): bit = 1 << 3
            case 7 where JSONByteReader.equals(key, "version"): bit = 1 << 4
            case 8 where JSONByteReader.equals(key, "clientID"): bit = 1 << 5
            case 8 where JSONByteReader.equals(key, "serverID"): bit = 1 << 6
            case 8 where JSONByteReader.equals(key, "conflict"): bit = 1 << 7
            case 8 where JSONByteReader.equals(key, "replayed"): bit = 1 << 8
            default: return false
            }
            guard seen & bit == 0 else { return false }
            seen |= bit
            switch bit {
            case 1 << 0: return reader.optional(&text) { $0.string() }
            case 1 << 1: return reader.optional(&error) { APIErrorBody.read(&$0) }
            case 1 << 2: editID = reader.id(); return editID != nil
            case 1 << 3: status = reader.string().flatMap(ChangeStatus.init(rawValue:)); return status != nil
            case 1 << 4: return reader.optional(&version) { $0.integer() }
            case 1 << 5: clientID = reader.id(); return clientID != nil
            case 1 << 6: return reader.optional(&serverID) { $0.id() }
            case 1 << 7: return reader.optional(&conflict) { ConflictCopy.read(&$0) }
            default: return reader.optional(&replayed) { $0.bool() }
            }
        }
        guard complete, let clientID, let editID, let status else { return nil }
        return ChangeResult(
            clientID: clientID, editID: editID, status: status, serverID: serverID, version: version, text: text,
            conflict: conflict, replayed: replayed ?? false, error: error)
    }
}

extension ConflictCopy {
    static func read(_ reader: inout JSONByteReader) -> ConflictCopy? {
        var serverID: FlakeID?, clientID: FlakeID?
        let complete = reader.object { reader, key in
            if JSONByteReader.equals(key, "serverID"), serverID == nil {
                serverID = reader.id()
                return serverID != nil
            }
            if JSONByteReader.equals(key, "clientID"), clientID == nil {
                clientID = reader.id()
                return clientID != nil
            }
            return false
        }
        guard complete, let serverID, let clientID else { return nil }
        return ConflictCopy(serverID: serverID, clientID: clientID)
    }
}

extension APIErrorBody {
    static func read(_ reader: inout JSONByteReader) -> APIErrorBody? {
        var code: String?, message: String?, field: String?
        var seenField = false
        let complete = reader.object { reader, key in
            if JSONByteReader.equals(key, "code"), code == nil {
                code = reader.string()
                return code != nil
            }
            if JSONByteReader.equals(key, "message"), message == nil {
                message = reader.string()
                return message != nil
            }
            if JSONByteReader.equals(key, "field"), !seenField {
                seenField = true
                return reader.optional(&field) { $0.string() }
            }
            return false
        }
        guard complete, let code, let message else { return nil }
        return APIErrorBody(code: APIErrorCode(code), message: message, field: field)
    }
}

// MARK: - Pull

extension PullResponse: WireFastDecodable {
    public static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> PullResponse? {
        var reader = JSONByteReader(bytes)
        var changes: [NoteRecord]?, cursor: SyncCursor?, hasMore: Bool?
        let complete = reader.object { reader, key in
            if JSONByteReader.equals(key, "changes"), changes == nil {
                changes = reader.array { reader in NoteRecord.read(&reader) }
                return changes != nil
            }
            if JSONByteReader.equals(key, "cursor"), cursor == nil {
                cursor = reader.string().flatMap(SyncCursor.init(text:))
                return cursor != nil
            }
            if JSONByteReader.equals(key, "hasMore"), hasMore == nil {
                hasMore = reader.bool()
                return hasMore != nil
            }
            return false
        }
        guard complete, reader.atEnd(), let changes, let cursor, let hasMore else { return nil }
        return PullResponse(changes: changes, cursor: cursor, hasMore: hasMore)
    }
}

extension NoteRecord {
    static func read(_ reader: inout JSONByteReader) -> NoteRecord? {
        var serverID: FlakeID?, clientID: FlakeID?, origin: FlakeID?, version: Int64?, text: String?, deleted: Bool?
        var conflictOf: FlakeID?, updatedAt: String?
        var seenConflictOf = false
        let complete = reader.object { reader, key in
            switch key.count {
            case 4 where JSONByteReader.equals(key, "text") && text == nil:
                text = reader.string()
                return text != nil
            case 6 where JSONByteReader.equals(key, "origin") && origin == nil:
                origin = reader.id()
                return origin != nil
            case 7 where JSONByteReader.equals(key, "version") && version == nil:
                version = reader.integer()
                return version != nil
            case 7 where JSONByteReader.equals(key, "deleted") && deleted == nil:
                deleted = reader.bool()
                return deleted != nil
            case 8 where JSONByteReader.equals(key, "serverID") && serverID == nil:
                serverID = reader.id()
                return serverID != nil
            case 8 where JSONByteReader.equals(key, "clientID") && clientID == nil:
                clientID = reader.id()
                return clientID != nil
            case 9 where JSONByteReader.equals(key, "updatedAt") && updatedAt == nil:
                updatedAt = reader.string()
                return updatedAt != nil
            case 10 where JSONByteReader.equals(key, "conflictOf") && !seenConflictOf:
                seenConflictOf = true
                return reader.optional(&conflictOf) { $0.id() }
            default:
                return false
            }
        }
        guard complete, let serverID, let clientID, let origin, let version, let text, let deleted, let updatedAt
        else { return nil }
        return NoteRecord(
            serverID: serverID, clientID: clientID, origin: origin, version: version, text: text, deleted: deleted,
            conflictOf: conflictOf, updatedAt: updatedAt)
    }
}

// MARK: - Structure

extension JSONByteReader {
    /// Reads an object, handing each key to `member`, which reads the value and returns false to give up.
    @inlinable
    public mutating func object(_ member: (inout JSONByteReader, UnsafeRawBufferPointer) -> Bool) -> Bool {
        skipWhitespace()
        guard consume(UInt8(ascii: "{")) else { return false }
        skipWhitespace()
        if consume(UInt8(ascii: "}")) { return true }
        while true {
            skipWhitespace()
            guard let key = rawKey() else { return false }
            skipWhitespace()
            guard consume(UInt8(ascii: ":")) else { return false }
            skipWhitespace()
            guard member(&self, key) else { return false }
            skipWhitespace()
            if consume(UInt8(ascii: ",")) { continue }
            return consume(UInt8(ascii: "}"))
        }
    }

    /// Reads an array of elements read by `element` (nil gives up).
    @inlinable
    public mutating func array<Element>(_ element: (inout JSONByteReader) -> Element?) -> [Element]? {
        skipWhitespace()
        guard consume(UInt8(ascii: "[")) else { return nil }
        var elements: [Element] = []
        skipWhitespace()
        if consume(UInt8(ascii: "]")) { return elements }
        while true {
            skipWhitespace()
            guard let next = element(&self) else { return nil }
            elements.append(next)
            skipWhitespace()
            if consume(UInt8(ascii: ",")) { continue }
            return consume(UInt8(ascii: "]")) ? elements : nil
        }
    }

    /// Reads `null` (leaving `value` nil) or a value read by `read`; false gives up.
    @inlinable
    public mutating func optional<Value>(_ value: inout Value?, _ read: (inout JSONByteReader) -> Value?) -> Bool {
        if null() { return true }
        value = read(&self)
        return value != nil
    }
}
