import Foundation
import MiniFlake

/// A body with a hand-written decoder for its common shape; ``decode(_:)`` falls back to `JSONDecoder`.
///
/// The client decodes push and pull answers with it (`JSONDecoder` is slow enough to dominate a large pull). The
/// fast path reads exactly the shape the server writes (the known keys, string IDs, no escaped keys) and gives up on
/// anything else (an unknown key from a newer server, a repeated key, numeric IDs, malformed JSON), which then goes
/// to `JSONDecoder`: the same value or the same error.
public protocol WireFastDecodable: Decodable {
    /// The value, or nil when the body is not the common shape (or not valid).
    static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> Self?
}

extension WireFastDecodable {
    /// The fast path, else `JSONDecoder`.
    public static func decode(_ data: Data) throws -> Self {
        if let value = data.withUnsafeBytes({ fastDecode($0) }) { return value }
        return try WireJSON.decoder().decode(Self.self, from: data)
    }
}
