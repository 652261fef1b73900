import ArgumentParser
import Foundation
import NotesClient

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add notes from a JSON export, or from Markdown and text files (one note each).",
        discussion: """
            Each PATH is a JSON export (from `notes export`), a file whose whole text becomes one note, or a \\
            directory whose .md, .markdown and .txt files are read; a Markdown file's front matter (as `notes \\
            export --format markdown` writes it) gives the note its tags and flags. Everything is added in one transaction: all \\
            or nothing. No duplicates: an exported note this device already has (same client ID and origin) is \\
            skipped, and so is a file whose text (trailing newlines aside) a live note already holds, so importing \\
            the same files twice adds nothing. Text must be UTF-8 (the first bad byte's offset is reported). An \
            export's attachments are read from the files it names (relative to the export's directory, as `notes \
            export PATH` writes them), each checked against its checksum.
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
                var export = try JSONDecoder().decode(NotesExport.self, from: data)
                guard export.format == NotesExport.formatName else { throw CocoaError(.coderReadCorrupt) }
                // Attachment files are named relative to the export's directory.
                let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
                for note in export.notes.indices {
                    for attachment in (export.notes[note].attachments ?? []).indices {
                        if let file = export.notes[note].attachments?[attachment].file, !file.hasPrefix("/") {
                            export.notes[note].attachments?[attachment].file = directory.appendingPathComponent(file).path
                        }
                    }
                }
                return .export(export)
            } catch {
                if path.lowercased().hasSuffix(".json") {
                    throw CommandFailure(message: "\(path) is not a FlakeNotes export (notes export writes one); nothing was imported")
                }
            }
        }
        let lowered = path.lowercased()
        return lowered.hasSuffix(".md") || lowered.hasSuffix(".markdown") ? .markdown(text, source: path) : .text(text, source: path)
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
