/// Everything that can go wrong when reading, building or generating a MiniFlake ID.
///
/// Each case has a stable snake_case ``code`` (safe to put on the wire or in logs and to match on) and a
/// ``description`` that is one human sentence. Payloads carrying user text are truncated to 40 characters.
public enum FlakeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text was empty (or only whitespace).
    case empty
    /// The text is neither a decimal integer nor a 13-character Crockford base32 ID; the payload is the text,
    /// truncated to 40 characters.
    case malformed(String)
    /// The value is 0, which is never a MiniFlake ID.
    case zero
    /// The value is negative, which is never a MiniFlake ID.
    case negative(Int64)
    /// Numeric text beyond the 64-bit signed range; the payload is the text, truncated to 40 characters.
    case overflow(String)
    /// A JSON number above 2^53, which JavaScript cannot hold exactly: IDs must travel as strings.
    case imprecise(Int64)
    /// Milliseconds since the MiniFlake epoch outside `0...FlakeID.maxMilliseconds`.
    case millisecondsOutOfRange(Int64)
    /// A sequence number outside `0...FlakeID.maxSequence`.
    case sequenceOutOfRange(Int)
    /// An instance number outside `0...FlakeID.maxInstance`.
    case instanceOutOfRange(Int)
    /// The clock, or time borrowed ahead of it, is past the last representable millisecond
    /// (2087-11-05T15:47:35.551Z). Generators throw this rather than wrap around.
    case timeRangeExhausted
    /// All 1024 instance numbers of a ``FlakeInstancePool`` are leased.
    case instancesExhausted

    /// The most characters of user text an error carries.
    static let maximumPayloadLength = 40

    /// `text` cut to at most 40 characters, the last one an ellipsis when something was cut.
    static func truncated(_ text: some StringProtocol) -> String {
        guard text.count > maximumPayloadLength else { return String(text) }
        return String(text.prefix(maximumPayloadLength - 1)) + "…"
    }

    /// A stable snake_case code for the case, e.g. `malformed`, `zero`, `instance_out_of_range`.
    public var code: String {
        switch self {
        case .empty: "empty"
        case .malformed: "malformed"
        case .zero: "zero"
        case .negative: "negative"
        case .overflow: "overflow"
        case .imprecise: "imprecise"
        case .millisecondsOutOfRange: "milliseconds_out_of_range"
        case .sequenceOutOfRange: "sequence_out_of_range"
        case .instanceOutOfRange: "instance_out_of_range"
        case .timeRangeExhausted: "time_range_exhausted"
        case .instancesExhausted: "instances_exhausted"
        }
    }

    /// One human sentence saying what is wrong.
    public var description: String {
        switch self {
        case .empty:
            "The text is empty; a MiniFlake ID is a positive decimal integer or 13 base32 characters."
        case .malformed(let text):
            "'\(text)' is neither a decimal integer nor a 13-character Crockford base32 MiniFlake ID."
        case .zero:
            "0 is not a MiniFlake ID; IDs are positive."
        case .negative(let value):
            "\(value) is not a MiniFlake ID; IDs are positive."
        case .overflow(let text):
            "'\(text)' is beyond the 64-bit signed range of MiniFlake IDs."
        case .imprecise(let value):
            "The JSON number \(value) is above 2^53 and may have lost precision; send MiniFlake IDs as decimal strings."
        case .millisecondsOutOfRange(let value):
            "Milliseconds \(value) are outside 0...\(FlakeID.maxMilliseconds) since the MiniFlake epoch (2018-03-01T00:00:00Z)."
        case .sequenceOutOfRange(let value):
            "Sequence \(value) is outside 0...\(FlakeID.maxSequence)."
        case .instanceOutOfRange(let value):
            "Instance \(value) is outside 0...\(FlakeID.maxInstance)."
        case .timeRangeExhausted:
            "The MiniFlake time range ends at 2087-11-05T15:47:35.551Z; no more IDs can be generated."
        case .instancesExhausted:
            "All 1024 MiniFlake instance numbers are leased; release one before leasing another."
        }
    }
}
