import Foundation
import MiniFlake
import NoteSyncProtocol

/// Decodes push requests and encodes push answers straight from and to bytes: `JSONDecoder` with the strict
/// unknown-field check and `JSONEncoder` cost about 40 % of a push of 100 notes; this costs a fraction of that.
///
/// Decoding has two paths with one meaning. ``Parser`` reads the shape every client sends (an object with
/// `changes`, each change an object of the known fields with string IDs) and gives up, returning nil, on anything
/// else: malformed JSON, an unknown or repeated field, a wrong type, an invalid ID, but also rarer valid forms
/// (numeric IDs, escaped keys, exponents). Whatever it gives up on goes to `JSONDecoder`, which accepts it or
/// answers the protocol's error (`invalid_json`, `unknown_field`, `invalid_id`) exactly as before. So the fast path
/// only ever accepts bodies `JSONDecoder` accepts, with the same value: tests check both on random and hostile
/// bodies.
enum PushJSON {
    /// The ``PushRequest`` in a push body.
    ///
    /// - Throws: the protocol error `JSONDecoder`'s path gives for a body the fast path does not accept.
    static func decodeRequest(_ body: Data) throws(APIErrorBody) -> PushRequest {
        if let request = fastDecode(body) { return request }
        return try WireJSON.decodeRequest(PushRequest.self, from: body)
    }

    /// The fast path alone (nil: not the common shape, or not valid).
    static func fastDecode(_ body: Data) -> PushRequest? {
        body.withUnsafeBytes { buffer in
            var parser = Parser(buffer)
            return parser.pushRequest()
        }
    }

    /// The JSON of a ``PushResponse``: what `WireJSON.encoder()` writes, in a fixed key order (a test compares them).
    static func encode(_ response: PushResponse) -> Data {
        let writer = Writer()
        var estimate = 16
        for result in response.results { estimate += 160 + (result.text?.utf8.count ?? 0) + (result.error?.message.utf8.count ?? 0) }
        writer.bytes.reserveCapacity(estimate)
        writer.raw(#"{"results":["#)
        for (index, result) in response.results.enumerated() {
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.result(result)
        }
        writer.raw("]}")
        return writer.bytes.takeData()
    }

    struct Writer: JSONByteWriting {
        let bytes = JSONBytes()

        /// In the order of `ChangeResult`'s coding keys, absent optionals left out, as `JSONEncoder` writes them.
        func result(_ result: ChangeResult) {
            raw(#"{"clientID":"#)
            quotedInteger(result.clientID.rawValue)
            raw(#","editID":"#)
            quotedInteger(result.editID.rawValue)
            raw(#","status":"#)
            string(result.status.rawValue)
            if let serverID = result.serverID {
                raw(#","serverID":"#)
                quotedInteger(serverID.rawValue)
            }
            if let version = result.version {
                raw(#","version":"#)
                integer(version)
            }
            if let text = result.text {
                raw(#","text":"#)
                string(text)
            }
            if let conflict = result.conflict {
                raw(#","conflict":{"serverID":"#)
                quotedInteger(conflict.serverID.rawValue)
                raw(#","clientID":"#)
                quotedInteger(conflict.clientID.rawValue)
                bytes.append(UInt8(ascii: "}"))
            }
            raw(#","replayed":"#)
            bool(result.replayed)
            if let error = result.error {
                raw(#","error":{"code":"#)
                string(error.code.rawValue)
                raw(#","message":"#)
                string(error.message)
                if let field = error.field {
                    raw(#","field":"#)
                    string(field)
                }
                bytes.append(UInt8(ascii: "}"))
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// A reader of the common push shape; every method returns nil to give up.
    struct Parser {
        var reader: JSONByteReader

        init(_ bytes: UnsafeRawBufferPointer) { reader = JSONByteReader(bytes) }

        mutating func pushRequest() -> PushRequest? {
            skipWhitespace()
            guard consume(UInt8(ascii: "{")) else { return nil }
            skipWhitespace()
            guard let key = key(), key == .changes else { return nil }
            skipWhitespace()
            guard consume(UInt8(ascii: ":")) else { return nil }
            skipWhitespace()
            guard consume(UInt8(ascii: "[")) else { return nil }
            var changes: [NoteChange] = []
            skipWhitespace()
            if !consume(UInt8(ascii: "]")) {
                while true {
                    skipWhitespace()
                    guard let change = change() else { return nil }
                    changes.append(change)
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    guard consume(UInt8(ascii: "]")) else { return nil }
                    break
                }
            }
            skipWhitespace()
            guard consume(UInt8(ascii: "}")) else { return nil }
            return reader.atEnd() ? PushRequest(changes: changes) : nil
        }

        /// The keys of the two objects, read without allocating.
        enum Key {
            case changes, clientID, origin, serverID, editID, text, deleted, baseVersion, baseText
        }

        mutating func change() -> NoteChange? {
            guard consume(UInt8(ascii: "{")) else { return nil }
            var clientID: FlakeID?, origin: FlakeID?, serverID: FlakeID?, editID: FlakeID?
            var text: String?, deleted: Bool?, baseVersion: Int64?, baseText: String?
            var seen: UInt16 = 0
            skipWhitespace()
            if !consume(UInt8(ascii: "}")) {
                while true {
                    skipWhitespace()
                    guard let key = key() else { return nil }
                    let bit: UInt16 = 1 << UInt16(key.bit)
                    guard seen & bit == 0 else { return nil }  // a repeated key: let JSONDecoder decide
                    seen |= bit
                    skipWhitespace()
                    guard consume(UInt8(ascii: ":")) else { return nil }
                    skipWhitespace()
                    switch key {
                    case .changes: return nil
                    case .clientID: guard let id = id() else { return nil }; clientID = id
                    case .origin: guard let id = id() else { return nil }; origin = id
                    case .editID: guard let id = id() else { return nil }; editID = id
                    case .text: guard let value = string() else { return nil }; text = value
                    case .serverID:
                        if !null() { guard let id = id() else { return nil }; serverID = id }
                    case .deleted:
                        if !null() { guard let value = bool() else { return nil }; deleted = value }
                    case .baseVersion:
                        if !null() { guard let value = integer() else { return nil }; baseVersion = value }
                    case .baseText:
                        if !null() { guard let value = string() else { return nil }; baseText = value }
                    }
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    guard consume(UInt8(ascii: "}")) else { return nil }
                    break
                }
            }
            guard let clientID, let origin, let editID, let text else { return nil }
            return NoteChange(
                clientID: clientID, origin: origin, serverID: serverID, editID: editID, text: text,
                deleted: deleted ?? false, baseVersion: baseVersion, baseText: baseText)
        }

        // MARK: Tokens (the shared reader)

        mutating func skipWhitespace() { reader.skipWhitespace() }
        mutating func consume(_ byte: UInt8) -> Bool { reader.consume(byte) }
        mutating func null() -> Bool { reader.null() }
        mutating func bool() -> Bool? { reader.bool() }
        mutating func key() -> Key? { reader.rawKey().flatMap(Key.init) }
        mutating func id() -> FlakeID? { reader.id() }
        mutating func integer() -> Int64? { reader.integer() }
        mutating func string() -> String? { reader.string() }
    }
}

extension PushJSON.Parser.Key {
    /// The key spelt by `name` (the wire names of ``PushRequest`` and ``NoteChange``).
    init?(_ name: UnsafeRawBufferPointer) {
        func equals(_ literal: StaticString) -> Bool { JSONByteReader.equals(name, literal) }
        switch name.count {
        case 4: if equals("text") { self = .text } else { return nil }
        case 6: if equals("origin") { self = .origin } else if equals("editID") { self = .editID } else { return nil }
        case 7: if equals("changes") { self = .changes } else if equals("deleted") { self = .deleted } else { return nil }
        case 8:
            if equals("clientID") {
                self = .clientID
            } else if equals("serverID") {
                self = .serverID
            } else if equals("baseText") {
                self = .baseText
            } else {
                return nil
            }
        case 11: if equals("baseVersion") { self = .baseVersion } else { return nil }
        default: return nil
        }
    }

    var bit: Int {
        switch self {
        case .changes: 0
        case .clientID: 1
        case .origin: 2
        case .serverID: 3
        case .editID: 4
        case .text: 5
        case .deleted: 6
        case .baseVersion: 7
        case .baseText: 8
        }
    }
}
