import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NoteSyncServer
import SyncHarness
import Testing
import TestSupport

@testable import NotesClient

/// Attachments entering an end-to-end encrypted account by a carry at sign-in or a copy: the device seals their files
/// for it from its chunk cache (``ChunkCache/resealed(_:for:)``), as `attach` would there, so that no chunk goes up in
/// the clear; a file the cache does not hold whole is left out, and said so. Over the in-process server on a data
/// directory whose every file is scanned for the canary written into the file.
@Suite struct ResealedAttachmentTests {
    static let name = EncryptedNoteAttachmentTests.canaryName
    static let password = EncryptionSyncTests.password

    /// A third device of Alice's server, not signed in, its data in `directory/desk` and its requests recorded.
    static func desk(_ alice: EncryptedNoteAttachmentTests.Alice, _ directory: URL) throws -> (NotesClient, FaultInjectingTransport) {
        let wire = FaultInjectingTransport(alice.server.transport)
        let desk = try EncryptionSyncTests.device(alice.server, seed: 3, home: directory.appendingPathComponent("desk"), transport: wire)
        return (desk, wire)
    }

    /// The laptop (another device of the account) pulls the note `text` and saves its attachment `name`.
    static func savedOnTheLaptop(_ alice: EncryptedNoteAttachmentTests.Alice, _ directory: URL, note text: String) async throws -> Data {
        _ = try await alice.laptop.syncOK()
        let there = try #require(try alice.laptop.notes().first { $0.text == text })
        let saved = directory.appendingPathComponent("saved-\(UUID().uuidString)")
        _ = try await alice.laptop.saveAttachment(name, of: there.id, to: saved)
        return try Data(contentsOf: saved)
    }

    /// Whether any file of the server (its database, WAL and chunk files) holds the canary.
    static func serverHoldsTheCanary(_ alice: EncryptedNoteAttachmentTests.Alice) throws -> Bool {
        let (hits, files) = try EncryptedAttachmentTests.canaryHits(under: alice.serverDirectory)
        #expect(files >= 3, "\(files) files of the server read")
        return hits > 0
    }

    @Test func aNoteCarriedIntoAnEncryptedAccountHasItsAttachmentSealedForIt() async throws {
        try await withTemporaryDirectory("resealed-carry") { directory in
            let alice = try await EncryptedNoteAttachmentTests.alice(directory)
            let (desk, wire) = try Self.desk(alice, directory)
            let data = EncryptedAttachmentTests.canaryFile()
            let file = try AttachmentTests.file(directory, Self.name, data)
            let note = try desk.add("written offline")
            let plain = try #require(try desk.attach([file], to: note.id).attachments.first)
            #expect(plain.key == nil, "attached while signed out: in the clear in the cache")

            let report = try await desk.signIn(server: TestServer.url, username: "alice", password: Self.password, unowned: .carry)
            #expect(report.owners.carried == 1 && report.owners.attachmentsDropped == 0)
            let sync = try report.sync.get()
            #expect(sync.failures.isEmpty && sync.pending == 0 && sync.chunksUploaded == 3)
            let carried = try #require(try desk.note(note.id).attachments.first)
            #expect(carried.key != nil && carried.sha256 == plain.sha256 && carried.size == plain.size && carried.name == plain.name)
            #expect(Set(carried.chunks).isDisjoint(with: plain.chunks))
            #expect(!EncryptedNoteAttachmentTests.sent(EncryptedAttachmentTests.canary, over: wire), "no chunk went in the clear")
            #expect(try !Self.serverHoldsTheCanary(alice))
            // Sealed exactly as attaching the file on a device of the account seals it: the same chunks.
            let attached = try alice.phone.attach([file], to: try alice.phone.add("attached here").id)
            #expect(attached.attachments == [carried])

            #expect(try await Self.savedOnTheLaptop(alice, directory, note: "written offline") == data)
        }
    }

    @Test func aCopyIntoAnEncryptedAccountHasItsAttachmentSealedForItAndTheOriginalKeepsIts() async throws {
        try await withTemporaryDirectory("resealed-copy") { directory in
            let alice = try await EncryptedNoteAttachmentTests.alice(directory)
            let (desk, wire) = try Self.desk(alice, directory)
            _ = try await desk.signIn(server: TestServer.url, username: "alice", password: Self.password).sync.get()
            _ = try await desk.signOut()
            let data = EncryptedAttachmentTests.canaryFile()
            let file = try AttachmentTests.file(directory, Self.name, data)
            let source = try desk.add("signed out")
            let plain = try #require(try desk.attach([file], to: source.id).attachments.first)

            let copy = try desk.copy(source.id, to: "alice")
            #expect(copy.attachmentsLeftOut.isEmpty)
            let sealed = try #require(copy.note.attachments.first)
            #expect(sealed.key != nil && sealed.sha256 == plain.sha256 && Set(sealed.chunks).isDisjoint(with: plain.chunks))
            #expect(try desk.note(source.id).attachments == [plain], "the original keeps its attachment")

            _ = try await desk.signIn(server: TestServer.url, username: "alice", password: Self.password, unowned: .keepAside).sync.get()
            #expect(!EncryptedNoteAttachmentTests.sent(EncryptedAttachmentTests.canary, over: wire), "no chunk went in the clear")
            #expect(try !Self.serverHoldsTheCanary(alice))
            #expect(try await Self.savedOnTheLaptop(alice, directory, note: "signed out") == data)
        }
    }

    /// A file whose chunks the cache does not hold whole cannot be sealed from this device: left out of the carried
    /// note and of the copy, and reported; the other attachments go, sealed, and the original keeps both.
    @Test func anAttachmentTheCacheDoesNotHoldWholeIsLeftOutAndReported() async throws {
        try await withTemporaryDirectory("resealed-missing") { directory in
            let alice = try await EncryptedNoteAttachmentTests.alice(directory)
            let (desk, _) = try Self.desk(alice, directory)
            let file = try AttachmentTests.file(directory, Self.name, EncryptedAttachmentTests.canaryFile())
            let (small, _) = try NoteAttachmentTests.file(directory, "small.txt", size: 100, seed: 5)
            let cache = ChunkCache(root: directory.appendingPathComponent("desk/chunks"))

            let copied = try desk.add("copied")
            let both = try desk.attach([file, small], to: copied.id).attachments
            let carried = try desk.add("carried")
            try desk.attach([file, small], to: carried.id)
            // Sign in once, so that alice is known here for the copy, keeping the notes of no account off it.
            _ = try await desk.signIn(server: TestServer.url, username: "alice", password: Self.password, unowned: .keepAside).sync.get()
            _ = try await desk.signOut()
            let big = try #require(both.first { $0.name == Self.name })
            try FileManager.default.removeItem(at: cache.url(big.chunks[1]))

            let copy = try desk.copy(copied.id, to: "alice")
            #expect(copy.attachmentsLeftOut == [Self.name])
            #expect(copy.note.attachments.map(\.name) == ["small.txt"] && copy.note.attachments.allSatisfy { $0.key != nil })
            #expect(try desk.note(copied.id).attachments == both, "the original keeps both")

            let report = try await desk.signIn(server: TestServer.url, username: "alice", password: Self.password, unowned: .carry)
            #expect(report.owners.carried == 2 && report.owners.attachmentsDropped == 2, "each note's big file")
            let sync = try report.sync.get()
            #expect(sync.failures.isEmpty && sync.pending == 0 && sync.attachmentsDropped == 0)
            for note in try desk.notes() {
                #expect(note.attachments.map(\.name) == ["small.txt"] && note.attachments.allSatisfy { $0.key != nil }, "\(note.text)")
            }
            #expect(try !Self.serverHoldsTheCanary(alice))
        }
    }

    /// A signed-out device still shows its account's notes and takes attachments on them: an encrypted account's
    /// note gets its file sealed for that account, not staged in the clear (notes-sim's seed 4 of 1,000 steps: the
    /// push that followed the next sign-in carried a manifest in the clear).
    @Test func aFileAttachedWhileSignedOutToAnEncryptedAccountsNoteIsSealedForIt() async throws {
        try await withTemporaryDirectory("resealed-signed-out") { directory in
            let alice = try await EncryptedNoteAttachmentTests.alice(directory)
            let data = EncryptedAttachmentTests.canaryFile()
            let file = try AttachmentTests.file(directory, Self.name, data)
            let note = try alice.phone.add("kept at sign-out")
            _ = try await alice.phone.syncOK()
            _ = try await alice.phone.signOut()
            let manifest = try #require(try alice.phone.attach([file], to: note.id).attachments.first)
            #expect(manifest.key != nil, "sealed for the note's account")
            _ = try await alice.phone.signIn(server: TestServer.url, username: "alice", password: Self.password).sync.get()
            #expect(try !Self.serverHoldsTheCanary(alice))
            #expect(try await Self.savedOnTheLaptop(alice, directory, note: "kept at sign-out") == data)
        }
    }

    /// The backstop: a change of an encrypted account's note whose attachment is in the clear and whose chunks the
    /// server lacks (no path of the client makes one any more) is refused, its chunks not sent, and nothing is lost.
    @Test func aChunkInTheClearIsNeverUploadedForAnEncryptedAccount() async throws {
        try await withTemporaryDirectory("resealed-backstop") { directory in
            let alice = try await EncryptedNoteAttachmentTests.alice(directory)
            let file = try AttachmentTests.file(directory, Self.name, EncryptedAttachmentTests.canaryFile())
            let note = try alice.phone.add("planted")
            let plain = try alice.phone.chunkCache.stage(file: file, name: Self.name, mediaType: "text/plain")
            try alice.phone.store.write { tx in
                var state = try tx.note(note.id).tagsAndFlags
                state.attachments = [plain]
                try tx.replaceState(ofNote: try tx.note(note.id), with: state)
            }
            let report = try await alice.phone.sync()
            #expect(report.chunksUploaded == 0)
            #expect(report.refused.map(\.error.code) == [APIErrorCode.notEncrypted.rawValue], "\(report.refused)")
            #expect(!EncryptedNoteAttachmentTests.sent(EncryptedAttachmentTests.canary, over: alice.phoneWire))
            #expect(try !Self.serverHoldsTheCanary(alice))
            #expect(try alice.phone.note(note.id).attachments == [plain] && alice.phone.note(note.id).isDirty)
        }
    }

    /// Sealing from the cache gives the manifest attaching the file gives: from the clear, and from another
    /// account's seal; a manifest already sealed for the account is kept as it is.
    @Test func resealingGivesWhatAttachingGives() throws {
        let directory = try makeTemporaryDirectory("resealing")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ChunkCache(root: directory.appendingPathComponent("chunks"))
        let file = try AttachmentTests.file(directory, "two-chunks.bin", AttachmentTests.bytes(ChunkRules.chunkSize + 77, seed: 9))
        let mine = AccountKeyRing(try AccountKey(account: FlakeID(validating: 11), generation: 1, restoringSecretBytes: [UInt8](repeating: 1, count: 32)))
        let theirs = AccountKeyRing(try AccountKey(account: FlakeID(validating: 12), generation: 1, restoringSecretBytes: [UInt8](repeating: 2, count: 32)))
        let attached = try cache.stage(file: file, name: "f", mediaType: "x/y", sealing: ChunkSealing.forFile(file, keys: mine))
        let plain = try cache.stage(file: file, name: "f", mediaType: "x/y")
        let sealedForThem = try cache.stage(file: file, name: "f", mediaType: "x/y", sealing: ChunkSealing.forFile(file, keys: theirs))
        #expect(try cache.resealed(plain, for: mine) == attached)
        #expect(try cache.resealed(sealedForThem, for: mine) == attached)
        #expect(try cache.resealed(attached, for: mine) == attached)
        #expect(ChunkSealing.isSealed(attached, for: mine) && !ChunkSealing.isSealed(sealedForThem, for: mine))
        try FileManager.default.removeItem(at: cache.url(plain.chunks[0]))
        #expect(try cache.resealed(plain, for: theirs) == nil, "a chunk missing")
    }
}
