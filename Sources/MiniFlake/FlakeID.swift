import Foundation

/// A MiniFlake ID: a positive 64-bit integer that sorts by creation time.
///
/// The layout is bit-for-bit that of the original MiniFlake (Swift, 2018):
///
///     bit 63   62 ............... 22   21 ........ 10   9 ....... 0
///       0     milliseconds (41 bits)   sequence (12)   instance (10)
///
/// `rawValue = milliseconds << 22 | sequence << 10 | instance`, where `milliseconds` counts from the MiniFlake
/// epoch 2018-03-01T00:00:00Z (Unix 1_519_862_400_000 ms). IDs stay positive until 2087-11-05T15:47:35.551Z.
///
/// Text forms: ``description`` is decimal (the wire form); ``base32`` is 13 Crockford base32 characters whose
/// lexical order is the numeric order. ``init(parsing:)`` reads either.
public struct FlakeID: Hashable, Comparable, Sendable {
    /// The MiniFlake epoch, 2018-03-01T00:00:00Z, in Unix milliseconds.
    public static let epochUnixMilliseconds: Int64 = 1_519_862_400_000
    /// The last representable millisecond since the epoch, 2^41 - 1 (2087-11-05T15:47:35.551Z).
    public static let maxMilliseconds: Int64 = (1 << 41) - 1
    /// The highest sequence number within one millisecond, 2^12 - 1.
    public static let maxSequence: Int = 4095
    /// The highest instance (generator) number, 2^10 - 1.
    public static let maxInstance: Int = 1023

    @usableFromInline static let sequenceShift: Int64 = 10
    @usableFromInline static let millisecondsShift: Int64 = 22

    /// The 64-bit value; always positive.
    public let rawValue: Int64

    /// Wraps a value already known to be a valid (positive) ID. The generators' hot path.
    @inlinable
    init(uncheckedRawValue rawValue: Int64) {
        self.rawValue = rawValue
    }

    /// Wraps a 64-bit value, checking only that it is positive.
    ///
    /// - Throws: ``FlakeError/zero`` or ``FlakeError/negative(_:)``.
    public init(validating rawValue: Int64) throws(FlakeError) {
        if rawValue == 0 { throw .zero }
        if rawValue < 0 { throw .negative(rawValue) }
        self.rawValue = rawValue
    }

    /// Builds an ID from its three fields.
    ///
    /// - Parameters:
    ///   - milliseconds: Since the MiniFlake epoch, `0...maxMilliseconds`.
    ///   - sequence: `0...maxSequence`.
    ///   - instance: `0...maxInstance`.
    /// - Throws: the matching `...OutOfRange` error, or ``FlakeError/zero`` when all three are 0.
    public init(milliseconds: Int64, sequence: Int, instance: Int) throws(FlakeError) {
        guard (0...Self.maxMilliseconds).contains(milliseconds) else { throw .millisecondsOutOfRange(milliseconds) }
        guard (0...Self.maxSequence).contains(sequence) else { throw .sequenceOutOfRange(sequence) }
        guard (0...Self.maxInstance).contains(instance) else { throw .instanceOutOfRange(instance) }
        let raw = milliseconds << Self.millisecondsShift | Int64(sequence) << Self.sequenceShift | Int64(instance)
        if raw == 0 { throw .zero }
        self.rawValue = raw
    }

    /// Milliseconds since the MiniFlake epoch (2018-03-01T00:00:00Z).
    public var milliseconds: Int64 { rawValue >> Self.millisecondsShift }

    /// Milliseconds since the Unix epoch.
    public var unixMilliseconds: Int64 { milliseconds + Self.epochUnixMilliseconds }

    /// The creation time, to the millisecond.
    public var date: Date { Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000) }

    /// The sequence number within the millisecond, `0...4095`.
    public var sequence: Int { Int(truncatingIfNeeded: (rawValue >> Self.sequenceShift) & 0xFFF) }

    /// The instance (generator) number, `0...1023`.
    public var instance: Int { Int(truncatingIfNeeded: rawValue & 0x3FF) }

    public static func < (lhs: FlakeID, rhs: FlakeID) -> Bool { lhs.rawValue < rhs.rawValue }
}

// MARK: - Text

extension FlakeID: LosslessStringConvertible, CustomStringConvertible {
    /// The decimal form, e.g. `"377858385731657729"`: the form on the wire and in URLs.
    public var description: String { String(rawValue) }

    /// Reads the decimal form only (no sign, no whitespace); `nil` for anything else, including 0.
    /// Use ``init(parsing:)`` to also accept base32 and to learn why text was rejected.
    public init?(_ description: String) {
        guard let id = try? Self.parseDecimal(Substring(description)) else { return nil }
        self = id
    }

    /// Reads an ID in either text form, after trimming surrounding whitespace.
    ///
    /// Text of exactly 13 characters, all in the Crockford base32 alphabet (case-insensitive, with the aliases
    /// I and L for 1 and O for 0), is read as ``base32``; anything else must be a decimal integer. So a
    /// 13-digit decimal is read as base32: no real ID has 13 decimal digits, since every ID made after
    /// 2018-03-01T00:40Z is at least 10^13. A leading `-` is read only to report ``FlakeError/negative(_:)``;
    /// a leading `+` is malformed.
    ///
    /// - Throws: ``FlakeError/empty``, ``FlakeError/malformed(_:)``, ``FlakeError/zero``,
    ///   ``FlakeError/negative(_:)`` or ``FlakeError/overflow(_:)``.
    public init(parsing text: String) throws(FlakeError) {
        let trimmed = Self.trimmingWhitespace(text)
        if trimmed.utf8.count == Base32.width, let id = try Self.parseBase32(trimmed) {
            self = id
        } else {
            self = try Self.parseDecimal(trimmed)
        }
    }

    static func trimmingWhitespace(_ text: String) -> Substring {
        var slice = Substring(text)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return slice
    }

    /// Strict decimal: optional `-` (only to report `.negative`), then ASCII digits. The wire form.
    static func parseDecimal(_ text: Substring) throws(FlakeError) -> FlakeID {
        let bytes = text.utf8
        guard let first = bytes.first else { throw .empty }
        let negative = first == UInt8(ascii: "-")
        let digits = negative ? bytes.dropFirst() : bytes[...]
        guard !digits.isEmpty else { throw .malformed(FlakeError.truncated(text)) }
        var magnitude: UInt64 = 0
        var overflowed = false
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                throw .malformed(FlakeError.truncated(text))
            }
            if overflowed { continue }  // keep scanning: a non-digit later makes the text malformed instead
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(byte &- UInt8(ascii: "0")))
            if o1 || o2 { overflowed = true } else { magnitude = sum }
        }
        if negative {
            if overflowed || magnitude > UInt64(Int64.max) + 1 { throw .overflow(FlakeError.truncated(text)) }
            if magnitude == 0 { throw .zero }
            throw .negative(Int64(truncatingIfNeeded: 0 &- magnitude))
        }
        if overflowed || magnitude > UInt64(Int64.max) { throw .overflow(FlakeError.truncated(text)) }
        return try FlakeID(validating: Int64(magnitude))
    }

    /// Base32 when all 13 characters are in the alphabet; `nil` when one is not (so the caller tries decimal).
    static func parseBase32(_ text: Substring) throws(FlakeError) -> FlakeID? {
        var value: UInt64 = 0
        var index = 0
        for byte in text.utf8 {
            guard let digit = Base32.value(of: byte) else { return nil }
            if index == 0, digit > 7 {
                // Bit 63 or 64 set: beyond the positive Int64 range. Still check the rest is base32.
                guard text.utf8.allSatisfy({ Base32.value(of: $0) != nil }) else { return nil }
                throw .overflow(FlakeError.truncated(text))
            }
            value = value << 5 | UInt64(digit)
            index += 1
        }
        return try FlakeID(validating: Int64(value))
    }

    /// 13 characters of Crockford base32 (`0-9A-Z` without I, L, O, U), uppercase and zero-padded, so that
    /// lexical order is numeric order. The first character is always `0`–`7`.
    public var base32: String {
        let value = UInt64(bitPattern: rawValue)
        return String(unsafeUninitializedCapacity: Base32.width) { buffer in
            for index in 0..<Base32.width {
                let shift = UInt64(5 * (Base32.width - 1 - index))
                buffer[index] = Base32.character(Int((value >> shift) & 31))
            }
            return Base32.width
        }
    }

    /// The creation time as ISO 8601 UTC with milliseconds, e.g. `"2026-11-22T10:15:30.123Z"`.
    ///
    /// Computed from the integer (exact and fast, ``UTCTime``), not with a date formatter.
    public var timestamp: String {
        // A FlakeID's time is between 2018 and 2087 (41 bits of milliseconds after its epoch): never nil.
        UTCTime.iso8601(unixMilliseconds: unixMilliseconds)!
    }
}

/// Crockford's base32 alphabet, fixed width 13 for 64-bit values.
enum Base32 {
    static let width = 13
    static let alphabet: [UInt8] = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    static func character(_ value: Int) -> UInt8 { alphabet[value] }

    /// The digit for an ASCII byte, case-insensitive, with Crockford's aliases (I, L → 1; O → 0).
    static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return letterValue(byte - UInt8(ascii: "a"))
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return letterValue(byte - UInt8(ascii: "A"))
        default: return nil
        }
    }

    /// Letter index 0 (A) ... 25 (Z) to its digit.
    private static let letters: [UInt8?] = {
        var table = [UInt8?](repeating: nil, count: 26)
        for (offset, byte) in alphabet.enumerated() where byte >= UInt8(ascii: "A") {
            table[Int(byte - UInt8(ascii: "A"))] = UInt8(offset)
        }
        table[Int(UInt8(ascii: "I") - UInt8(ascii: "A"))] = 1
        table[Int(UInt8(ascii: "L") - UInt8(ascii: "A"))] = 1
        table[Int(UInt8(ascii: "O") - UInt8(ascii: "A"))] = 0
        return table
    }()

    private static func letterValue(_ index: UInt8) -> UInt8? { letters[Int(index)] }
}
