import ArgumentParser
import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the account, pending changes and last sync.")

    @OptionGroup var options: GlobalOptions

    struct Output: Encodable {
        var signedIn: Bool
        var username: String?
        var accountID: String?
        var server: String?
        var notes: Int
        var deletedNotes: Int
        /// Live notes kept on this device but hidden: other accounts' (and, signed in, those written signed out).
        var setAside: Int
        /// Notes the next sync sends (``overQuota`` included).
        var pending: Int
        /// Notes the server refused that wait for an edit (not sent again until then).
        var failed: Int
        /// Notes refused for the account's quota: every sync tries them again, without an edit.
        var overQuota: Int
        var conflicts: Int
        var lastSync: String?
        /// The last sync stopped with changes still waiting on the server.
        var syncUnfinished: Bool
        var home: String
        var origin: String
        /// The account's storage on its server (signed in and the server answered).
        var storage: Storage?
        /// Signed in: whether the account is end-to-end encrypted.
        var encrypted: Bool?
        /// Signed in and the server answered: its state (`plaintext`, `converting`, `encrypted`, `reset`).
        var encryption: String?
        /// While converting: the notes the server still holds in the clear.
        var plaintextNotes: Int64?

        struct Storage: Encodable {
            var notes: Int64
            var textBytes: Int64
            var replayTextBytes: Int64
            var maxNotes: Int64
            var maxTextBytes: Int64
        }
    }

    func run() async throws {
        let client = try options.openClient()
        let status = try client.status()
        let aside = try client.setAsideNoteCount()
        // The account's usage and limits, from its server (one try; status stays useful offline).
        var storage: Result<StorageReport?, NotesError>?
        if status.account != nil {
            do {
                storage = .success(try await client.storageUsage())
            } catch {
                storage = .failure(error)
            }
        }
        if options.json {
            try Console.json(
                Output(
                    signedIn: status.account != nil, username: status.account?.username,
                    accountID: status.account?.accountID.description, server: status.serverURL, notes: status.notes,
                    deletedNotes: status.deletedNotes, setAside: aside, pending: status.toSend, failed: status.refusedUntilEdited,
                    overQuota: status.overQuota,
                    conflicts: status.conflicts, lastSync: status.lastSyncAt.map { NotesTime.iso8601(unixMilliseconds: $0) },
                    syncUnfinished: status.pullUnfinished, home: options.homeURL.path, origin: status.origin.base32,
                    storage: (try? storage?.get())??.map {
                        Output.Storage(
                            notes: $0.notes, textBytes: $0.textBytes, replayTextBytes: $0.replayTextBytes, maxNotes: $0.maxNotes,
                            maxTextBytes: $0.maxTextBytes)
                    }, encrypted: status.account == nil ? nil : status.encrypted,
                    encryption: (try? storage?.get())??.encryption?.rawValue, plaintextNotes: (try? storage?.get())??.plaintextNotes))
            return
        }
        if let account = status.account {
            Console.out("Account:    \(account.username) on \(account.serverURL)")
            if case .success(let report?) = storage, report.encryption == .converting {
                Console.out(
                    "Encryption: converting (\(plural(Int(report.plaintextNotes ?? 0), "note")) still in the clear on the server; "
                        + "`notes encryption enable` or `notes sync` finishes it)")
            } else {
                Console.out(
                    status.encrypted
                        ? "Encryption: end-to-end encrypted (the server holds no readable note)"
                        : "Encryption: none (plaintext: the server's operator can read the notes)")
            }
        } else if let server = status.serverURL {
            Console.out("Account:    not signed in (last server: \(server)); sign in with `notes login`")
        } else {
            Console.out("Account:    not signed in; create an account with `notes signup` or sign in with `notes login`")
        }
        Console.out("Notes:      \(status.notes)" + (status.deletedNotes > 0 ? " (and \(status.deletedNotes) deleted)" : ""))
        if aside > 0 {
            Console.out("Set aside:  \(plural(aside, "note")) hidden on this device (other accounts', or written while signed out)")
        }
        var pending = status.toSend == 0 ? "nothing to send" : plural(status.toSend, "note") + " with changes to send"
        if status.overQuota > 0 {
            pending += " (\(status.overQuota) over the account's quota, tried again at every sync: free space or ask the server's operator for more)"
        }
        if status.pullUnfinished { pending += "; more changes waiting on the server" }
        Console.out("Pending:    " + pending)
        if status.refusedUntilEdited > 0 {
            Console.out(
                "Refused:    \(plural(status.refusedUntilEdited, "note")) the server refused, not synced (see `notes sync`); edit them to retry")
        }
        if status.conflicts > 0 {
            Console.out("Conflicts:  \(status.conflicts) (see `notes conflicts`)")
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let last = status.lastSyncAt.map { LocalTime.relative($0, now: now) }
        if status.pullUnfinished {
            Console.out("Last sync:  not finished (interrupted while receiving" + (last.map { "; last complete one \($0)" } ?? "") + "); run `notes sync` to finish")
        } else {
            Console.out("Last sync:  " + (last ?? "never"))
        }
        switch storage {
        case .success(let report?):
            let bytes = ByteCountFormatter.string(fromByteCount: report.textBytes, countStyle: .binary)
            let maxBytes = ByteCountFormatter.string(fromByteCount: report.maxTextBytes, countStyle: .binary)
            var line = "Server:     \(report.notes) of \(report.maxNotes) notes (deleted ones included), \(bytes) of \(maxBytes) of text"
            if report.replayTextBytes > 0 {
                // Kept to answer retried pushes exactly; counted in the same limit, freed as they expire.
                line += " (and " + ByteCountFormatter.string(fromByteCount: report.replayTextBytes, countStyle: .binary)
                    + " kept for replays)"
            }
            Console.out(line)
        case .failure(let error) where error.code == .signedOutByServer:
            Console.out("Server:     signed out by the server (session revoked or account deleted); your notes are kept")
        case .failure(let error):
            Console.out("Server:     usage unknown (\(error.message))")
        case .success(nil), nil:
            break
        }
        Console.out("Data:       \(options.homeURL.path)")
    }
}
