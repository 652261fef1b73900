import ArgumentParser
import Foundation
import NoteSyncProtocol
import NotesClient

struct Save: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save a note's attachment to a file.",
        discussion: """
            Writes the attachment NAME to PATH (a directory: the attachment's name in it; none: the name in the \
            current directory; -: standard output). Only the chunks this device lacks are downloaded, each checked \
            against its hash, and the whole file against its checksum; PATH is replaced only once the whole file \
            checked out. Interrupted, it resumes: the chunks already downloaded are not fetched again. Works offline \
            when the attachment is on this device (`notes attachments ID`).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Argument(help: "The attachment's name (`notes attachments ID` lists them).") var name: String
    @Argument(help: ArgumentHelp("Where to write it; - for standard output.", valueName: "path")) var path: String?

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let transfer: AttachmentTransfer
        var written = path ?? name
        if path == "-" {
            Console.flush()
            transfer = try await client.saveAttachment(name, of: note.id, to: FileHandle.standardOutput)
        } else {
            var destination = URL(fileURLWithPath: (written as NSString).expandingTildeInPath)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory), isDirectory.boolValue {
                destination.appendPathComponent(name)
                written = destination.path
            }
            transfer = try await client.saveAttachment(name, of: note.id, to: destination)
        }
        if options.json {
            try Console.json(SaveOutput(transfer, path: path == "-" ? nil : written))
        } else if path != "-" {
            let fetched = transfer.chunksTransferred == 0 ? "" : ", \(plural(transfer.chunksTransferred, "chunk")) downloaded"
            Console.warn("Saved \(name) (\(byteCount(transfer.manifest.size))\(fetched)) to \(written).")
        }
    }
}

/// What `notes save --json` prints.
struct SaveOutput: Encodable {
    var name: String
    var size: Int64
    /// Nil for standard output.
    var path: String?
    /// Chunks downloaded by this command, and those this device had.
    var chunksDownloaded: Int
    var chunksOnDevice: Int

    init(_ transfer: AttachmentTransfer, path: String?) {
        name = transfer.manifest.name
        size = transfer.manifest.size
        self.path = path
        chunksDownloaded = transfer.chunksTransferred
        chunksOnDevice = transfer.chunksSkipped
    }
}
