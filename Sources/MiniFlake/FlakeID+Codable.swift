import Foundation

// MARK: - Codable

extension FlakeID: Codable {
    /// Encodes the decimal string, e.g. `"377858385731657729"` (JavaScript cannot hold 64-bit integers).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Decodes the canonical decimal string (no sign, no leading zero: `"0012"` is malformed, so an ID has one
    /// spelling on the wire), or a JSON integer in `1...2^53`.
    ///
    /// Errors surface as `DecodingError.dataCorrupted` whose `debugDescription` is the ``FlakeError``
    /// description and whose `underlyingError` is the ``FlakeError``; a value that is neither a string nor a
    /// number is a `typeMismatch`, and null a `valueNotFound`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        func corrupted(_ error: FlakeError) -> DecodingError {
            .dataCorrupted(.init(codingPath: container.codingPath, debugDescription: error.description, underlyingError: error))
        }
        if container.decodeNil() {
            throw DecodingError.valueNotFound(
                FlakeID.self, .init(codingPath: container.codingPath, debugDescription: "A MiniFlake ID is required, found null.")
            )
        }
        if let text = try? container.decode(String.self) {
            do throws(FlakeError) {
                let id = try Self.parseDecimal(Substring(text))
                // Zero, signs and overflow are reported by the parser; what it accepted is canonical unless it
                // had leading zeros.
                if text.utf8.first == UInt8(ascii: "0") { throw FlakeError.malformed(FlakeError.truncated(text)) }
                self = id
            } catch {
                throw corrupted(error)
            }
            return
        }
        if let number = try? container.decode(Int64.self) {
            do throws(FlakeError) {
                if number > 1 << 53 { throw .imprecise(number) }
                self = try FlakeID(validating: number)
            } catch {
                throw corrupted(error)
            }
            return
        }
        if let number = try? container.decode(Double.self) {
            let error: FlakeError
            if number.isFinite, number == number.rounded(), abs(number) >= 0x1p63 {
                error = .overflow(FlakeError.truncated(String(number)))
            } else {
                error = .malformed(FlakeError.truncated(String(number)))
            }
            throw corrupted(error)
        }
        throw DecodingError.typeMismatch(
            FlakeID.self,
            .init(codingPath: container.codingPath, debugDescription: "A MiniFlake ID must be a decimal string.")
        )
    }
}
