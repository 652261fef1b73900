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
            flags, which `notes import` reads back. A JSON export to PATH writes each note's attachments beside it, \
            under PATH.attachments/ID/NAME (downloading those not on this device), and lists them in the note \
            (name, mediaType, size, sha256, file: the path relative to PATH's directory); `notes import PATH` reads \
            them back and checks each against its checksum. Exports to standard output and Markdown exports list or \
            carry no attachment files.
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
        var export = try client.export()
        switch format {
        case .json:
            if let path {
                try await writeAttachments(of: &export, beside: path, client: client)
            } else {
                let count = export.notes.reduce(0) { $0 + ($1.attachments?.count ?? 0) }
                if count > 0 { Console.warn("\(plural(count, "attachment")) listed but not written: export to a file (`notes export PATH`) to write them.") }
            }
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

    /// Saves every attachment of the exported notes under `PATH.attachments/CLIENTID-ORIGIN/NAME` and names the file in
    /// the export, relative to PATH's directory.
    private func writeAttachments(of export: inout NotesExport, beside path: String, client: NotesClient) async throws {
        let exportURL = URL(fileURLWithPath: (path as NSString).expandingTildeInPath)
        let folder = exportURL.lastPathComponent + ".attachments"
        let byIdentity = Dictionary(try client.notes().map { (NoteKey($0.clientID, $0.origin), $0) }, uniquingKeysWith: { a, _ in a })
        for index in export.notes.indices {
            let exported = export.notes[index]
            guard let attachments = exported.attachments, let note = byIdentity[NoteKey(exported.clientID, exported.origin)] else { continue }
            let relative = folder + "/\(exported.clientID.base32)-\(exported.origin.base32)"
            let directory = exportURL.deletingLastPathComponent().appendingPathComponent(relative, isDirectory: true)
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw CommandFailure(message: "cannot create the directory \(directory.path)")
            }
            for (position, attachment) in attachments.enumerated() {
                _ = try await client.saveAttachment(attachment.name, of: note.id, to: directory.appendingPathComponent(attachment.name))
                export.notes[index].attachments?[position].file = relative + "/" + attachment.name
            }
        }
    }

    private struct NoteKey: Hashable {
        var clientID: FlakeID
        var origin: FlakeID
        init(_ clientID: FlakeID, _ origin: FlakeID) {
            self.clientID = clientID
            self.origin = origin
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
