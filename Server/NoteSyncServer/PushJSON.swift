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

    /// A strict reader of the common push shape (RFC 8259 grammar); every method returns nil to give up.
    struct Parser {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

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
            skipWhitespace()
            return index == bytes.count ? PushRequest(changes: changes) : nil
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

        // MARK: Tokens

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func consume(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] { return false }
            index += count
            return true
        }

        mutating func null() -> Bool { consume("null") }

        mutating func bool() -> Bool? {
            if consume("true") { return true }
            if consume("false") { return false }
            return nil
        }

        /// A key with no escapes, one of ``Key``.
        mutating func key() -> Key? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                if bytes[index] == UInt8(ascii: "\\") || bytes[index] < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            let name = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
            index += 1
            return Key(name)
        }

        /// An ID as the wire sends it: a decimal string of a positive 64-bit value (leading zeros allowed, as
        /// `FlakeID`'s decoder allows them).
        mutating func id() -> FlakeID? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            var value: Int64 = 0
            var digits = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                let byte = bytes[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !o1, !o2 else { return nil }
                value = sum
                digits += 1
                index += 1
            }
            guard index < bytes.count, digits > 0, value > 0 else { return nil }
            index += 1
            return try? FlakeID(validating: value)
        }

        /// A JSON integer in Int64's range, without fraction or exponent.
        mutating func integer() -> Int64? {
            let negative = consume(UInt8(ascii: "-"))
            guard index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") else { return nil }
            if bytes[index] == UInt8(ascii: "0"), index + 1 < bytes.count,
                bytes[index + 1] >= UInt8(ascii: "0"), bytes[index + 1] <= UInt8(ascii: "9")
            {
                return nil  // a leading zero is not JSON
            }
            var value: Int64 = 0
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                let digit = Int64(bytes[index] - UInt8(ascii: "0"))
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (next, o2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
                guard !o1, !o2 else { return nil }
                value = next
                index += 1
            }
            if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) {
                return nil
            }
            if negative, value == 0 { return nil }  // "-0": rare, let JSONDecoder decide
            return value
        }

        /// A JSON string; its UTF-8 must be valid, and escapes must not leave a lone surrogate.
        mutating func string() -> String? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            // Escapes: copy what came before, then decode the rest byte by byte.
            var decoded = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: decoded, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                    case UInt8(ascii: "b"): decoded.append(0x08)
                    case UInt8(ascii: "f"): decoded.append(0x0C)
                    case UInt8(ascii: "n"): decoded.append(0x0A)
                    case UInt8(ascii: "r"): decoded.append(0x0D)
                    case UInt8(ascii: "t"): decoded.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let unit = hex4() else { return nil }
                        var scalar = UInt32(unit)
                        if (0xD800..<0xDC00).contains(unit) {
                            guard consume("\\u"), let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                            scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(unit) {
                            return nil
                        }
                        guard let value = Unicode.Scalar(scalar) else { return nil }
                        decoded.append(contentsOf: UTF8.encode(value)!)
                    default:
                        return nil
                    }
                default:
                    if byte < 0x20 { return nil }
                    decoded.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt16? {
            guard bytes.count - index >= 4 else { return nil }
            var value: UInt16 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt16(digit)
                index += 1
            }
            return value
        }
    }
}

extension PushJSON.Parser.Key {
    /// The key spelt by `name` (the wire names of ``PushRequest`` and ``NoteChange``).
    init?(_ name: UnsafeRawBufferPointer) {
        func equals(_ literal: StaticString) -> Bool {
            name.count == literal.utf8CodeUnitCount && memcmp(name.baseAddress!, literal.utf8Start, name.count) == 0
        }
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
