import NoteSyncProtocol

/// Tags on this device, by the wire module's rules (``TagRules``: the characters and length of a tag, how two tags
/// are the same, how many a note may have), which are stated there once.
///
/// A note's tags are a set: one tag per key, each shown as first written, kept in the order of their keys
/// (``canonical(_:)``), the order the store and every listing use.
public enum Tags {
    /// The key a tag is compared by.
    public static func key(_ name: String) -> String { TagRules.key(name) }

    /// The rule in words (``TagRules/rule``): what help texts say.
    public static var rule: String { TagRules.rule }

    /// Why `name` is not a tag (a sentence stating the rule it breaks), nil when it is one.
    public static func problem(_ name: String) -> String? { TagRules.problem(name) }

    /// `names` as a set: the first display form of each key, in the order of the keys (``TagRules/sorted(_:)``, the
    /// order the server stores and sends a set in).
    public static func canonical(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return TagRules.sorted(names.filter { seen.insert(key($0)).inserted })
    }

    /// Checks each tag against ``TagRules`` and returns them as a set (``canonical(_:)``).
    ///
    /// - Throws: `invalid_input` with the rule the first bad tag breaks.
    public static func validated(_ names: [String]) throws(NotesError) -> [String] {
        for name in names {
            if let problem = problem(name) { throw NotesError(.invalidInput, problem) }
        }
        return canonical(names)
    }

    /// A note's whole set: ``validated(_:)``, and no more tags than a note may have.
    ///
    /// - Throws: `invalid_input` with the rule broken.
    public static func validatedSet(_ names: [String]) throws(NotesError) -> [String] {
        let tags = try validated(names)
        try requireCount(tags)
        return tags
    }

    /// `current` with the tags of `adding` that it has no key of (as written there), without those whose key is in
    /// `removing`; a tag both added and removed is removed.
    public static func applying(adding: [String], removing: [String], to current: [String]) -> [String] {
        let removed = Set(removing.map(key))
        return canonical((current + adding).filter { !removed.contains(key($0)) })
    }

    /// Refuses a set larger than a note may have (``TagRules/maxTagsPerNote``).
    static func requireCount(_ names: [String]) throws(NotesError) {
        if names.count > TagRules.maxTagsPerNote {
            throw NotesError(.invalidInput, "A note has at most \(TagRules.maxTagsPerNote) tags; this would give it \(names.count).")
        }
    }
}

/// A note's tags and flags, and its attachments (issue 33): what a push sends beside its text, a pull brings, and a
/// version of its history holds. Each part merges three-way on the server against what was last synced of it.
struct TagsAndFlags: Sendable, Equatable {
    /// In canonical order (``Tags/canonical(_:)``).
    var tags: [String] = []
    var pinned = false
    var archived = false
    /// The note's attachments, sorted by name (``StoredAttachments/canonical(_:)``).
    var attachments: [AttachmentManifest] = []
}

extension LocalNote {
    /// The note's tags, flags and attachments.
    var tagsAndFlags: TagsAndFlags { TagsAndFlags(tags: tags, pinned: isPinned, archived: isArchived, attachments: attachments) }
    /// What was last synced of them.
    var baseTagsAndFlags: TagsAndFlags {
        TagsAndFlags(tags: baseTags, pinned: basePinned, archived: baseArchived, attachments: baseAttachments)
    }
}

/// A tag and how many live notes have it (`notes tags`).
public struct TagCount: Sendable, Equatable, Codable {
    /// The tag as written on the oldest note here that has it.
    public var name: String
    public var notes: Int
}
