/// Thrown while decoding a request that carries a field the protocol does not define.
///
/// Requests are strict so that a misspelt field (`"delted": true`) is refused instead of silently ignored; responses
/// are decoded leniently so an older client keeps working when a newer server adds fields.
public struct UnknownFieldError: Error, Sendable, CustomStringConvertible {
    /// The unexpected key.
    public var field: String
    /// Where it was, e.g. `changes[2]`.
    public var path: String
    public var description: String { path.isEmpty ? "unknown field '\(field)'" : "unknown field '\(field)' in \(path)" }
}

/// A coding key for any string, used to list a container's keys.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension Decoder {
    /// Throws ``UnknownFieldError`` when the keyed container holds a key that is not one of `keys`.
    func rejectUnknownKeys<Key: WireKey>(_ keys: Key.Type) throws {
        let container = try container(keyedBy: AnyCodingKey.self)
        for key in container.allKeys where Key(rawValue: key.stringValue) == nil {
            throw UnknownFieldError(field: key.stringValue, path: codingPath.wirePath)
        }
    }
}

extension [any CodingKey] {
    /// A readable path such as `changes[2].text`.
    public var wirePath: String {
        var path = ""
        for key in self {
            if let index = key.intValue {
                path += "[\(index)]"
            } else if key.stringValue.hasPrefix("Index "), let index = Int(key.stringValue.dropFirst(6)) {
                path += "[\(index)]"
            } else {
                path += path.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return path
    }
}

extension KeyedDecodingContainer {
    /// The value of an optional request field: nil when the key is absent, and `null` refused (a `valueNotFound`,
    /// answered `invalid_json`) rather than taken for absent, as the protocol says. Responses use
    /// `decodeIfPresent`, which takes `null` for absent (they are read leniently).
    func decodeIfPresentRefusingNull<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard contains(key) else { return nil }
        return try decode(type, forKey: key)
    }
}
