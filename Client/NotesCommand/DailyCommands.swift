import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve a conflict: keep the note, the copy or both, or merge them in the editor.",
        discussion: """
            COPY is a conflict copy's ID (see `notes conflicts`). --keep note keeps the note as it is; --keep copy \\
            gives the note the copy's text; --keep both makes the copy an ordinary note; --merge opens $VISUAL or \\
            $EDITOR on the note with each differing stretch between conflict markers, and the saved text becomes \\
            the note's. In every case the copy is deleted, on every device once synced.
            """)

    enum Keep: String, ExpressibleByArgument, CaseIterable {
        case note, copy, both
    }

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The conflict copy's ID (any unique prefix).") var id: String
    @Option(name: .long, help: "What to keep: note, copy or both.") var keep: Keep?
    @Flag(name: .long, help: "Merge the two texts in the editor.") var merge = false

    func validate() throws {
        if (keep == nil) == !merge { throw ValidationError("Say what to keep with --keep note|copy|both, or --merge.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let copy = try client.note(byPrefix: id)
        let copyID = try client.displayID(of: copy)
        guard copy.isConflict && !copy.isDeleted else {
            throw CommandFailure(message: "\(copyID) is not a conflict copy (see `notes conflicts`)")
        }
        let result: LocalNote?
        switch keep {
        case .note: result = try client.resolveConflict(copy: copy.id, .keepNote)
        case .copy: result = try client.resolveConflict(copy: copy.id, .keepCopy)
        case .both: result = try client.resolveConflict(copy: copy.id, .keepBoth)
        case nil:
            guard let original = try client.original(ofConflictCopy: copy), !original.isDeleted else {
                throw CommandFailure(message: "the note \(copyID) was split from is not on this device; use --keep both")
            }
            let originalID = try client.displayID(of: original)
            let whose = copy.isConflictFromThisDevice ? "this device's text" : "another device's text"
            let draft = LineDiff.mergeDraft(
                original.text, copy.text, oldLabel: "\(originalID) (the note)", newLabel: "\(copyID) (the copy: \(whose))")
            try Terminal.requireEditor()
            result = try Editor.edit(draft) { text in
                if LineDiff.hasConflictMarkers(text) {
                    throw CommandFailure(message: "the merged text still has conflict markers (<<<<<<<, =======, >>>>>>>); nothing changed")
                }
                return try client.resolveConflict(copy: copy.id, .merged(text))
            }
        }
        if options.json {
            try Console.json(result.map { NoteOutput($0, id: (try? client.displayID(of: $0)) ?? $0.clientID.base32) })
            return
        }
        let kept = try result.map { note throws(NotesError) in try client.displayID(of: note) }
        switch keep {
        case .note: Console.out("Kept the note" + (kept.map { " \($0)" } ?? "") + "; deleted the copy \(copyID).")
        case .copy: Console.out("\(kept ?? "The note") now has the copy's text; deleted the copy \(copyID).")
        case .both: Console.out("The copy's text is now the note \(kept ?? "?"); deleted the copy \(copyID).")
        case nil: Console.out("Merged into \(kept ?? "the note"); deleted the copy \(copyID).")
        }
    }
}

struct Trash: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List deleted notes that can be restored.",
        discussion: """
            The trash keeps the text of every note deleted on this device or another for 30 days (on this device \\
            only; the server keeps only the delete). `notes restore ID` brings one back on every device.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let trashed = try client.trash()
        if options.json {
            var outputs: [NoteOutput] = []
            for item in trashed {
                var output = NoteOutput(item.note, id: try client.displayID(of: item.note))
                output.text = item.text
                outputs.append(output)
            }
            try Console.json(outputs)
            return
        }
        if trashed.isEmpty {
            Console.out("The trash is empty.")
            return
        }
        var ids: [Int64: String] = [:]
        for item in trashed { ids[item.note.id] = try client.displayID(of: item.note) }
        let width = ids.values.reduce(0) { max($0, $1.count) }
        let now = nowMilliseconds
        let lines = trashed.map { item in
            let id = ids[item.note.id]!
            return id + String(repeating: " ", count: width - id.count + 2) + "deleted \(LocalTime.relative(item.deletedAt, now: now))  "
                + NoteSummary.title(of: item.text)
        }
        Pager.show(Array(lines.joined(separator: "\n").utf8))
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a deleted note back from the trash.",
        discussion: "The note comes back with the text it had when deleted, and on every device at the next sync.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The deleted note's ID (see `notes trash`).") var id: String

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let restored = try client.restore(note.id)
        let shortID = try client.displayID(of: restored)
        if options.json { try Console.json(NoteOutput(restored, id: shortID)) } else { Console.out("Restored \(shortID)") }
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every note to JSON or Markdown files.",
        discussion: """
            Every live note on this device, unsynced ones and conflict copies included. JSON (the default) keeps \\
            each note's identity (client ID and origin), so `notes import` on a fresh device of the same account \\
            makes no duplicate; it goes to PATH, or to standard output without one. Markdown writes one .md file \\
            per note into the directory PATH (created if needed; files of the same name are replaced).
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
                let text = note.text.hasSuffix("\n") ? note.text : note.text + "\n"
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

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add notes from a JSON export, or from Markdown and text files (one note each).",
        discussion: """
            Each PATH is a JSON export (from `notes export`), a file whose whole text becomes one note, or a \\
            directory whose .md, .markdown and .txt files are read. Everything is added in one transaction: all \\
            or nothing. No duplicates: an exported note this device already has (same client ID and origin) is \\
            skipped, and so is a file whose text (trailing newlines aside) a live note already holds, so importing \\
            the same files twice adds nothing. Text must be UTF-8 (the first bad byte's offset is reported).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "JSON exports, Markdown or text files, or directories of them.") var paths: [String]

    func validate() throws {
        if paths.isEmpty { throw ValidationError("Give at least one file or directory to import.") }
    }

    func run() async throws {
        let client = try options.openClient()
        var files: [String] = []
        for path in paths { files += try Self.files(at: (path as NSString).expandingTildeInPath) }
        let progress = ImportProgress(total: files.count)
        var items: [ImportItem] = []
        for (index, file) in files.enumerated() {
            items.append(try Self.read(file))
            progress.show("Reading files", index + 1, files.count)
        }
        let report = try client.importNotes(items) { done, total in progress.show("Importing notes", done, total) }
        progress.finish()
        if options.json {
            try Console.json(report)
            return
        }
        var skipped: [String] = []
        if report.alreadyHere > 0 { skipped.append("\(report.alreadyHere) already on this device") }
        if report.sameText > 0 { skipped.append("\(report.sameText) with the same text as a note here") }
        if report.empty > 0 { skipped.append("\(report.empty) empty") }
        Console.out("Imported \(plural(report.added, "note"))" + (skipped.isEmpty ? "." : "; skipped \(skipped.joined(separator: ", ")).") )
    }

    /// The files a path names: itself, or a directory's Markdown and text files (recursively, sorted).
    static func files(at path: String) throws -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CommandFailure(message: "\(path) does not exist")
        }
        guard isDirectory.boolValue else { return [path] }
        guard let enumerator = FileManager.default.enumerator(atPath: path) else {
            throw CommandFailure(message: "cannot read the directory \(path)")
        }
        var files: [String] = []
        while let name = enumerator.nextObject() as? String {
            let lowered = name.lowercased()
            if lowered.hasSuffix(".md") || lowered.hasSuffix(".markdown") || lowered.hasSuffix(".txt") {
                files.append((path as NSString).appendingPathComponent(name))
            }
        }
        return files.sorted()
    }

    /// One file: a JSON export when it is one, else one note's text.
    static func read(_ path: String) throws -> ImportItem {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure(message: "cannot read \(path)")
        }
        let text = try TextInput.decode(Array(data), source: "The file \(path)")
        if path.lowercased().hasSuffix(".json") || text.drop { $0.isWhitespace }.hasPrefix("{\"format\"") {
            do {
                let export = try JSONDecoder().decode(NotesExport.self, from: data)
                guard export.format == NotesExport.formatName else { throw CocoaError(.coderReadCorrupt) }
                return .export(export)
            } catch {
                if path.lowercased().hasSuffix(".json") {
                    throw CommandFailure(message: "\(path) is not a FlakeNotes export (notes export writes one); nothing was imported")
                }
            }
        }
        return .text(text, source: path)
    }
}

/// `Reading files 120/5000` on stderr when it is a terminal, redrawn at most every 100 ms.
final class ImportProgress {
    private let enabled = Console.stderrIsTerminal
    private var lastDraw = ContinuousClock.now - .seconds(1)
    private var shown = false

    init(total: Int) {}

    func show(_ what: String, _ done: Int, _ total: Int) {
        guard enabled else { return }
        let now = ContinuousClock.now
        guard now - lastDraw >= .milliseconds(100) || done == total else { return }
        lastDraw = now
        shown = true
        Console.writeError("\r\u{1B}[K\(what): \(done)/\(total)")
    }

    func finish() {
        if shown { Console.writeError("\r\u{1B}[K") }
    }
}
