import NoteSyncProtocol

/// The three-way merge of a note's tags: the one rule the server runs on a pushed change (``merge(base:ours:theirs:)``
/// with the pushing device's set as `ours` and the server's as `theirs`) and a device runs where it merges itself
/// (end-to-end encrypted accounts).
///
/// Tags are compared by ``TagRules/key(_:)`` (without case, NFC). Per key:
/// - added on one side (absent from the base) and not on the other: kept;
/// - added on both sides: one tag, shown as `theirs` writes it (the server's), else as `ours` does;
/// - removed on either side (in the base, absent from that side): gone, whatever the other side did;
/// - kept on both sides: kept, shown as `theirs` writes it.
///
/// So a tag added on one device and another removed on the other both take effect, and no side's change is lost.
/// The result is in ``TagRules/sorted(_:)`` order and holds at most ``TagRules/maxTagsPerNote`` tags: when the two
/// sides' additions together pass the limit, the tags both sides hold come first, then `theirs`' own additions, then
/// `ours`', each in key order, up to the limit (so a merged set is always one a device may push back). Sets are given
/// as display forms with no two equal keys (a valid wire set); a later duplicate is ignored.
public enum TagMerge {
    /// Merges `ours` and `theirs`, both changed from `base` (see ``TagMerge``).
    public static func merge(base: [String], ours: [String], theirs: [String]) -> [String] {
        let baseKeys = Set(base.map(TagRules.key))
        let ourTags = keyed(ours)
        let theirTags = keyed(theirs)
        var both: [(key: String, name: String)] = []
        var theirsOnly: [(key: String, name: String)] = []
        var oursOnly: [(key: String, name: String)] = []
        for (key, name) in theirTags.order {
            if ourTags.names[key] != nil {
                both.append((key, name))
            } else if !baseKeys.contains(key) {
                theirsOnly.append((key, name))
            }
        }
        for (key, name) in ourTags.order where theirTags.names[key] == nil && !baseKeys.contains(key) {
            oursOnly.append((key, name))
        }
        var kept: [(key: String, name: String)] = []
        for group in [both, theirsOnly, oursOnly] {
            for tag in group.sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) })
            where kept.count < TagRules.maxTagsPerNote {
                kept.append(tag)
            }
        }
        return kept.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }.map(\.name)
    }

    /// A set by key, keeping each key's first display form, and its keys in order of first appearance.
    private static func keyed(_ tags: [String]) -> (names: [String: String], order: [(key: String, name: String)]) {
        var names: [String: String] = [:]
        var order: [(key: String, name: String)] = []
        for tag in tags {
            let key = TagRules.key(tag)
            guard names[key] == nil else { continue }
            names[key] = tag
            order.append((key, tag))
        }
        return (names, order)
    }
}
