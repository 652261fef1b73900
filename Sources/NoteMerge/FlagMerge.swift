/// The three-way merge of a note's flags (pinned, archived), each on its own: whichever side changed it from the
/// base wins; when both changed it they agree (a flag has two values). The same rule for the server on a pushed
/// change (`ours` the device's, `theirs` the server's) and for a device that merges itself.
public enum FlagMerge {
    /// `ours` when it changed from `base`, else `theirs`.
    public static func merge(base: Bool, ours: Bool, theirs: Bool) -> Bool {
        ours != base ? ours : theirs
    }
}
