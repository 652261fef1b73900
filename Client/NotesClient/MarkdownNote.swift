/// A note as one Markdown file (`notes export --format markdown`, read back by `notes import`): its text, after a
/// YAML front matter holding its tags and flags when it has any:
///
/// ```
/// ---
/// tags: [work, idea]
/// pinned: true
/// archived: true
/// ---
/// The note's text.
/// ```
///
/// Only the keys that apply are written (a note without tags and flags has no front matter), in that order, and
/// only this form is read back: a tag holds no comma, bracket, space or colon (``TagRules``), so the list needs no
/// quoting. A text that itself starts with a `---` line is written after an empty front matter, so that reading it
/// back never takes its first lines for one; a file whose first lines are not exactly this form is all text.
public enum MarkdownNote {
    /// The file's content: the front matter (when needed), then the text, ending with a newline.
    public static func render(text: String, tags: [String], pinned: Bool, archived: Bool) -> String {
        var header: [String] = []
        if !tags.isEmpty { header.append("tags: [\(tags.joined(separator: ", "))]") }
        if pinned { header.append("pinned: true") }
        if archived { header.append("archived: true") }
        let body = text.hasSuffix("\n") ? text : text + "\n"
        if header.isEmpty && !startsWithDelimiter(text) { return body }
        return (["---"] + header + ["---"]).joined(separator: "\n") + "\n" + body
    }

    /// A file's text, tags and flags: those of its front matter, when it starts with one of the form ``render(text:tags:pinned:archived:)``
    /// writes (the tags as written there; check them with ``Tags/validated(_:)``), else the whole file as text.
    public static func parse(_ content: String) -> (text: String, tags: [String], pinned: Bool, archived: Bool) {
        let whole = (content, [String](), false, false)
        guard startsWithDelimiter(content) else { return whole }
        var lines = content.split(separator: "\n", omittingEmptySubsequences: false)[...]
        lines.removeFirst()
        var tags: [String] = []
        var pinned = false
        var archived = false
        var seen = Set<Substring>()
        while let line = lines.first {
            lines.removeFirst()
            if line == "---" {
                return (lines.joined(separator: "\n"), tags, pinned, archived)
            }
            guard let colon = line.firstIndex(of: ":") else { return whole }
            let key = line[..<colon]
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            guard seen.insert(key).inserted else { return whole }
            switch key {
            case "tags":
                guard value.first == "[", value.last == "]" else { return whole }
                tags = value.dropFirst().dropLast().split(separator: ",").map { String($0.trimmingWhitespace()) }.filter { !$0.isEmpty }
            case "pinned", "archived":
                guard value == "true" || value == "false" else { return whole }
                if key == "pinned" { pinned = value == "true" } else { archived = value == "true" }
            default:
                return whole
            }
        }
        return whole
    }

    /// Whether the first line is exactly `---`.
    private static func startsWithDelimiter(_ text: String) -> Bool {
        text == "---" || text.hasPrefix("---\n")
    }
}
