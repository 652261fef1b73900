import Crypto
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
    static func alice(_ directory: URL, limits: SyncLimits = SyncLimits()) async throws -> Alice {
        let serverDirectory = directory.appendingPathComponent("server", isDirectory: true)
        let server = try InProcessServer(
            store: try SQLiteNoteStore(dataDirectory: serverDirectory.path), instance: 1000, limits: limits, tokenSeed: 7,
            logger: quietLogger)
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

    @Test func concurrentAttachAndDetachMergeOnTheDevice() async throws {
        try await withTemporaryDirectory("sealed-note-attachments-merge") { directory in
            let alice = try await Self.alice(directory)
            func file(_ name: String, seed: UInt64) throws -> (URL, Data) {
                try NoteAttachmentTests.file(directory.appendingPathComponent(name, isDirectory: true), name, size: 1000 + Int(seed), seed: seed)
            }
            for name in ["a.txt", "b.txt", "c.txt", "same.txt"] {
                try FileManager.default.createDirectory(at: directory.appendingPathComponent(name, isDirectory: true), withIntermediateDirectories: true)
            }
            let (a, _) = try file("a.txt", seed: 1)
            let note = try alice.phone.add("plans")
            _ = try alice.phone.attach([a], to: note.id)
            _ = try await alice.phone.syncOK()
            _ = try await alice.laptop.syncOK()
            let onLaptop = try #require(try alice.laptop.notes().first)
            #expect(onLaptop.attachments.map(\.name) == ["a.txt"])

            // The phone attaches b and its same.txt; the laptop detaches a, attaches c and another same.txt.
            let (b, bData) = try file("b.txt", seed: 2)
            let (phoneSame, phoneSameData) = try file("same.txt", seed: 3)
            _ = try alice.phone.attach([b, phoneSame], to: note.id)
            let (c, cData) = try file("c.txt", seed: 4)
            let laptopSame = directory.appendingPathComponent("laptop-same.txt")
            let laptopSameData = AttachmentTests.bytes(2000, seed: 5)
            try laptopSameData.write(to: laptopSame)
            _ = try alice.laptop.detach("a.txt", from: onLaptop.id)
            _ = try alice.laptop.attach([c, laptopSame], to: onLaptop.id, names: ["c.txt", "same.txt"])

            _ = try await alice.phone.syncOK()
            let merged = try await alice.laptop.syncOK()
            #expect(merged.stale == 1 && merged.deviceMerged == 1 && merged.pending == 0)
            _ = try await alice.phone.syncOK()
            // Three-way by name: a's removal and both additions kept; one name, two files: both, the merging side's renamed.
            let expected = ["b.txt", "c.txt", "same (2).txt", "same.txt"]
            #expect(try alice.laptop.note(onLaptop.id).attachments.map(\.name) == expected)
            #expect(try alice.phone.note(note.id).attachments.map(\.name) == expected)
            #expect(try alice.phone.note(note.id).attachments == alice.laptop.note(onLaptop.id).attachments)
            for (device, id, name, data) in [
                (alice.phone, note.id, "c.txt", cData), (alice.phone, note.id, "same (2).txt", laptopSameData),
                (alice.laptop, onLaptop.id, "b.txt", bData), (alice.laptop, onLaptop.id, "same.txt", phoneSameData),
            ] {
                let saved = directory.appendingPathComponent("saved-\(UUID().uuidString)")
                _ = try await device.saveAttachment(name, of: id, to: saved)
                #expect(try Data(contentsOf: saved) == data, "\(name)")
            }
            #expect(try EncryptedAttachmentTests.canaryHits(under: alice.serverDirectory).hits == 0)
        }
    }

    /// A sealed change whose attachment's bytes are on neither side is sealed again without it and sent, as a plaintext
    /// change is (notes-sim seed 8: a note carried from a deleted account into an encrypted one was refused at every
    /// sync, its text held back with it); the other attachment reaches the laptop.
    @Test func aSealedChangeWhoseChunkNoSideHasIsSealedAgainWithoutThatAttachment() async throws {
        try await withTemporaryDirectory("sealed-note-attachments-absent") { directory in
            let alice = try await Self.alice(directory)
            let (scan, _) = try NoteAttachmentTests.file(directory, "scan.pdf", size: 2 * NoteAttachmentTests.mib + 1, seed: 5)
            let (kept, _) = try NoteAttachmentTests.file(directory, "kept.txt", size: 100, seed: 6)
            let note = try alice.phone.add("taxes")
            let attached = try alice.phone.attach([scan, kept], to: note.id)
            let lost = try #require(attached.attachments.first { $0.name == "scan.pdf" }).chunks[1]
            let cache = ChunkCache(root: directory.appendingPathComponent("phone/chunks"))
            try FileManager.default.removeItem(at: cache.url(lost))

            let report = try await alice.phone.sync()
            #expect(report.failures.isEmpty && report.refused.isEmpty, "\(report.failures)")
            #expect(report.attachmentsDropped == 1)
            let synced = try alice.phone.note(note.id)
            #expect(!synced.isDirty && synced.attachments.map(\.name) == ["kept.txt"])
            _ = try await alice.laptop.syncOK()
            let there = try #require(try alice.laptop.notes().first)
            #expect(there.attachments.map(\.name) == ["kept.txt"], "the envelope holds what any device can save")
            let saved = directory.appendingPathComponent("saved.txt")
            _ = try await alice.laptop.saveAttachment("kept.txt", of: there.id, to: saved)
            #expect(try Data(contentsOf: saved) == Data(contentsOf: kept))
        }
    }

    /// `notes encryption enable`: a plaintext account's attachments move into the envelopes of its notes; from the
    /// conversion on, no change carries a manifest in the clear (their chunks, uploaded before, stay as they were:
    /// SECURITY.md), and another device of the account opens them from the envelopes.
    @Test func aConvertedAccountsAttachmentsTravelInTheEnvelopeFromThenOn() async throws {
        try await withTemporaryDirectory("converted-note-attachments") { directory in
            let serverDirectory = directory.appendingPathComponent("server", isDirectory: true)
            let server = try InProcessServer(
                store: try SQLiteNoteStore(dataDirectory: serverDirectory.path), instance: 1000, tokenSeed: 7, logger: quietLogger)
            let wire = FaultInjectingTransport(server.transport)
            let phone = try EncryptionSyncTests.device(server, seed: 1, home: directory.appendingPathComponent("phone"), transport: wire)
            let password = EncryptionSyncTests.password
            _ = try await phone.signUp(server: TestServer.url, username: "carol", password: password).sync.get()
            let (receipt, data) = try NoteAttachmentTests.file(directory, Self.canaryName, size: 3000, seed: 8)
            let note = try phone.add("receipts")
            let manifest = try #require(try phone.attach([receipt], to: note.id).attachments.first)
            #expect(manifest.key == nil, "a plaintext account's")
            _ = try await phone.syncOK()
            #expect(try Self.pushedChanges(wire).last?.attachments == [manifest], "sent in the clear before")

            let before = wire.requests.count
            let report = try await phone.enableEncryption(password: password)
            #expect(report.state == .encrypted && report.converted == 1)
            let pushes = try wire.requests.dropFirst(before).filter { $0.path == Endpoint.push.path }.flatMap { request in
                try JSONDecoder().decode(PushRequest.self, from: try #require(request.body)).changes
            }
            #expect(pushes.count == 1)
            #expect(pushes.allSatisfy { $0.attachments == nil && $0.baseAttachments == nil && $0.chunkRefs == manifest.chunks.sorted() })
            #expect(!wire.requests.dropFirst(before).contains { request in
                request.body.map { String(decoding: $0, as: UTF8.self).contains(Self.canaryName) } ?? false
            })

            let laptop = try EncryptionSyncTests.device(server, seed: 2, home: directory.appendingPathComponent("laptop"))
            _ = try await laptop.signIn(server: TestServer.url, username: "carol", password: password, unowned: .carry).sync.get()
            let there = try #require(try laptop.notes().first)
            #expect(there.attachments == [manifest])
            let saved = directory.appendingPathComponent("saved")
            _ = try await laptop.saveAttachment(Self.canaryName, of: there.id, to: saved)
            #expect(try Data(contentsOf: saved) == data)
        }
    }

    /// `notes import` is the other path that chunks files into the cache: an encrypted account's device seals them too.
    @Test func anImportedAttachmentIsSealedOnAnEncryptedAccountsDevice() async throws {
        try await withTemporaryDirectory("sealed-imported-attachments") { directory in
            let alice = try await Self.alice(directory)
            let data = EncryptedAttachmentTests.canaryFile()
            let source = try AttachmentTests.file(directory, Self.canaryName, data)
            // An export of a signed-out device's note, its attachment's file given as `notes export PATH` writes it.
            let elsewhere = try NoteAttachmentTests.offlineDevice(directory, "elsewhere", seed: 9)
            let exported = try elsewhere.add("scans")
            _ = try elsewhere.attach([source], to: exported.id)
            var export = try elsewhere.export()
            export.notes[0].attachments?[0].file = source.path

            _ = try alice.phone.importNotes([.export(export)])
            let imported = try #require(try alice.phone.notes().first)
            let manifest = try #require(imported.attachments.first)
            #expect(manifest.key != nil && manifest.sha256 == ContentHash(digest: SHA256.hash(data: data)))
            #expect(try EncryptedAttachmentTests.canaryHits(under: directory.appendingPathComponent("phone/chunks")).hits == 0)
            _ = try await alice.phone.syncOK()
            #expect(try EncryptedAttachmentTests.canaryHits(under: alice.serverDirectory).hits == 0)
            _ = try await alice.laptop.syncOK()
            let there = try #require(try alice.laptop.notes().first)
            let saved = directory.appendingPathComponent("saved")
            _ = try await alice.laptop.saveAttachment(Self.canaryName, of: there.id, to: saved)
            #expect(try Data(contentsOf: saved) == data)
        }
    }

    /// The manifests ride in the envelope, whose text the server takes up to `maxNoteBytes`: attaching refuses what
    /// would push an encrypted note over it (the sync could never send it), and keeps what fits.
    @Test func attachingRefusesWhatWouldPutAnEncryptedNoteOverTheServersLimit() async throws {
        try await withTemporaryDirectory("sealed-note-attachments-limit") { directory in
            let alice = try await Self.alice(directory, limits: SyncLimits(maxNoteBytes: 900))
            let (one, _) = try NoteAttachmentTests.file(directory, "one.bin", size: 1000, seed: 1)
            let (two, _) = try NoteAttachmentTests.file(directory, "two.bin", size: 1000, seed: 2)
            let note = try alice.phone.add("limits")
            _ = try await alice.phone.syncOK()
            let attached = try alice.phone.attach([one], to: note.id)
            #expect(NoteSealing.sealedTextCount(text: attached.text, state: attached.tagsAndFlags) <= 900)
            let error = #expect(throws: NotesError.self) { try alice.phone.attach([two], to: note.id) }
            #expect(error?.code == .invalidInput && error?.message.contains("at most 900 bytes") == true, "\(String(describing: error))")
            #expect(try alice.phone.note(note.id).attachments.map(\.name) == ["one.bin"], "nothing attached")
            let synced = try await alice.phone.syncOK()
            #expect(synced.failures.isEmpty && synced.pending == 0)
            _ = try await alice.laptop.syncOK()
            #expect(try alice.laptop.notes().first?.attachments.map(\.name) == ["one.bin"])

            // An imported note with both: refused the same way, nothing imported.
            let elsewhere = try NoteAttachmentTests.offlineDevice(directory, "elsewhere", seed: 9)
            _ = try elsewhere.attach([one, two], to: try elsewhere.add("both").id)
            var export = try elsewhere.export()
            for index in 0..<2 { export.notes[0].attachments?[index].file = [one, two][index].path }
            let refused = #expect(throws: NotesError.self) { try alice.phone.importNotes([.export(export)]) }
            #expect(refused?.code == .invalidInput && refused?.message.contains("at most 900 bytes") == true)
            #expect(try alice.phone.notes().count == 1)
        }
    }
}
