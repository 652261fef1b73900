import ArgumentParser
import MiniFlake
import NotesClient

/// `notes copy ID --to USER`: the only way a note reaches another account.
struct Copy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a note into another account signed in to on this device.",
        discussion: """
            The copy is a new note (its own ID) with the same text, in USER's account: it is sent when USER signs \
            in here next (or at the next sync when USER is signed in). The original stays where it is. USER must \
            have signed in on this device before. Into an end-to-end encrypted account, the attachments are encrypted \
            for it from this device's copies of their files; one this device does not hold whole is left out (and \
            named).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's ID (a prefix is enough).") var id: String
    @Option(name: .long, help: ArgumentHelp("The account to copy it into.", valueName: "user")) var to: String

    struct Output: Encodable {
        var id: String
        var copyOf: String
        var account: String
        /// The names of the attachments the copy does not have (see ``NoteCopy/attachmentsLeftOut``).
        var attachmentsLeftOut: [String]
    }

    func run() async throws {
        let client = try options.openClient()
        let note = try client.note(byPrefix: id)
        let copy = try client.copy(note.id, to: to)
        let shownID = try client.displayID(of: note)
        let copyID = copy.note.clientID.base32
        if options.json {
            try Console.json(Output(id: copyID, copyOf: shownID, account: to, attachmentsLeftOut: copy.attachmentsLeftOut))
            return
        }
        Console.out("Copied \(shownID) into \(to)'s account as \(copyID); it is sent at \(to)'s next sync on this device.")
        if !copy.attachmentsLeftOut.isEmpty {
            Console.warn(
                "Left out of the copy: \(copy.attachmentsLeftOut.joined(separator: ", ")), not whole on this device to encrypt for \(to) "
                    + "(`notes save` fetches a file from the original; then `notes attach` it to the copy).")
        }
    }
}
