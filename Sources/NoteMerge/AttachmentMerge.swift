import NoteSyncProtocol

/// The three-way merge of a note's attachments: the rule the server runs on a pushed change of a plaintext account
/// (``merge(base:ours:theirs:)`` with the pushing device's set as `ours` and the server's as `theirs`) and a device
/// runs where it merges itself (end-to-end encrypted accounts).
///
/// Attachments are matched by name (as Swift compares strings). Per name, with `b`, `o` and `t` its manifest in the
/// base, ours and theirs (or absent):
/// - `o == t`: that (absent when both removed it);
/// - a side that left the name as the base had it takes the other side's (an addition, a modification or a removal);
/// - one side removed it and the other modified it: the modification (a removal never loses a newer file);
/// - both sides hold it, differently (both modified it, or both added a file of that name): both are kept, theirs
///   under the name and ours under a free name made by ``renamed(_:index:)`` (`photo.png` → `photo (2).png`).
///
/// The result is in ``AttachmentRules/sorted(_:)`` order, names are unique, and it holds at most
/// ``AttachmentRules/maxAttachmentsPerNote`` manifests: when the sides' additions together pass the limit, the names
/// theirs holds come first, then the names only ours holds, then the renamed copies, each in name order, up to the
/// limit (so a merged set is always one a device may push back).
public enum AttachmentMerge {
    /// Merges `ours` and `theirs`, both changed from `base` (see ``AttachmentMerge``). Each set is a valid wire set
    /// (no name twice); a later manifest of a name already seen is ignored.
    public static func merge(base: [AttachmentManifest], ours: [AttachmentManifest], theirs: [AttachmentManifest]) -> [AttachmentManifest] {
        let baseByName = byName(base)
        let ourByName = byName(ours)
        let theirByName = byName(theirs)
        var names: [String] = []
        var seen: Set<String> = []
        for manifest in theirs + ours where seen.insert(manifest.name).inserted { names.append(manifest.name) }

        var theirNames: [AttachmentManifest] = []
        var ourNames: [AttachmentManifest] = []
        var copies: [AttachmentManifest] = []
        for name in names {
            let b = baseByName[name], o = ourByName[name], t = theirByName[name]
            let kept: AttachmentManifest?
            if o == t || o == b {
                kept = t
            } else if t == b {
                kept = o
            } else if let o, let t {
                kept = t
                copies.append(o)
            } else {
                kept = o ?? t
            }
            guard let kept else { continue }
            if t != nil { theirNames.append(kept) } else { ourNames.append(kept) }
        }

        var taken = Set((theirNames + ourNames).map(\.name))
        var renamedCopies: [AttachmentManifest] = []
        for copy in AttachmentRules.sorted(copies) {
            var index = 2
            var name = renamed(copy.name, index: index)
            while taken.contains(name) {
                index += 1
                name = renamed(copy.name, index: index)
            }
            taken.insert(name)
            var renamedCopy = copy
            renamedCopy.name = name
            renamedCopies.append(renamedCopy)
        }

        var result: [AttachmentManifest] = []
        for group in [theirNames, ourNames, renamedCopies] {
            for manifest in AttachmentRules.sorted(group) where result.count < AttachmentRules.maxAttachmentsPerNote {
                result.append(manifest)
            }
        }
        return AttachmentRules.sorted(result)
    }

    /// `name` with ` (index)` before its extension (`photo.png` → `photo (2).png`, `notes` → `notes (2)`, `.profile`
    /// → `.profile (2)`), the stem shortened (by whole characters) so the result stays within
    /// ``AttachmentManifest/maxNameBytes``.
    public static func renamed(_ name: String, index: Int) -> String {
        var stem = Substring(name)
        var ext = Substring("")
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            stem = name[..<dot]
            ext = name[dot...]
            // An extension too long to keep whole is not one worth keeping.
            if ext.utf8.count > 32 {
                stem = Substring(name)
                ext = ""
            }
        }
        let suffix = " (\(index))"
        let room = AttachmentManifest.maxNameBytes - suffix.utf8.count - ext.utf8.count
        while stem.utf8.count > room { stem = stem.dropLast() }
        return stem + suffix + ext
    }

    /// A set by name, keeping each name's first manifest.
    private static func byName(_ manifests: [AttachmentManifest]) -> [String: AttachmentManifest] {
        var result: [String: AttachmentManifest] = [:]
        for manifest in manifests where result[manifest.name] == nil { result[manifest.name] = manifest }
        return result
    }
}
