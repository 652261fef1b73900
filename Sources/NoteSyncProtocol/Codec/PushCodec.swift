import Foundation
import MiniFlake

// The push messages' hand-written codecs. The server reads push requests and writes push answers with them; the
// client writes push requests and reads push answers (each change in them is written and read by NoteCodec.swift).
// Every reader reads one common shape and gives up (nil) on anything else, which then goes to `JSONDecoder`: the fast
// paths accept only what `JSONDecoder` accepts, with the same value, and every writer writes the bytes
// `WireJSON.encoder()` writes. Tests check both against Foundation's coders on random and hostile bodies, and fuzz
// targets do too.

/// The key tables of the push messages.
enum PushKeys {
    static let request = KeyTable<PushRequest.CodingKeys>()
    static let response = KeyTable<PushResponse.CodingKeys>()
    static let result = KeyTable<ChangeResult.CodingKeys>()
    static let conflict = KeyTable<ConflictCopy.CodingKeys>()
    static let error = KeyTable<APIErrorBody.CodingKeys>()
}

// MARK: - Requests

extension PushRequest {
    /// The request in a push body: the fast reader for the common shape, `JSONDecoder` for anything else.
    ///
    /// - Throws: the protocol's error for a body `JSONDecoder` refuses (`invalid_json`, `unknown_field`,
    ///   `invalid_id`), naming the field.
    public static func decodeBody(_ body: Data) throws(APIErrorBody) -> PushRequest {
        if let request = fastDecode(body) { return request }
        return try WireJSON.decodeRequest(PushRequest.self, from: body)
    }

    /// The fast reader alone: nil when the body is not the common shape (or not valid).
    public static func fastDecode(_ body: Data) -> PushRequest? {
        body.withUnsafeBytes { bytes in
            var reader = JSONByteReader(bytes)
            var changes: [NoteChange]?
            let complete = reader.object { reader, key in
                guard PushKeys.request.match(key)?.key == .changes, changes == nil else { return false }
                changes = reader.array { NoteChange.read(&$0) }
                return changes != nil
            }
            guard complete, reader.atEnd(), let changes else { return nil }
            return PushRequest(changes: changes)
        }
    }

    /// Bytes a push body adds around its changes: `{"changes":[` and `]}`.
    public static let envelopeBytes = PushKeys.request.quoted(.changes).count + 4

    /// A push body from changes each encoded by ``NoteChange/encodedJSON()`` (a client encodes each change once, to
    /// size its batches, then joins them): ``envelopeBytes`` plus the changes plus a comma between each two.
    public static func body(encodedChanges changes: [Data]) -> Data {
        let bytes = JSONBytes(capacity: envelopeBytes + changes.reduce(changes.count) { $0 + $1.count })
        bytes.append(UInt8(ascii: "{"))
        bytes += PushKeys.request.quoted(.changes)
        bytes.append(UInt8(ascii: "["))
        for (index, change) in changes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            change.withUnsafeBytes { bytes.append(contentsOf: $0) }
        }
        bytes.append(UInt8(ascii: "]"))
        bytes.append(UInt8(ascii: "}"))
        return bytes.takeData()
    }
}

// MARK: - Answers

extension PushResponse: WireFastDecodable {
    /// The JSON `WireJSON.encoder()` writes for this answer (the same bytes).
    public func encodedJSON() -> Data {
        var estimate = 16
        for result in results {
            estimate += 160 + (result.text?.utf8.count ?? 0) + (result.error?.message.utf8.count ?? 0)
                + (result.tags?.reduce(16) { $0 + $1.utf8.count + 3 } ?? 0)
                + (result.attachments.map { AttachmentManifest.estimatedBytes($0) } ?? 0)
        }
        let writer = ResultWriter(bytes: JSONBytes(capacity: estimate))
        writer.bytes.append(UInt8(ascii: "{"))
        writer.field(PushKeys.response.quoted(.results), first: true)
        writer.bytes.append(UInt8(ascii: "["))
        for (index, result) in results.enumerated() {
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.result(result)
        }
        writer.bytes.append(UInt8(ascii: "]"))
        writer.bytes.append(UInt8(ascii: "}"))
        return writer.bytes.takeData()
    }

    public static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> PushResponse? {
        var reader = JSONByteReader(bytes)
        var results: [ChangeResult]?
        let complete = reader.object { reader, key in
            guard PushKeys.response.match(key)?.key == .results, results == nil else { return false }
            results = reader.array { ChangeResult.read(&$0) }
            return results != nil
        }
        guard complete, reader.atEnd(), let results else { return nil }
        return PushResponse(results: results)
    }

    private struct ResultWriter: JSONByteWriting {
        let bytes: JSONBytes

        /// In `ChangeResult`'s encoding order, absent optionals left out.
        func result(_ result: ChangeResult) {
            let keys = PushKeys.result
            bytes.append(UInt8(ascii: "{"))
            field(keys.quoted(.clientID), first: true)
            quotedInteger(result.clientID.rawValue)
            field(keys.quoted(.editID))
            quotedInteger(result.editID.rawValue)
            field(keys.quoted(.status))
            string(result.status.rawValue)
            field(keys.quoted(.serverID), ifPresent: result.serverID) { quotedInteger($0.rawValue) }
            field(keys.quoted(.version), ifPresent: result.version) { integer($0) }
            field(keys.quoted(.text), ifPresent: result.text) { string($0) }
            field(keys.quoted(.tags), ifPresent: result.tags) { strings($0) }
            field(keys.quoted(.pinned), ifPresent: result.pinned) { bool($0) }
            field(keys.quoted(.archived), ifPresent: result.archived) { bool($0) }
            field(keys.quoted(.attachments), ifPresent: result.attachments) { manifests($0) }
            if let conflict = result.conflict {
                field(keys.quoted(.conflict))
                bytes.append(UInt8(ascii: "{"))
                field(PushKeys.conflict.quoted(.serverID), first: true)
                quotedInteger(conflict.serverID.rawValue)
                field(PushKeys.conflict.quoted(.clientID))
                quotedInteger(conflict.clientID.rawValue)
                bytes.append(UInt8(ascii: "}"))
            }
            field(keys.quoted(.replayed))
            bool(result.replayed)
            if let error = result.error {
                field(keys.quoted(.error))
                bytes.append(UInt8(ascii: "{"))
                field(PushKeys.error.quoted(.code), first: true)
                string(error.code.rawValue)
                field(PushKeys.error.quoted(.message))
                string(error.message)
                if let field = error.field {
                    self.field(PushKeys.error.quoted(.field))
                    string(field)
                }
                bytes.append(UInt8(ascii: "}"))
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}

extension ChangeResult {
    static func read(_ reader: inout JSONByteReader) -> ChangeResult? {
        var clientID: FlakeID?, editID: FlakeID?, status: ChangeStatus?, serverID: FlakeID?, version: Int64?
        var text: String?, conflict: ConflictCopy?, replayed: Bool?, error: APIErrorBody?
        var tags: [String]?, pinned: Bool?, archived: Bool?, attachments: [AttachmentManifest]?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = PushKeys.result.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .clientID: clientID = reader.id(); return clientID != nil
            case .editID: editID = reader.id(); return editID != nil
            case .status: status = reader.string().flatMap(ChangeStatus.init(rawValue:)); return status != nil
            case .serverID: return reader.optional(&serverID) { $0.id() }
            case .version: return reader.optional(&version) { $0.integer() }
            case .text: return reader.optional(&text) { $0.string() }
            case .tags: return reader.optional(&tags) { $0.strings() }
            case .pinned: return reader.optional(&pinned) { $0.bool() }
            case .archived: return reader.optional(&archived) { $0.bool() }
            case .attachments: return reader.optional(&attachments) { $0.manifests() }
            case .conflict: return reader.optional(&conflict) { ConflictCopy.read(&$0) }
            case .replayed: return reader.optional(&replayed) { $0.bool() }
            case .error: return reader.optional(&error) { APIErrorBody.read(&$0) }
            }
        }
        guard complete, let clientID, let editID, let status else { return nil }
        return ChangeResult(
            clientID: clientID, editID: editID, status: status, serverID: serverID, version: version, text: text,
            tags: tags, pinned: pinned, archived: archived, attachments: attachments, conflict: conflict, replayed: replayed ?? false, error: error)
    }
}

extension ConflictCopy {
    static func read(_ reader: inout JSONByteReader) -> ConflictCopy? {
        var serverID: FlakeID?, clientID: FlakeID?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = PushKeys.conflict.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .serverID: serverID = reader.id(); return serverID != nil
            case .clientID: clientID = reader.id(); return clientID != nil
            }
        }
        guard complete, let serverID, let clientID else { return nil }
        return ConflictCopy(serverID: serverID, clientID: clientID)
    }
}

extension APIErrorBody {
    static func read(_ reader: inout JSONByteReader) -> APIErrorBody? {
        var code: String?, message: String?, field: String?
        var seen: UInt32 = 0
        let complete = reader.object { reader, name in
            guard let (key, bit) = PushKeys.error.match(name), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .code: code = reader.string(); return code != nil
            case .message: message = reader.string(); return message != nil
            case .field: return reader.optional(&field) { $0.string() }
            }
        }
        guard complete, let code, let message else { return nil }
        return APIErrorBody(code: APIErrorCode(code), message: message, field: field)
    }
}
