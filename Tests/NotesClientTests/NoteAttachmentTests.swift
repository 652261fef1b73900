import Crypto
import Foundation
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import Testing
import TestSupport

@testable import NotesClient

/// Attachments on notes (issue 33, phase 2), in process: the store and the API (attach, detach, list, save), the
/// chunk planner's rules, and the sync of attachments between two devices.
@Suite("Note attachments")
struct NoteAttachmentTests {
    static let mib = 1 << 20

    static func file(_ directory: URL, _ name: String, size: Int, seed: UInt64) throws -> (URL, Data) {
        let data = AttachmentTests.bytes(size, seed: seed)
        return (try AttachmentTests.file(directory, name, data), data)
    }

    /// A device signed out, its data in `directory/name`.
    static func offlineDevice(_ directory: URL, _ name: String = "device", seed: UInt64 = 1) throws -> NotesClient {
        try makeDevice(try TestServer.make().transport, seed: seed, home: directory.appendingPathComponent(name))
    }

    // MARK: - Store and API

    @Test func attachingIsALocalEditKeptInTheStoreAndSavedWithoutAServer() async throws {
        try await withTemporaryDirectory("note-attachments") { directory in
            let device = try Self.offlineDevice(directory)
            let note = try device.add("holiday")
            let (photo, photoBytes) = try Self.file(directory, "photo.png", size: 2 * Self.mib + 5, seed: 1)
            let (notes, _) = try Self.file(directory, "b-notes.txt", size: 100, seed: 2)

            let attached = try device.attach([photo, notes], to: note.id)
            #expect(attached.attachments.map(\.name) == ["b-notes.txt", "photo.png"], "sorted by name")
            #expect(attached.revision == note.revision + 1 && attached.isDirty)
            let manifest = try #require(attached.attachments.last)
            #expect(manifest.mediaType == "image/png" && manifest.size == Int64(photoBytes.count) && manifest.chunks.count == 3)
            #expect(manifest.sha256 == ContentHash(digest: SHA256.hash(data: photoBytes)))
            #expect(attached.baseAttachments.isEmpty)
            #expect(try device.attachments(of: note.id).map(\.isOnDevice) == [true, true])

            // Kept by the store: a client opened again reads them back.
            let reopened = try Self.offlineDevice(directory)
            #expect(try reopened.note(note.id).attachments == attached.attachments)

            // Saved from the cache, signed out: the same bytes, nothing fetched.
            let saved = directory.appendingPathComponent("saved.png")
            let transfer = try await reopened.saveAttachment("photo.png", of: note.id, to: saved)
            #expect(try Data(contentsOf: saved) == photoBytes)
            #expect(transfer.chunksTransferred == 0 && transfer.chunksSkipped == 3)

            let detached = try reopened.detach("b-notes.txt", from: note.id)
            #expect(detached.attachments.map(\.name) == ["photo.png"] && detached.revision == attached.revision + 1)
        }
    }

    @Test func badAttachmentsAreRefusedAndChangeNothing() async throws {
        try await withTemporaryDirectory("note-attachments-errors") { directory in
            let device = try Self.offlineDevice(directory)
            let note = try device.add("errands")
            let (list, _) = try Self.file(directory, "list.txt", size: 10, seed: 3)
            let attached = try device.attach([list], to: note.id)

            let missing = directory.appendingPathComponent("absent.txt")
            let unreadable = #expect(throws: NotesError.self) { try device.attach([missing], to: note.id) }
            #expect(unreadable?.code == .fileAccess)
            let clash = #expect(throws: NotesError.self) { try device.attach([list], to: note.id) }
            #expect(clash?.code == .attachmentExists)
            let twice = #expect(throws: NotesError.self) { try device.attach([missing, missing], to: note.id, names: ["a", "a"]) }
            #expect(twice?.code == .attachmentExists)
            let unknown = #expect(throws: NotesError.self) { try device.detach("nope.txt", from: note.id) }
            #expect(unknown?.code == .attachmentNotFound && unknown?.message.contains("list.txt") == true)
            let save = await #expect(throws: NotesError.self) {
                try await device.saveAttachment("nope.txt", of: note.id, to: directory.appendingPathComponent("x"))
            }
            #expect(save?.code == .attachmentNotFound)
            #expect(try device.note(note.id) == attached, "nothing changed")

            // A chunk that is on no side: saving it signed out says it needs an account, and writes nothing.
            let manifest = try #require(attached.attachments.first)
            ChunkCache(root: directory.appendingPathComponent("device/chunks")).remove(manifest.chunks[0])
            #expect(try device.attachments(of: note.id).map(\.isOnDevice) == [false])
            let offline = await #expect(throws: NotesError.self) {
                try await device.saveAttachment("list.txt", of: note.id, to: directory.appendingPathComponent("out.txt"))
            }
            #expect(offline?.code == .notSignedIn)
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("out.txt").path))
        }
    }

    // MARK: - Chunk planner

    static func entry(_ editID: Int64, attachments: [AttachmentManifest], sealed: Bool = false) -> OutboxEntry {
        var entry = OutboxEntry(
            snapshot: OutboxPlanner.Snapshot(
                noteID: editID, editID: try! FlakeID(validating: editID), text: "t", deleted: false, baseVersion: nil, baseText: nil,
                serverID: nil, revision: 1, editedAt: nil, tagsAndFlags: TagsAndFlags(attachments: attachments)),
            clientID: try! FlakeID(validating: 1_000 + editID), origin: try! FlakeID(validating: 42), isConflict: false)
        if sealed { entry.sealed = SealedChange(text: "sealed", seq: 1) }
        return entry
    }

    static func hash(_ n: Int) -> ContentHash { ContentHash(digest: SHA256.hash(data: Data([UInt8(n)]))) }

    static func manifest(_ name: String, _ chunks: [Int]) -> AttachmentManifest {
        AttachmentManifest(
            name: name, size: Int64(chunks.count), mediaType: "text/plain", chunkSize: 1, chunks: chunks.map(hash), sha256: hash(99))
    }

    @Test func theChunkPlannerAsksForEachChunkOnceAndRefusesChangesReferringToAbsentOnes() {
        let a = Self.entry(1, attachments: [Self.manifest("a", [1, 2, 1]), Self.manifest("b", [3])])
        let b = Self.entry(2, attachments: [Self.manifest("c", [2, 4])])
        let sealed = Self.entry(3, attachments: [Self.manifest("d", [5])], sealed: true)
        #expect(ChunkPlanner.chunks(of: [a, b, sealed]) == [1, 2, 3, 4, 5].map(Self.hash), "each once, first met first; a sealed change's too")

        let split = ChunkPlanner.split(missing: [1, 3, 4].map(Self.hash)) { $0 != Self.hash(4) }
        #expect(split.upload == [1, 3].map(Self.hash) && split.absent == [Self.hash(4)])

        let refusals = ChunkPlanner.refusals([a, b], absent: split.absent)
        #expect(refusals.map(\.entry.editID) == [b.editID])
        #expect(refusals.first?.error.code.rawValue == "unknown_chunk")
        #expect(refusals.first?.error.message.contains("c refers to chunk \(Self.hash(4))") == true)
        #expect(ChunkPlanner.refusals([a, b], absent: []).isEmpty)
        #expect(ChunkPlanner.refusals([a, sealed], absent: [Self.hash(5)]).map(\.entry.editID) == [sealed.editID], "a sealed change too")

        // Refused so, a note is tried again at every sync, as one over the quota.
        #expect(OutboxPlanner.retriesAtEverySync("unknown_chunk"))
        let hashes = (0..<(ChunkRules.maxMissingHashes + 1)).map { ContentHash(digest: SHA256.hash(data: Data("\($0)".utf8))) }
        #expect(ChunkPlanner.missingRequests(hashes).map(\.count) == [ChunkRules.maxMissingHashes, 1])
    }

    @Test func aChangeSendsAttachmentsAndTheirBaseOnlyWhenEitherHasSome() {
        let photo = Self.manifest("photo.png", [1, 2])
        #expect(Self.entry(1, attachments: []).change.attachments == nil, "none on either side: nothing to say")
        let change = Self.entry(1, attachments: [photo]).change
        #expect(change.attachments == [photo] && change.baseAttachments == [])
        var detached = Self.entry(1, attachments: [])
        detached.snapshot.baseTagsAndFlags?.attachments = [photo]
        #expect(detached.change.attachments == [] && detached.change.baseAttachments == [photo], "a detach is sent")
        // Sealed (an encrypted account): no manifest in the clear, the chunks' addresses sorted and each once.
        let scan = Self.manifest("scan.pdf", [2, 3])
        var sealed = Self.entry(1, attachments: [photo, scan])
        sealed.sealed = SealedChange(text: "sealed", seq: 1)
        #expect(sealed.change.attachments == nil && sealed.change.baseAttachments == nil)
        #expect(sealed.change.chunkRefs == [1, 2, 3].map(Self.hash).sorted())
        #expect(ChunkPlanner.chunks(of: [sealed]) == [1, 2, 3].map(Self.hash), "made present on the server before the push")
        detached.sealed = SealedChange(text: "sealed", seq: 2)
        #expect(detached.change.chunkRefs == [] && detached.change.attachments == nil, "a detach is sent")
        var plain = Self.entry(1, attachments: [])
        plain.sealed = SealedChange(text: "sealed", seq: 1)
        #expect(plain.change.chunkRefs == nil, "none on either side: nothing to say")
    }

    @Test func aPushResultAndAPulledRecordGiveTheNoteTheServersAttachments() {
        let mine = Self.manifest("a", [1])
        let theirs = Self.manifest("b", [2])
        let entry = Self.entry(1, attachments: [mine])
        let merged = ChangeResult(
            clientID: entry.clientID, editID: entry.editID, status: .merged, serverID: try! FlakeID(validating: 5), version: 3,
            attachments: [theirs, mine])
        guard case .accept(let acceptance) = PushResultPlanner.apply(merged, to: entry, localRevision: 1, now: 0),
            case .settle(let settle) = acceptance.update
        else {
            Issue.record("not settled")
            return
        }
        #expect(settle.tagsAndFlags?.attachments == [mine, theirs], "the merged set, by name")
        var same = merged
        same.attachments = nil
        guard case .accept(let kept) = PushResultPlanner.apply(same, to: entry, localRevision: 1, now: 0),
            case .settle(let settleKept) = kept.update
        else {
            Issue.record("not settled")
            return
        }
        #expect(settleKept.tagsAndFlags?.attachments == [mine], "absent: the pushed set is the note's")

        let record = NoteRecord(
            serverID: try! FlakeID(validating: 5), clientID: entry.clientID, origin: entry.origin, version: 4, text: "t",
            deleted: false, conflictOf: nil, updatedAt: "2026-11-26T00:00:00.000Z", attachments: [theirs])
        let inserted = PullPlanner.apply(record, local: LocalNoteValue?.none, now: 0)
        guard case .insert(let new) = inserted.action else {
            Issue.record("not inserted")
            return
        }
        #expect(new.state.tagsAndFlags.attachments == [theirs] && new.state.baseTagsAndFlags.attachments == [theirs])
    }

    // MARK: - Sync

    /// Alice's two devices with their data in `directory`, behind transports that record requests.
    static func twoDevices(_ directory: URL) async throws -> (a: NotesClient, aTransport: FaultInjectingTransport, b: NotesClient, bTransport: FaultInjectingTransport) {
        let server = try TestServer.make()
        let aTransport = FaultInjectingTransport(server.transport)
        let bTransport = FaultInjectingTransport(server.transport)
        let a = try makeDevice(aTransport, seed: 1, home: directory.appendingPathComponent("a"))
        let b = try makeDevice(bTransport, seed: 2, home: directory.appendingPathComponent("b"))
        try await signUp(a, "alice")
        try await signIn(b, "alice")
        return (a, aTransport, b, bTransport)
    }

    @Test func anAttachmentSyncsToAnotherDeviceWhichDownloadsItOnlyWhenSaved() async throws {
        try await withTemporaryDirectory("note-attachments-sync") { directory in
            let (a, aTransport, b, bTransport) = try await Self.twoDevices(directory)
            let (film, filmBytes) = try Self.file(directory, "film.mov", size: 3 * Self.mib + 10, seed: 4)
            let note = try a.add("trip")
            try a.attach([film], to: note.id)
            let pushed = try await a.syncOK()
            #expect(pushed.chunksUploaded == 4 && pushed.chunkBytesUploaded == Int64(filmBytes.count))
            #expect(AttachmentTests.puts(aTransport) == 4)
            let settled = try a.note(note.id)
            #expect(!settled.isDirty && settled.baseAttachments == settled.attachments)

            let pulled = try await b.syncOK()
            #expect(pulled.applied == 1)
            #expect(AttachmentTests.gets(bTransport) == 0, "a pull downloads no chunk")
            let there = try #require(try b.notes().first)
            #expect(there.attachments == settled.attachments)
            #expect(try b.attachments(of: there.id).map(\.isOnDevice) == [false])
            let saved = directory.appendingPathComponent("saved.mov")
            let transfer = try await b.saveAttachment("film.mov", of: there.id, to: saved)
            #expect(try Data(contentsOf: saved) == filmBytes)
            #expect(transfer.chunksTransferred == 4 && AttachmentTests.gets(bTransport) == 4)

            // The same file on a second note: no chunk is sent again.
            let second = try b.add("copy")
            try b.attach([saved], to: second.id, names: ["film.mov"])
            let again = try await b.syncOK()
            #expect(again.chunksUploaded == 0 && AttachmentTests.puts(bTransport) == 0)

            // Detached on one device, gone from the other.
            try a.detach("film.mov", from: note.id)
            try await a.syncOK()
            try await b.syncOK()
            #expect(try b.note(there.id).attachments.isEmpty)
        }
    }

    @Test func anAttachmentWhoseBytesNoSideHasIsDroppedAndTheNoteSyncs() async throws {
        try await withTemporaryDirectory("note-attachments-absent") { directory in
            let (a, aTransport, _, _) = try await Self.twoDevices(directory)
            let (scan, _) = try Self.file(directory, "scan.pdf", size: 2 * Self.mib + 1, seed: 5)
            let (kept, _) = try Self.file(directory, "kept.txt", size: 100, seed: 6)
            let note = try a.add("taxes")
            let attached = try a.attach([scan, kept], to: note.id)
            let lost = try #require(attached.attachments.first { $0.name == "scan.pdf" }).chunks[1]
            let cache = ChunkCache(root: directory.appendingPathComponent("a/chunks"))
            try FileManager.default.removeItem(at: cache.url(lost))

            let report = try await a.sync()
            #expect(report.failures.isEmpty && report.refused.isEmpty, "the note is not held back: \(report.failures)")
            #expect(report.attachmentsDropped == 1)
            let pushes = aTransport.requests.filter { $0.path == Endpoint.push.path }.compactMap(\.body).map { String(decoding: $0, as: UTF8.self) }
            #expect(!pushes.contains { $0.contains("scan.pdf") } && pushes.contains { $0.contains("kept.txt") })
            let synced = try a.note(note.id)
            #expect(!synced.isDirty && synced.pushError == nil)
            #expect(synced.attachments.map(\.name) == ["kept.txt"], "the note holds what any device can save")
            #expect(try await a.syncOK().attachmentsDropped == 0)
        }
    }

    /// An account deleted from a device that never downloaded one of a note's attachments: the note is kept as a note
    /// of no account without that attachment (the server deleted its bytes with the account, so no device could save
    /// it from here), and with the one this device saved (the simulation's seed 548: the note, carried into the account
    /// signed up again by a sign-in whose sync was cut, listed an attachment that every save refused).
    @Test func anAccountDeletionDropsTheAttachmentsWhoseBytesWentWithIt() async throws {
        try await withTemporaryDirectory("note-attachments-deleted") { directory in
            let (a, _, b, _) = try await Self.twoDevices(directory)
            let (scan, _) = try Self.file(directory, "scan.pdf", size: 2 * Self.mib + 1, seed: 7)
            let (kept, _) = try Self.file(directory, "kept.txt", size: 100, seed: 8)
            let note = try a.add("taxes")
            try a.attach([scan, kept], to: note.id)
            try await a.syncOK()
            try await b.syncOK()
            let there = try #require(try b.notes().first)
            _ = try await b.saveAttachment("kept.txt", of: there.id, to: directory.appendingPathComponent("kept-saved.txt"))

            let report = try await b.deleteAccount(password: "correct horse battery")
            #expect(report.attachmentsDropped == 1)
            let orphan = try #require(try b.allNotes(includingSetAside: true).first { $0.text == "taxes" })
            #expect(orphan.attachments.map(\.name) == ["kept.txt"], "the note lists only what this device can save")
            #expect(try b.attachments(of: orphan.id).map(\.isOnDevice) == [true])
            // The device that attached both holds their bytes: it keeps both.
            try await a.signOut()
            try await signUp(a, "alice", unowned: .keepAside)
            let mine = try #require(try a.allNotes(includingSetAside: true).first { $0.text == "taxes" })
            #expect(mine.attachments.map(\.name) == ["kept.txt", "scan.pdf"])
        }
    }

    /// The same when another device deleted the account: the sign-in to the account signed up again under the same
    /// name disowns the old one's notes here, without the attachments this device cannot save.
    @Test func aSignInAfterTheAccountWasDeletedElsewhereDropsTheAttachmentsWhoseBytesWentWithIt() async throws {
        try await withTemporaryDirectory("note-attachments-deleted-elsewhere") { directory in
            let (a, _, b, _) = try await Self.twoDevices(directory)
            let (scan, _) = try Self.file(directory, "scan.pdf", size: 100, seed: 9)
            let note = try a.add("receipt")
            try a.attach([scan], to: note.id)
            try await a.syncOK()
            try await b.syncOK()
            #expect(try b.notes().first?.attachments.map(\.name) == ["scan.pdf"])

            _ = try await a.deleteAccount(password: "correct horse battery")
            try await signUp(a, "alice", unowned: .keepAside)
            try await b.signOut()
            try await signIn(b, "alice", unowned: .keepAside)
            let orphan = try #require(try b.allNotes(includingSetAside: true).first { $0.text == "receipt" })
            #expect(orphan.attachments.isEmpty, "its bytes went with the deleted account: \(orphan.attachments.map(\.name))")
        }
    }

    /// A prune after a transfer never removes the chunks of an attachment not synced yet (the server may lack them):
    /// they would be on no side at the next sync.
    @Test func aPruneKeepsTheChunksOfAttachmentsNotSyncedYet() async throws {
        try await withTemporaryDirectory("note-attachments-prune") { directory in
            let server = try TestServer.make()
            var environment = NotesEnvironment(
                clock: ManualFlakeClock(unixMilliseconds: 1_800_000_000_000), random: SplitMix64(seed: 1),
                transport: NotesEnvironment.fixed(server.transport), sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3),
                deviceName: "device-1")
            environment.chunkCacheLimit = 2 * Int64(Self.mib)
            let alice = try NotesClient.open(home: directory.appendingPathComponent("alice"), environment: environment)
            try await signUp(alice, "alice")
            let note = try alice.add("offline")
            let (offline, _) = try Self.file(directory, "offline.bin", size: 3 * Self.mib, seed: 6)
            let pending = try alice.attach([offline], to: note.id).attachments[0]
            // Used long ago: the first to go, were it not waiting for a sync.
            for hash in pending.chunks {
                try FileManager.default.setAttributes(
                    [.modificationDate: Date(timeIntervalSince1970: 1_000_000_000)], ofItemAtPath: alice.chunkCache.url(hash).path)
            }
            let (other, _) = try Self.file(directory, "other.bin", size: 2 * Self.mib, seed: 7)
            let uploaded = try await alice.uploadAttachment(file: other).manifest
            #expect(alice.hasAttachment(pending), "kept over the limit until synced")
            #expect(!alice.hasAttachment(uploaded), "what is on the server went instead")

            let report = try await alice.syncOK()
            #expect(report.chunksUploaded == 3 && report.failures.isEmpty)
        }
    }
}
