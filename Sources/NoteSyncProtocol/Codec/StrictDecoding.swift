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

/// The underlying error of a request field whose value breaks a documented rule (a tag's characters, say): the
/// protocol answers it `invalid_field`, naming the field, with this message (see ``WireJSON/errorBody(for:)``).
struct FieldRuleError: Error, Sendable {
    /// A sentence stating the rule broken.
    var message: String
}

/// A coding key for an array element, so that a field path names it (`changes[3].tags[1]`).
struct IndexCodingKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

/// A coding key for any string, used to list a container's keys.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension Decoder {
    /// The keyed container of a request message: throws ``UnknownFieldError`` when it holds a key that is not one of
    /// `keys`.
    func strictContainer<Key: WireKey>(keyedBy keys: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let container = try container(keyedBy: AnyCodingKey.self)
        for key in container.allKeys where Key(rawValue: key.stringValue) == nil {
            throw UnknownFieldError(field: key.stringValue, path: codingPath.wirePath)
        }
        return try self.container(keyedBy: keys)
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

    /// The value of an optional request field holding a set of tags: nil when absent, `null` refused, and a set
    /// breaking ``TagRules`` refused as `invalid_field` naming the offending tag (`changes[3].tags[1]`).
    func decodeTagsIfPresent(forKey key: Key) throws -> [String]? {
        guard let tags = try decodeIfPresentRefusingNull([String].self, forKey: key) else { return nil }
        if let violation = TagRules.violation(in: tags) {
            let path = codingPath + [key] + (violation.index.map { [IndexCodingKey($0)] } ?? [])
            throw DecodingError.dataCorrupted(
                .init(codingPath: path, debugDescription: violation.message, underlyingError: FieldRuleError(message: violation.message)))
        }
        return tags
    }
}

extension KeyedDecodingContainer {
    /// The value of an optional request field holding a set of attachments: nil when absent, `null` refused, and a
    /// set breaking ``AttachmentRules`` refused as `invalid_field` naming the offending manifest's field
    /// (`changes[3].attachments[1].name`).
    func decodeAttachmentsIfPresent(forKey key: Key) throws -> [AttachmentManifest]? {
        guard let attachments = try decodeIfPresentRefusingNull([AttachmentManifest].self, forKey: key) else { return nil }
        if let violation = AttachmentRules.violation(in: attachments) {
            var path: [any CodingKey] = codingPath + [key]
            if let index = violation.index { path.append(IndexCodingKey(index)) }
            if let field = violation.field { path.append(AnyCodingKey(stringValue: field)) }
            throw DecodingError.dataCorrupted(
                .init(codingPath: path, debugDescription: violation.message, underlyingError: FieldRuleError(message: violation.message)))
        }
        return attachments
    }
}
