import Foundation

/// What a tag is, stated once: the server refuses a change breaking these rules, the client checks them before
/// sending, and every help text and document says ``rule`` (Docs/PROTOCOL.md and openapi.yaml are checked against it
/// by a test).
///
/// A tag is 1–64 UTF-8 bytes (``nameBytes``) of Unicode letters (general category L, each possibly followed by
/// combining marks, category M) and decimal digits (Nd), plus `-`, `_`, `.` and `/`; it neither starts nor ends with
/// `/` or `.`. Two tags are the same tag when their ``key(_:)`` is equal: the `lowercased()` of the NFC form
/// (`Work`, `WORK` and `work` are one tag; so are `café` written precomposed and decomposed). A tag is shown as it was
/// first written (its display form). A note has at most ``maxTagsPerNote`` tags.
///
/// On the wire a set of tags is a JSON array of display forms, in no particular order, with no two equal keys
/// (refused otherwise).
public enum TagRules {
    /// The length of a tag's display form, in UTF-8 bytes.
    public static let nameBytes = 1...64
    /// Most tags on one note.
    public static let maxTagsPerNote = 50
    /// The ASCII punctuation a tag may hold besides letters and digits.
    public static let punctuation: [Character] = ["-", "_", ".", "/"]
    /// The punctuation a tag may not start or end with.
    public static let notAtEnds: [Character] = ["/", "."]

    /// The rule in words: what every help text and error message says.
    public static var rule: String {
        "a tag is \(nameBytes.lowerBound)–\(nameBytes.upperBound) UTF-8 bytes of letters, digits, '-', '_', '.' and '/', "
            + "not starting or ending with '/' or '.'; tags are compared without case; at most \(maxTagsPerNote) per note"
    }

    /// The key two tags are compared by: the `lowercased()` of the NFC form.
    public static func key(_ name: String) -> String {
        name.precomposedStringWithCanonicalMapping.lowercased()
    }

    /// Why `name` is not a tag, or nil when it is one (a sentence stating the rule it breaks).
    public static func problem(_ name: String) -> String? {
        let bytes = name.utf8.count
        guard nameBytes.contains(bytes) else {
            return "A tag is \(nameBytes.lowerBound)–\(nameBytes.upperBound) UTF-8 bytes; \(shown(name)) has \(bytes)."
        }
        if let first = name.first, notAtEnds.contains(first) {
            return "A tag does not start with '/' or '.': \(shown(name))."
        }
        if let last = name.last, notAtEnds.contains(last) {
            return "A tag does not end with '/' or '.': \(shown(name))."
        }
        var afterBase = false
        for scalar in name.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter, .decimalNumber:
                afterBase = true
            case .nonspacingMark where afterBase, .spacingMark where afterBase, .enclosingMark where afterBase:
                continue
            default:
                if scalar.isASCII, punctuation.contains(Character(scalar)) {
                    afterBase = false
                    continue
                }
                return "A tag holds only letters, digits, '-', '_', '.' and '/'; \(shown(name)) holds \(shown(scalar))."
            }
        }
        return nil
    }

    /// Whether `name` is a tag.
    public static func isValid(_ name: String) -> Bool { problem(name) == nil }

    /// A set of tags that breaks the rules: which tag (its index, nil for the set as a whole) and why.
    public struct Violation: Error, Sendable, Equatable, CustomStringConvertible {
        /// The index of the offending tag in the array, nil when the set as a whole is at fault (too many tags).
        public var index: Int?
        /// A sentence stating the rule broken.
        public var message: String

        public init(index: Int?, message: String) {
            self.index = index
            self.message = message
        }

        public var description: String { message }
    }

    /// The first way `tags` breaks the rules as a set: too many, a tag that is not one, or a tag equal (by key) to an
    /// earlier one. Nil when the set is valid.
    public static func violation(in tags: [String]) -> Violation? {
        if tags.count > maxTagsPerNote {
            return Violation(index: nil, message: "A note has at most \(maxTagsPerNote) tags; this set has \(tags.count).")
        }
        var seen: [String: String] = [:]
        for (index, tag) in tags.enumerated() {
            if let problem = problem(tag) { return Violation(index: index, message: problem) }
            let key = key(tag)
            if let earlier = seen[key] {
                return Violation(
                    index: index, message: "A set of tags names each tag once (compared without case): \(shown(earlier)) and \(shown(tag)) are one tag.")
            }
            seen[key] = tag
        }
        return nil
    }

    /// `tags` in their canonical order: by key, compared as UTF-8 bytes (how the server stores and sends a set). The
    /// tags must be a valid set (no two equal keys).
    public static func sorted(_ tags: [String]) -> [String] {
        tags.map { (key: Array(key($0).utf8), name: $0) }.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.name)
    }

    /// Whether two sets hold the same tags (by key, whatever their display forms and order).
    public static func sameSet(_ a: [String], _ b: [String]) -> Bool {
        a.count == b.count && Set(a.map(key)) == Set(b.map(key))
    }

    /// A tag as a message shows it: quoted, on one line (control characters and quotes escaped).
    private static func shown(_ name: String) -> String {
        name.debugDescription
    }

    private static func shown(_ scalar: Unicode.Scalar) -> String {
        let hex = "U+" + String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4)
        return scalar.properties.generalCategory == .control || scalar == " " ? hex : "'\(scalar)' (\(hex))"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
