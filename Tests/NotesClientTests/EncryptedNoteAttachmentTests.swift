import Foundation
import GRDB
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NoteSyncServer
import SyncHarness
import Testing
import TestSupport

@testable import NotesClient

/// Issue 33: an encrypted account's notes take attachments as a plaintext account's do (attach, sync, save, detach,
/// history), but the manifests, with their files' keys, travel inside the note's envelope (`NotePayload`): a change
/// carries only `chunkRefs`, the sealed chunks' addresses, and the device merges a stale change's attachments itself
/// (`DeviceMerge`, `AttachmentMerge`). Over the in-process server on a data directory, whose every file is scanned,
/// with every request the devices send recorded.
@Suite struct EncryptedNoteAttachmentTests {
    /// A name that holds the canary word: the server must never see it either.
    static let canaryName = "qzcanaryxv-attached-file.txt"

    struct Alice {
        var server: InProcessServer
        var serverDirectory: URL
        var phone: NotesClient
        var phoneWire: FaultInjectingTransport
        var laptop: NotesClient
        var laptopWire: FaultInjectingTransport
    }

    /// Alice's encrypted account on a server of its own (in `directory/server`): `phone` signed up, `laptop` signed
    /// in, each with a data directory (its chunk cache) and its requests recorded.
    static func alice(_ directory: URL) async throws -> Alice {
        let serverDirectory = directory.appendingPathComponent("server", isDirectory: true)
        let server = try InProcessServer(
            store: try SQLiteNoteStore(dataDirectory: serverDirectory.path), instance: 1000, tokenSeed: 7, logger: quietLogger)
        let phoneWire = FaultInjectingTransport(server.transport)
        let laptopWire = FaultInjectingTransport(server.transport)
        let phone = try EncryptionSyncTests.device(server, seed: 1, home: directory.appendingPathComponent("phone"), transport: phoneWire)
        let laptop = try EncryptionSyncTests.device(server, seed: 2, home: directory.appendingPathComponent("laptop"), transport: laptopWire)
        let password = EncryptionSyncTests.password
        _ = try await phone.signUp(server: TestServer.url, username: "alice", password: password, encrypted: true, unowned: .carry).sync.get()
        _ = try await laptop.signIn(server: TestServer.url, username: "alice", password: password, unowned: .carry).sync.get()
        return Alice(server: server, serverDirectory: serverDirectory, phone: phone, phoneWire: phoneWire, laptop: laptop, laptopWire: laptopWire)
    }

    /// The changes of the push requests `wire` recorded.
    static func pushedChanges(_ wire: FaultInjectingTransport) throws -> [NoteChange] {
        try wire.requests.filter { $0.path == Endpoint.push.path }.flatMap { request in
            try JSONDecoder().decode(PushRequest.self, from: try #require(request.body)).changes
        }
    }

    /// Whether any request `wire` recorded carries `word` in its body.
    static func sent(_ word: [UInt8], over wire: FaultInjectingTransport) -> Bool {
        wire.requests.contains { request in
            guard let body = request.body.map([UInt8].init), body.count >= word.count else { return false }
            return (0...(body.count - word.count)).contains { body[$0] == word[0] && body[$0..<$0 + word.count].elementsEqual(word) }
        }
    }

    @Test func anAttachedFileSyncsSealedToTheOtherDeviceAndNoManifestReachesTheServer() async throws {
        try await withTemporaryDirectory("sealed-note-attachments") { directory in
            let alice = try await Self.alice(directory)
            let data = EncryptedAttachmentTests.canaryFile()
            let source = try AttachmentTests.file(directory, Self.canaryName, data)
            let note = try alice.phone.add("trip")
            let attached = try alice.phone.attach([source], to: note.id)
            let manifest = try #require(attached.attachments.first)
            #expect(manifest.name == Self.canaryName && manifest.key != nil, "sealed: the manifest carries the file's key")
            #expect(try EncryptedAttachmentTests.canaryHits(under: directory.appendingPathComponent("phone/chunks")).hits == 0)

            let pushed = try await alice.phone.syncOK()
            #expect(pushed.chunksUploaded == 3 && pushed.failures.isEmpty && pushed.pending == 0)
            // The change names the sealed chunks only; the manifest (name, sizes, key) is inside the envelope.
            let changes = try Self.pushedChanges(alice.phoneWire).filter { $0.clientID == attached.clientID }
            #expect(!changes.isEmpty)
            for change in changes {
                #expect(change.attachments == nil && change.baseAttachments == nil)
                #expect(change.chunkRefs == manifest.chunks.sorted())
            }
            #expect(!Self.sent(EncryptedAttachmentTests.canary, over: alice.phoneWire), "neither the name nor the content went out")
            #expect(!Self.sent(Array(manifest.key!.utf8), over: alice.phoneWire), "nor the file's key")
            // The server's files (database, WAL, chunk files) hold neither the name nor the content.
            let (hits, files) = try EncryptedAttachmentTests.canaryHits(under: alice.serverDirectory)
            #expect(hits == 0 && files >= 4, "\(files) files of the server read")
            // It keeps the chunks' addresses for its collector, and no manifest.
            let database = try DatabaseQueue(path: alice.serverDirectory.appendingPathComponent(SQLiteNoteStore.fileName).path)
            let rows = try await database.read { db in try Row.fetchAll(db, sql: "SELECT attachments, chunk_refs FROM notes") }
            let row = try #require(rows.first)
            #expect(rows.count == 1 && ["", "[]"].contains(row[0] as String))
            #expect(manifest.chunks.allSatisfy { (row[1] as String).contains($0.hex) }, "\(row[1] as String)")

            // The laptop opens the manifest from the envelope; nothing is downloaded until it saves the file.
            _ = try await alice.laptop.syncOK()
            let there = try #require(try alice.laptop.notes().first)
            #expect(there.attachments == [manifest] && there.baseAttachments == [manifest])
            #expect(try alice.laptop.attachments(of: there.id).map(\.isOnDevice) == [false])
            let saved = directory.appendingPathComponent("saved")
            let transfer = try await alice.laptop.saveAttachment(Self.canaryName, of: there.id, to: saved)
            #expect(transfer.chunksTransferred == 3)
            #expect(try Data(contentsOf: saved) == data)
            // Its history version opens with the attachments it had.
            let history = try await alice.laptop.history(there.id)
            #expect(history.versions.last?.attachments == [manifest])

            // A detach travels the same way: chunkRefs [] and no manifest.
            _ = try alice.laptop.detach(Self.canaryName, from: there.id)
            _ = try await alice.laptop.syncOK()
            #expect(try Self.pushedChanges(alice.laptopWire).last?.chunkRefs == [])
            _ = try await alice.phone.syncOK()
            #expect(try alice.phone.note(note.id).attachments.isEmpty)
        }
    }

    @Test func aSealedChangeWhoseChunkNoSideHasIsRefusedKeptAndRetriedAtEverySync() async throws {
        try await withTemporaryDirectory("sealed-note-attachments-absent") { directory in
            let alice = try await Self.alice(directory)
            let (scan, _) = try NoteAttachmentTests.file(directory, "scan.pdf", size: 2 * NoteAttachmentTests.mib + 1, seed: 5)
            let note = try alice.phone.add("taxes")
            let attached = try alice.phone.attach([scan], to: note.id)
            let lost = attached.attachments[0].chunks[1]
            let cache = ChunkCache(root: directory.appendingPathComponent("phone/chunks"))
            let moved = directory.appendingPathComponent("lost-chunk")
            try FileManager.default.moveItem(at: cache.url(lost), to: moved)
            let pushesBefore = alice.phoneWire.requests.filter { $0.path == Endpoint.push.path }.count

            let report = try await alice.phone.sync()
            #expect(report.failures.map(\.error.code) == ["unknown_chunk"])
            #expect(report.failures.first?.error.message.contains("scan.pdf") == true)
            #expect(report.chunksUploaded == 2, "what the cache holds is sent")
            #expect(alice.phoneWire.requests.filter { $0.path == Endpoint.push.path }.count == pushesBefore, "refused before the push")
            let refused = try alice.phone.note(note.id)
            #expect(refused.isDirty && refused.pushError?.code == "unknown_chunk" && refused.attachments == attached.attachments)

            // Back in the cache, the next sync sends it and the note, without an edit; the laptop then saves the file.
            try FileManager.default.moveItem(at: moved, to: cache.url(lost))
            let retried = try await alice.phone.syncOK()
            #expect(retried.chunksUploaded == 1 && retried.failures.isEmpty && retried.refused.isEmpty)
            #expect(try !alice.phone.note(note.id).isDirty)
            _ = try await alice.laptop.syncOK()
            let there = try #require(try alice.laptop.notes().first)
            let saved = directory.appendingPathComponent("saved.pdf")
            _ = try await alice.laptop.saveAttachment("scan.pdf", of: there.id, to: saved)
            #expect(try Data(contentsOf: saved) == Data(contentsOf: scan))
        }
    }
}
