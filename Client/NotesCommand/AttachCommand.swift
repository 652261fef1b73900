import ArgumentParser
import Foundation
import NoteSyncProtocol
import NotesClient

struct Attach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Attach files to a note.",
        discussion: """
            Each FILE is attached under its file name (a note holds one attachment per name: `notes detach` one \
            first to replace it). The files are read into this device's chunk cache now, in chunks of 1 MiB; the \
            next `notes sync` sends the chunks the server lacks (a chunk the account has already, from the same \
            file on another note, is never sent again) and then the note. Works offline. On an end-to-end \
            encrypted account each file is read twice (hashed for its key, then encrypted chunk by chunk): the \
            cache and the server hold only encrypted chunks, and the file's name travels inside the encrypted note.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (any unique prefix).") var id: String
    @Argument(help: ArgumentHelp("The files to attach.", valueName: "file")) var files: [String] = []

    func validate() throws {
        if files.isEmpty { throw ValidationError("Give at least one file to attach.") }
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let urls = files.map { URL(fileURLWithPath: ($0 as NSString).expandingTildeInPath) }
        let attached = try client.attach(urls, to: note.id)
        let shortID = try client.displayID(of: attached)
        if options.json {
            try Console.json(NoteOutput(attached, id: shortID))
            return
        }
        let names = Set(urls.map(\.lastPathComponent))
        for manifest in attached.attachments where names.contains(manifest.name) {
            Console.out("Attached \(manifest.name) (\(byteCount(manifest.size)), \(manifest.mediaType)) to \(shortID)")
        }
    }
}

/// A size for people: `1.2 MB`.
func byteCount(_ bytes: Int64) -> String {
    ByteCountFormatter.string(fromByteCount: bytes, countStyle: .file)
}
