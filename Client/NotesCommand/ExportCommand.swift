import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every note to JSON or Markdown files.",
        discussion: """
            Every live note on this device, unsynced ones and conflict copies included. JSON (the default) keeps \\
            each note's identity (client ID and origin), so `notes import` on a fresh device of the same account \\
            makes no duplicate; it goes to PATH, or to standard output without one. Markdown writes one .md file \\
            per note into the directory PATH (created if needed; files of the same name are replaced), its tags \\
            and flags in a front matter (tags: [work, idea], pinned: true, archived: true). Both keep tags and \\
            flags, which `notes import` reads back.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case json, markdown
    }

    @OptionGroup var options: GlobalOptions
    @Option(name: .long, help: "json or markdown.") var format: Format = .json
    @Argument(help: "Where to write (a file for JSON, a directory for Markdown).") var path: String?

    func validate() throws {
        if format == .markdown && path == nil { throw ValidationError("Markdown export needs a directory: notes export --format markdown DIR") }
    }

    func run() async throws {
        let client = try options.openClient()
        let export = try client.export()
        switch format {
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = try encoder.encode(export)
            if let path {
                try write(data + Data("\n".utf8), to: path)
                Console.warn("Exported \(plural(export.notes.count, "note")) to \(path).")
            } else {
                Console.out(bytes: Array(data))
            }
        case .markdown:
            let directory = URL(fileURLWithPath: (path! as NSString).expandingTildeInPath, isDirectory: true)
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw CommandFailure(message: "cannot create the directory \(directory.path)")
            }
            let ids = try client.displayIDs()
            let notes = try client.notes()
            for note in notes {
                let name = Self.fileName(title: note.title, id: ids[note.id] ?? note.clientID.base32)
                let text = MarkdownNote.render(text: note.text, tags: note.tags, pinned: note.isPinned, archived: note.isArchived)
                try write(Data(text.utf8), to: directory.appendingPathComponent(name).path)
            }
            Console.warn("Exported \(plural(notes.count, "note")) to \(directory.path) (one .md file each).")
        }
    }

    /// `title-words-ID.md`: readable, and unique by the note's ID.
    static func fileName(title: String, id: String) -> String {
        var slug = ""
        for character in title.lowercased() {
            if character.isLetter || character.isNumber {
                slug.append(character)
            } else if !slug.isEmpty && slug.last != "-" {
                slug.append("-")
            }
            if slug.count >= 40 { break }
        }
        while slug.hasSuffix("-") { slug.removeLast() }
        return (slug.isEmpty ? "" : slug + "-") + id + ".md"
    }

    private func write(_ data: Data, to path: String) throws {
        do {
            try data.write(to: URL(fileURLWithPath: (path as NSString).expandingTildeInPath), options: .atomic)
        } catch {
            throw CommandFailure(message: "cannot write \(path): \((error as NSError).localizedFailureReason ?? "the directory is missing or not writable")")
        }
    }
}
