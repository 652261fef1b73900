import Foundation

/// Writes JSON values to a byte buffer: the server's pull and push answers and the client's push changes are
/// written with it instead of `JSONEncoder` (tests compare the bytes with `JSONEncoder`'s). Inlinable, because the
/// writers live in other modules and call it once per byte.
public protocol JSONByteWriting {
    var bytes: JSONBytes { get }
}

/// A growable byte buffer in `malloc`'d memory whose bytes become a `Data` without a copy (``takeData()``).
///
/// A page of 1,000 notes is about 380 KB: building it in an `[UInt8]` and then copying it into `Data` cost a copy
/// and a fresh set of page faults per pull. A class, so that the writers that share one never free it twice.
///
/// Its fields are exempt from Swift's run-time exclusivity checks: a class's stored properties are checked at every
/// access, which is several checks per byte appended, and those checks were more than half of the time a pull page
/// took to write (PERFORMANCE.md). One writer owns a buffer at a time and no access to a field overlaps another.
public final class JSONBytes {
    @usableFromInline @exclusivity(unchecked) var start: UnsafeMutableRawPointer?
    @usableFromInline @exclusivity(unchecked) var _count = 0
    @usableFromInline @exclusivity(unchecked) var capacity = 0

    /// Bytes written so far.
    @inlinable public var count: Int { _count }

    public init(capacity: Int = 256) {
        reserveCapacity(capacity)
    }

    deinit { free(start) }

    /// Makes room for at least `minimum` bytes in all.
    @inlinable public func reserveCapacity(_ minimum: Int) {
        guard minimum > capacity else { return }
        let newCapacity = Swift.max(minimum, capacity * 2, 64)
        guard let grown = realloc(start, newCapacity) else { fatalError("out of memory (\(newCapacity) bytes)") }
        start = grown
        capacity = newCapacity
    }

    @inlinable @inline(__always)
    public func append(_ byte: UInt8) {
        if _count == capacity { reserveCapacity(_count + 1) }
        start.unsafelyUnwrapped.storeBytes(of: byte, toByteOffset: _count, as: UInt8.self)
        _count += 1
    }

    @inlinable
    public func append(contentsOf buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        if _count + buffer.count > capacity { reserveCapacity(_count + buffer.count) }
        (start.unsafelyUnwrapped + _count).copyMemory(from: base, byteCount: buffer.count)
        _count += buffer.count
    }

    @inlinable
    public func append(contentsOf buffer: UnsafeBufferPointer<UInt8>) {
        append(contentsOf: UnsafeRawBufferPointer(buffer))
    }

    @inlinable
    public func append(contentsOf bytes: [UInt8]) {
        bytes.withUnsafeBytes { append(contentsOf: $0) }
    }

    @inlinable
    public static func += (bytes: JSONBytes, more: [UInt8]) {
        bytes.append(contentsOf: more)
    }

    /// A copy of the bytes written from offset `start` on.
    public func bytes(from start: Int) -> [UInt8] {
        guard let base = self.start, start < _count else { return [] }
        return Array(UnsafeRawBufferPointer(start: base + start, count: _count - start))
    }

    /// The bytes written, as `Data` that owns the memory (no copy); the buffer is empty afterwards.
    public func takeData() -> Data {
        guard let taken = start, _count > 0 else { return Data() }
        let data = Data(bytesNoCopy: taken, count: _count, deallocator: .free)
        start = nil
        _count = 0
        capacity = 0
        return data
    }
}

// MARK: - Values

extension JSONBytes {
    /// Bytes known to be JSON already (keys, punctuation).
    @inlinable public func raw(_ text: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Starts a field of an object: a comma (unless it is the object's first field), then its `"name":` (a
    /// ``KeyTable/quoted(_:)``). The writers write each field as this and its value.
    @inlinable public func field(_ quotedName: [UInt8], first: Bool = false) {
        if !first { append(UInt8(ascii: ",")) }
        self += quotedName
    }

    @inlinable public func bool(_ value: Bool) {
        raw(value ? "true" : "false")
    }

    @inlinable public func quotedInteger(_ value: Int64) {
        append(UInt8(ascii: "\""))
        integer(value)
        append(UInt8(ascii: "\""))
    }

    @inlinable public func integer(_ value: Int64) {
        if value < 0 {
            append(UInt8(ascii: "-"))
            if value == .min {
                raw("9223372036854775808")
                return
            }
        }
        var magnitude = value.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(20 - count)...]))
        }
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, ... or `\u00XX`; everything else
    /// (including non-ASCII UTF-8) as is.
    @inlinable public func string(_ text: String) {
        append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if start < index { append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                switch byte {
                case 0x22: self += [0x5C, 0x22]
                case 0x5C: self += [0x5C, 0x5C]
                case 0x0A: self += [0x5C, UInt8(ascii: "n")]
                case 0x0D: self += [0x5C, UInt8(ascii: "r")]
                case 0x09: self += [0x5C, UInt8(ascii: "t")]
                case 0x08: self += [0x5C, UInt8(ascii: "b")]
                case 0x0C: self += [0x5C, UInt8(ascii: "f")]
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    self += [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
                }
                start = index + 1
            }
            if start < utf8.count { append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        append(UInt8(ascii: "\""))
    }

    /// A JSON array of strings, each as ``string(_:)`` writes it.
    @inlinable public func strings(_ values: [String]) {
        append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { append(UInt8(ascii: ",")) }
            string(value)
        }
        append(UInt8(ascii: "]"))
    }
}

/// The value writers, for the writer types that hold a ``JSONBytes`` (each call goes straight to the buffer's own
/// method: calling through the protocol's generic code cost a pull page half again as much).
extension JSONByteWriting {
    /// Bytes known to be JSON already (keys, punctuation).
    @inlinable public func raw(_ text: StaticString) { bytes.raw(text) }
    /// Starts a field of an object (``JSONBytes/field(_:first:)``).
    @inlinable public func field(_ quotedName: [UInt8], first: Bool = false) { bytes.field(quotedName, first: first) }
    @inlinable public func bool(_ value: Bool) { bytes.bool(value) }
    @inlinable public func quotedInteger(_ value: Int64) { bytes.quotedInteger(value) }
    @inlinable public func integer(_ value: Int64) { bytes.integer(value) }
    /// A JSON string (``JSONBytes/string(_:)``).
    @inlinable public func string(_ text: String) { bytes.string(text) }
    /// A JSON array of strings (``JSONBytes/strings(_:)``).
    @inlinable public func strings(_ values: [String]) { bytes.strings(values) }

    /// A field whose value `write` writes, when `value` is present: an absent optional is left out, as
    /// `WireJSON.encoder()` leaves it out.
    @inlinable public func field<Value>(_ quotedName: [UInt8], ifPresent value: Value?, _ write: (Value) -> Void) {
        guard let value else { return }
        field(quotedName)
        write(value)
    }
}
