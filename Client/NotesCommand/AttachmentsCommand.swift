import ArgumentParser
import Foundation
import NoteSyncProtocol
import NotesClient

struct Attachments: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a note's attachments.",
        discussion: """
            Each attachment's name, size and media type, and whether it is on this device (every chunk in the \
            chunk cache, so `notes save` needs no server) or only on the server (`notes save` downloads it).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let attachments = try client.attachments(of: note.id)
        if options.json {
            try Console.json(attachments.map(AttachmentOutput.init))
            return
        }
        if attachments.isEmpty {
            Console.out("No attachments. Attach files with `notes attach \(try client.displayID(of: note)) FILE...`.")
            return
        }
        Console.out(attachmentLines(attachments).joined(separator: "\n"))
    }
}

/// One line per attachment: name, size, media type, and where it is.
func attachmentLines(_ attachments: [NoteAttachment]) -> [String] {
    let width = attachments.reduce(0) { max($0, $1.name.count) }
    return attachments.map { attachment in
        let padding = String(repeating: " ", count: width - attachment.name.count + 2)
        let place = attachment.isOnDevice ? "on this device" : "on the server"
        return "\(attachment.name)\(padding)\(byteCount(attachment.size))  \(attachment.mediaType)  \(place)"
    }
}

/// An attachment as `--json` prints it.
struct AttachmentOutput: Encodable {
    var name: String
    /// Bytes.
    var size: Int64
    var mediaType: String
    /// The whole file's SHA-256 (hex).
    var sha256: String
    var chunks: Int
    /// Every chunk is in this device's cache (`notes save` needs no server).
    var onDevice: Bool

    init(_ attachment: NoteAttachment) {
        name = attachment.name
        size = attachment.size
        mediaType = attachment.mediaType
        sha256 = attachment.manifest.sha256.hex
        chunks = attachment.manifest.chunks.count
        onDevice = attachment.isOnDevice
    }
}
