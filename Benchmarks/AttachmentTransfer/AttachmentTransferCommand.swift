// A thin command over NotesClient's attachment API (issue 33, phase 1), for Benchmarks/attachments/bench.py: the
// client side of an upload or a download as a process of its own, so that its time and peak memory are its own.
// Phase 2's `notes attach` / `notes save` replace it.
//
//   AttachmentTransfer signup   HOME SERVER USER PASSWORD
//   AttachmentTransfer upload   HOME FILE MANIFEST     (prints "chunk N" after each chunk sent, then a JSON summary)
//   AttachmentTransfer download HOME MANIFEST FILE
import Foundation
import NoteSyncProtocol
import NotesClient

@main
struct AttachmentTransferCommand {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            try await run(arguments)
        } catch {
            FileHandle.standardError.write(Data("AttachmentTransfer: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(_ arguments: [String]) async throws {
        guard arguments.count >= 4 else {
            throw UsageError("usage: AttachmentTransfer signup HOME SERVER USER PASSWORD | upload HOME FILE MANIFEST | download HOME MANIFEST FILE")
        }
        let client = try NotesClient.open(home: URL(fileURLWithPath: arguments[1]))
        let started = ContinuousClock.now
        switch arguments[0] {
        case "signup":
            guard arguments.count == 5 else { throw UsageError("signup HOME SERVER USER PASSWORD") }
            _ = try await client.signUp(server: arguments[2], username: arguments[3], password: arguments[4]).sync.get()
        case "upload":
            let transfer = try await client.uploadAttachment(file: URL(fileURLWithPath: arguments[2])) { progress in
                // Unbuffered: the benchmark kills this process on a line, and must have seen every line before it.
                line("chunk \(progress.chunksTransferred)")
            }
            try transfer.manifest.encodedJSON().write(to: URL(fileURLWithPath: arguments[3]))
            summary(transfer, since: started)
        case "download":
            let manifest = try AttachmentManifest.decode(try Data(contentsOf: URL(fileURLWithPath: arguments[2])))
            let transfer = try await client.downloadAttachment(manifest, to: URL(fileURLWithPath: arguments[3]))
            summary(transfer, since: started)
        default:
            throw UsageError("unknown command \(arguments[0])")
        }
    }

    static func summary(_ transfer: AttachmentTransfer, since started: ContinuousClock.Instant) {
        let seconds = Double((ContinuousClock.now - started).components.attoseconds) / 1e18 + Double((ContinuousClock.now - started).components.seconds)
        line(#"{"transferred":\#(transfer.chunksTransferred),"skipped":\#(transfer.chunksSkipped),"bytes":\#(transfer.bytesTransferred),"seconds":\#(seconds)}"#)
    }
}

/// Writes `text` and a newline to standard output at once.
func line(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
