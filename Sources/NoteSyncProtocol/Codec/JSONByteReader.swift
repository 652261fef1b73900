import Foundation
import MiniFlake

/// A strict reader of JSON tokens from bytes (RFC 8259 grammar), for the hand-written decoders of the hot bodies:
/// push requests on the server, push and pull answers on the client. Every method returns nil (or false) to give
/// up, leaving the caller to hand the body to `JSONDecoder`, which then accepts it or gives the protocol's error:
/// the fast paths only ever accept what `JSONDecoder` accepts, with the same value. Rarer valid forms (numeric IDs,
/// escaped keys, exponents, `-0`) are given up on too. Inlinable: the decoders call it once per byte from other
/// modules.
public struct JSONByteReader {
    public let bytes: UnsafeRawBufferPointer
    public var index = 0

    @inlinable public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Whether only whitespace is left.
    @inlinable public mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    /// Whether a key read by ``rawKey()`` is `literal`.
    @inlinable public static func equals(_ name: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        name.count == literal.utf8CodeUnitCount && memcmp(name.baseAddress!, literal.utf8Start, name.count) == 0
    }

    @inlinable public mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    @inlinable public mutating func consume(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    @inlinable public mutating func consume(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] { return false }
        index += count
        return true
    }

    @inlinable public mutating func null() -> Bool { consume("null") }

    @inlinable public mutating func bool() -> Bool? {
        if consume("true") { return true }
        if consume("false") { return false }
        return nil
    }

    /// A key with no escapes: its bytes (valid while the buffer is).
    @inlinable public mutating func rawKey() -> UnsafeRawBufferPointer? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
            if bytes[index] == UInt8(ascii: "\\") || bytes[index] < 0x20 { return nil }
            index += 1
        }
        guard index < bytes.count else { return nil }
        let name = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        index += 1
        return name
    }

    /// An ID as the wire sends it: the canonical decimal string of a positive 64-bit value (no sign, no leading
    /// zero: `FlakeID`'s decoder refuses `"0012"`, so this gives up on it).
    @inlinable public mutating func id() -> FlakeID? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        guard index < bytes.count, bytes[index] != UInt8(ascii: "0") else { return nil }
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
    @inlinable public mutating func integer() -> Int64? {
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
    @inlinable public mutating func string() -> String? {
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

    @inlinable public mutating func hex4() -> UInt16? {
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

    /// Reads an array of strings (nil gives up).
    @inlinable
    public mutating func strings() -> [String]? {
        array { $0.string() }
    }

    /// Reads `null` (leaving `value` nil) or a value read by `read`; false gives up.
    @inlinable
    public mutating func optional<Value>(_ value: inout Value?, _ read: (inout JSONByteReader) -> Value?) -> Bool {
        if null() { return true }
        value = read(&self)
        return value != nil
    }
}
