import Foundation

/// The field names of one wire message: its `CodingKeys`, which `Codable`, the hand-written readers and writers
/// (through a ``KeyTable``) and error field paths (`changes[3].text`) all use, so no wire name is spelt twice.
public protocol WireKey: CodingKey, CaseIterable, Hashable, Sendable, RawRepresentable where RawValue == String {
    /// Whether the field holds a MiniFlake ID (a decoding failure there is `invalid_id`, not `invalid_json`).
    var isID: Bool { get }
}

extension WireKey {
    public var isID: Bool { false }
}

/// A message's keys prepared for the hand-written codecs: matched from raw key bytes without allocating, and
/// written as ready-made `"name":` bytes. Build one per message, once (a `static let`).
public struct KeyTable<Key: WireKey>: Sendable {
    /// Keys by the byte length of their names, each with its bit (its position in `allCases`).
    private let byLength: [[(name: [UInt8], key: Key, bit: UInt32)]]
    private let quotedNames: [Key: [UInt8]]

    public init() {
        var byLength: [[(name: [UInt8], key: Key, bit: UInt32)]] = []
        var quotedNames: [Key: [UInt8]] = [:]
        for (index, key) in Key.allCases.enumerated() {
            precondition(index < 32, "a KeyTable holds at most 32 keys")
            let name = Array(key.rawValue.utf8)
            while byLength.count <= name.count { byLength.append([]) }
            byLength[name.count].append((name, key, UInt32(1) << UInt32(index)))
            quotedNames[key] = Array("\"\(key.rawValue)\":".utf8)
        }
        self.byLength = byLength
        self.quotedNames = quotedNames
    }

    /// The key spelt exactly by `name` (a key read without escapes) and its bit, for duplicate-key checks.
    public func match(_ name: UnsafeRawBufferPointer) -> (key: Key, bit: UInt32)? {
        guard name.count < byLength.count, let base = name.baseAddress else { return nil }
        for entry in byLength[name.count] {
            let equal = entry.name.withUnsafeBytes { memcmp($0.baseAddress!, base, name.count) == 0 }
            if equal { return (entry.key, entry.bit) }
        }
        return nil
    }

    /// `"name":` for `key`.
    public func quoted(_ key: Key) -> [UInt8] { quotedNames[key]! }
}
