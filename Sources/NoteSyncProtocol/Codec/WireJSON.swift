import Foundation
import MiniFlake

/// The JSON coders both sides use, and the mapping of a decoding failure to the protocol's error body.
public enum WireJSON {
    /// A fresh encoder (JSONEncoder is not `Sendable`; make one per use or per owner).
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    /// A fresh decoder.
    public static func decoder() -> JSONDecoder { JSONDecoder() }

    /// Decodes a request body, turning every failure into the error body the server answers with:
    /// `unknown_field`, `invalid_id` (a bad MiniFlake value), `invalid_field` (a value breaking a documented rule,
    /// such as ``TagRules``) or `invalid_json` (everything else), naming the field.
    public static func decodeRequest<T: Decodable>(_ type: T.Type, from data: Data) throws(APIErrorBody) -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw errorBody(for: error)
        }
    }

    /// The protocol error for a decoding failure.
    public static func errorBody(for error: any Error) -> APIErrorBody {
        switch error {
        case let unknown as UnknownFieldError:
            return APIErrorBody(code: .unknownField, message: unknown.description, field: unknown.path.isEmpty ? unknown.field : "\(unknown.path).\(unknown.field)")
        case let decoding as DecodingError:
            switch decoding {
            case .dataCorrupted(let context):
                if context.codingPath.isEmpty {
                    return APIErrorBody(code: .invalidJSON, message: "The body is not valid JSON.")
                }
                if let rule = context.underlyingError as? FieldRuleError {
                    return APIErrorBody(code: .invalidField, message: "\(context.codingPath.wirePath): \(rule.message)", field: context.codingPath.wirePath)
                }
                if context.underlyingError is ContentHashError {
                    return APIErrorBody(code: .invalidHash, message: "\(context.codingPath.wirePath): \(ContentHashError.rule).", field: context.codingPath.wirePath)
                }
                if context.underlyingError is FlakeError || isFlakeIDField(context.codingPath) {
                    return APIErrorBody(code: .invalidID, message: "\(context.codingPath.wirePath) is not a valid MiniFlake ID: \(context.debugDescription)", field: context.codingPath.wirePath)
                }
                return APIErrorBody(code: .invalidJSON, message: "\(context.codingPath.wirePath): \(context.debugDescription)", field: context.codingPath.wirePath)
            case .keyNotFound(let key, let context):
                let path = (context.codingPath + [key]).wirePath
                return APIErrorBody(code: .invalidJSON, message: "Missing required field \(path).", field: path)
            case .typeMismatch(let type, let context):
                let path = context.codingPath.wirePath
                if isFlakeIDField(context.codingPath) {
                    return APIErrorBody(code: .invalidID, message: "\(path) must be a MiniFlake ID as a decimal string.", field: path)
                }
                return APIErrorBody(code: .invalidJSON, message: "\(path) has the wrong type (expected \(typeName(type))).", field: path)
            case .valueNotFound(let type, let context):
                let path = context.codingPath.wirePath
                return APIErrorBody(code: .invalidJSON, message: "\(path) must not be null (expected \(typeName(type))).", field: path)
            @unknown default:
                return APIErrorBody(code: .invalidJSON, message: "The body could not be decoded.")
            }
        default:
            return APIErrorBody(code: .invalidJSON, message: "The body is not valid JSON.")
        }
    }

    /// Whether the last key of `path` names an ID field (see ``WireKey/isID``).
    private static func isFlakeIDField(_ path: [any CodingKey]) -> Bool {
        (path.last as? any WireKey)?.isID == true
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int64.Type, is Int.Type: "an integer"
        default: "\(type)"
        }
    }
}
