/// The form of an invite code (sign-up policy `invite`): 28 characters of Crockford's base32 (`0-9`, `A-Z` without
/// `I`, `L`, `O`, `U`), 140 random bits, shown in seven groups of four: `7KQM-3XZD-0PAF-W9C2-HN4R-8TBE-YV61`.
///
/// People type codes, so reading one forgives what a person does: case is ignored, `-` and spaces between
/// characters are dropped, and `O` reads as `0`, `I` and `L` as `1` (Crockford's rules). Anything else (another
/// character, another length, more than ``maxInputLength`` characters) is not a code, which a server decides before
/// any lookup.
public enum InviteCode {
    /// Characters of a code, without its separators.
    public static let length = 28
    /// Characters of an invite as sent, separators included, past which it is refused unread.
    public static let maxInputLength = 64
    /// The 32 characters of a code, each standing for 5 bits.
    public static let alphabet: [UInt8] = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    /// Characters shown between separators.
    public static let groupLength = 4

    /// The code's canonical form (``length`` characters of ``alphabet``, no separator), or nil when `text` is not a
    /// code.
    public static func canonical(_ text: String) -> String? {
        let utf8 = text.utf8
        guard utf8.count <= maxInputLength else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(length)
        for byte in utf8 {
            var character = byte
            if character >= UInt8(ascii: "a"), character <= UInt8(ascii: "z") { character -= 32 }
            switch character {
            case UInt8(ascii: "-"), UInt8(ascii: " "):
                continue
            case UInt8(ascii: "O"):
                character = UInt8(ascii: "0")
            case UInt8(ascii: "I"), UInt8(ascii: "L"):
                character = UInt8(ascii: "1")
            default:
                guard alphabet.contains(character) else { return nil }
            }
            output.append(character)
        }
        guard output.count == length else { return nil }
        return String(decoding: output, as: UTF8.self)
    }

    /// A canonical code as people read it: groups of ``groupLength`` joined by `-`.
    public static func display(_ canonical: String) -> String {
        var groups: [Substring] = []
        var rest = Substring(canonical)
        while !rest.isEmpty {
            groups.append(rest.prefix(groupLength))
            rest = rest.dropFirst(groupLength)
        }
        return groups.joined(separator: "-")
    }
}
