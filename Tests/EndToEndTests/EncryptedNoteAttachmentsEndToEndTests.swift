import Foundation
import Testing
import TestSupport

/// Attachments on an end-to-end encrypted account's notes with the real binaries (issue 33): `notes attach`, `sync`,
/// `attachments`, `save` and `detach` across two devices, and not one of the daemon's files (database, WAL, chunk
/// files) holding the attached file's name or content.
@Suite("encrypted note attachments end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct EncryptedNoteAttachmentsEndToEndTests {
    struct Added: Decodable { var id: String }
    struct Listed: Decodable {
        var name: String
        var onDevice: Bool
    }

    /// How many times `word` occurs in the files under `directory`, read recursively.
    static func occurrences(of word: String, under directory: URL) throws -> Int {
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory.path).map { directory.appendingPathComponent($0) }
        return try EndToEndTests.occurrences(
            of: word, in: files.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true })
    }

    /// Alice's encrypted account on a daemon of its own, signed up on `a` and signed in on `b` (`account`: the
    /// options that name it, the password on standard input), with a scratch directory for files; all removed after.
    static func withAlice(
        _ label: String, _ body: (_ server: NotesE2EServer, _ a: NotesDevice, _ b: NotesDevice, _ scratch: URL, _ account: [String]) async throws -> Void
    ) async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("\(label)-a")
        let b = try NotesDevice("\(label)-b")
        let scratch = try NotesE2E.temporaryDirectory("\(label)-files")
        defer {
            a.remove()
            b.remove()
            try? FileManager.default.removeItem(at: scratch)
        }
        let account = ["--server", server.url, "--username", "alice", "--password-stdin"]
        _ = ok(try await a.run(["signup"] + account, stdin: NotesE2E.password + "\n"))
        _ = ok(try await b.run(["login"] + account, stdin: NotesE2E.password + "\n"))
        try await body(server, a, b, scratch, account)
    }

    @Test func anEncryptedAccountsAttachmentTravelsBetweenDevicesAndTheDaemonHoldsNoCanary() async throws {
        try await Self.withAlice("enc-att") { server, a, b, scratch, _ in
            let name = "canaryname-diary.txt"
            var content = Data(NoteAttachmentsEndToEndTests.bytes(2 * NoteAttachmentsEndToEndTests.mib + 77, seed: 35))
            for offset in [10, NoteAttachmentsEndToEndTests.mib + 10, 2 * NoteAttachmentsEndToEndTests.mib + 10] {
                content.replaceSubrange(offset..<offset + 13, with: Data("canarycontent".utf8))
            }
            let file = scratch.appendingPathComponent(name)
            try content.write(to: file)

            let id = try ok(try await a.run(["add", "--json", "diary"])).json(Added.self).id
            _ = ok(try await a.run(["attach", id, file.path]))
            _ = ok(try await a.run(["sync"]))
            _ = ok(try await b.run(["sync"]))
            let listed = try ok(try await b.run(["attachments", id, "--json"])).json([Listed].self)
            #expect(listed.map(\.name) == [name] && listed.map(\.onDevice) == [false])
            let saved = scratch.appendingPathComponent("saved.txt")
            _ = ok(try await b.run(["save", id, name, saved.path]))
            #expect(try Data(contentsOf: saved) == content)

            _ = ok(try await b.run(["detach", id, name]))
            _ = ok(try await b.run(["sync"]))
            _ = ok(try await a.run(["sync"]))
            #expect(try ok(try await a.run(["attachments", id, "--json"])).json([Listed].self).isEmpty)
            #expect(try Self.occurrences(of: "canary", under: server.directory) == 0)
        }
    }

    /// A note written signed out, its files in the clear in the chunk cache, copied (`notes copy`) and carried
    /// (`notes login --carry`) into an encrypted account: both seal the files for it, so the daemon's files hold none
    /// of their content, and another device saves the same bytes; a file the cache does not hold whole is left out,
    /// and both commands say so.
    @Test func aCopyOrACarryIntoAnEncryptedAccountSealsTheAttachmentsAndSaysWhatItLeavesOut() async throws {
        try await Self.withAlice("enc-copy") { server, a, b, scratch, account in
            _ = ok(try await a.run(["logout"]))
            var content = Data(NoteAttachmentsEndToEndTests.bytes(NoteAttachmentsEndToEndTests.mib + 77, seed: 36))
            for offset in [10, NoteAttachmentsEndToEndTests.mib + 10] {
                content.replaceSubrange(offset..<offset + 13, with: Data("canarycontent".utf8))
            }
            let diary = scratch.appendingPathComponent("diary.txt")
            try content.write(to: diary)
            let gone = scratch.appendingPathComponent("gone.bin")
            try Data(NoteAttachmentsEndToEndTests.bytes(1000, seed: 37)).write(to: gone)

            // Signed out: gone.bin's chunk leaves the cache, diary.txt's stays.
            let id = try ok(try await a.run(["add", "--json", "written signed out"])).json(Added.self).id
            _ = ok(try await a.run(["attach", id, gone.path]))
            try FileManager.default.removeItem(at: a.home.appendingPathComponent("chunks"))
            _ = ok(try await a.run(["attach", id, diary.path]))

            let copied = ok(try await a.run(["copy", id, "--to", "alice"]))
            #expect(copied.stdout.contains("into alice's account"), "\(copied)")
            let warning = copied.stderr.split(separator: "\n")
            #expect(warning.count == 1 && warning[0].hasPrefix("Left out of the copy: gone.bin, not whole on this device"), "\(copied)")
            let carried = ok(try await a.run(["login", "--carry"] + account, stdin: NotesE2E.password + "\n"))
            #expect(carried.stdout.contains("1 attachment left out of the notes added"), "\(carried)")

            _ = ok(try await b.run(["sync"]))
            let notes = try ok(try await b.run(["list", "--json"])).json([NotesE2EListedNote].self)
            #expect(notes.count == 2, "the copy and the note carried")
            for note in notes {
                let listed = try ok(try await b.run(["attachments", note.id, "--json"])).json([Listed].self)
                #expect(listed.map(\.name) == ["diary.txt"], "\(note.text)")
                let saved = scratch.appendingPathComponent("saved-\(note.id)")
                _ = ok(try await b.run(["save", note.id, "diary.txt", saved.path]))
                #expect(try Data(contentsOf: saved) == content)
            }
            #expect(try Self.occurrences(of: "canarycontent", under: server.directory) == 0)
        }
    }
}
