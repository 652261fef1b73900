import Crypto
import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NoteSyncServer
import Testing
import TestSupport

@testable import NotesClient

/// Issue 33: an encrypted account's attachments are sealed on the device (NoteCrypto's ``AttachmentCipher``), so the
/// server's chunk files (and this device's chunk cache) hold none of a file's plaintext, while uploads still dedupe
/// and a second device of the account downloads and opens them. Over the in-process server on a data directory,
/// whose every file is scanned.
@Suite struct EncryptedAttachmentTests {
    /// A word that appears nowhere but in the attached file.
    static let canary = Array("qzcanaryxv-attached-file".utf8)

    /// 2.5 MiB of seeded bytes (three chunks) with the canary written into each chunk.
    static func canaryFile() -> Data {
        var bytes = [UInt8](AttachmentTests.bytes(5 * AttachmentTests.mib / 2, seed: 33))
        for offset in [0, 700_000, AttachmentTests.mib + 5, 2 * AttachmentTests.mib + 100_000] {
            bytes.replaceSubrange(offset..<offset + canary.count, with: canary)
        }
        return Data(bytes)
    }

    /// How many times the canary occurs in the files under `directory`, read recursively, and how many files it read.
    static func canaryHits(under directory: URL) throws -> (hits: Int, files: Int) {
        var hits = 0
        var files = 0
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
            files += 1
            let bytes = [UInt8](try Data(contentsOf: url))
            var index = 0
            while index + canary.count <= bytes.count {
                if bytes[index] == canary[0] && bytes[index..<index + canary.count].elementsEqual(canary) { hits += 1 }
                index += 1
            }
        }
        return (hits, files)
    }

    /// Alice's encrypted account: `phone` signed up, `laptop` signed in, each with a data directory (its chunk cache).
    static func alice(_ directory: URL, server: InProcessServer) async throws -> (phone: NotesClient, laptop: NotesClient) {
        let phone = try EncryptionSyncTests.device(server, seed: 1, home: directory.appendingPathComponent("phone"))
        let laptop = try EncryptionSyncTests.device(server, seed: 2, home: directory.appendingPathComponent("laptop"))
        let password = EncryptionSyncTests.password
        _ = try await phone.signUp(server: TestServer.url, username: "alice", password: password, encrypted: true, unowned: .carry).sync.get()
        _ = try await laptop.signIn(server: TestServer.url, username: "alice", password: password, unowned: .carry).sync.get()
        return (phone, laptop)
    }

    @Test func anEncryptedAccountsChunksHoldNoPlaintextAndStillDedupeAndDownload() async throws {
        try await withTemporaryDirectory("sealed-attachments") { directory in
            let serverDirectory = directory.appendingPathComponent("server", isDirectory: true)
            let server = try InProcessServer(
                store: try SQLiteNoteStore(dataDirectory: serverDirectory.path), instance: 1000, tokenSeed: 7, logger: quietLogger)
            let (phone, laptop) = try await Self.alice(directory, server: server)
            let data = Self.canaryFile()
            let source = try AttachmentTests.file(directory, "diary.txt", data)

            let upload = try await phone.uploadAttachment(file: source)
            let manifest = upload.manifest
            #expect(upload.chunksTransferred == 3)
            // The manifest describes the plaintext file, lists the sealed chunks and carries their key.
            #expect(manifest.size == Int64(data.count) && manifest.sha256 == ContentHash(digest: SHA256.hash(data: data)))
            #expect(manifest.chunks.count == 3 && manifest.key != nil)
            let plainAddresses = (0..<3).map { index in
                ContentHash(digest: SHA256.hash(data: data[(index * AttachmentTests.mib)..<min(data.count, (index + 1) * AttachmentTests.mib)]))
            }
            #expect(Set(manifest.chunks).isDisjoint(with: plainAddresses), "the addresses are the sealed chunks', not the plaintext's")
            #expect(upload.bytesTransferred == Int64(data.count + 3 * AttachmentCipher.overheadByteCount))

            // The server's store (database, WAL, chunk files) and the phone's cache hold none of the file's words.
            let (serverHits, serverFiles) = try Self.canaryHits(under: serverDirectory)
            #expect(serverHits == 0 && serverFiles >= 4, "\(serverFiles) files of the server read")
            let (cacheHits, cacheFiles) = try Self.canaryHits(under: directory.appendingPathComponent("phone/chunks"))
            #expect(cacheHits == 0 && cacheFiles == 3)
            #expect(try Self.canaryHits(under: directory).hits == 4, "the source file alone holds the canary (once per chunk)")

            // The same file again (another note, another name): the same sealed chunks, none sent.
            let again = try await phone.uploadAttachment(file: source, name: "copy.txt")
            #expect(again.chunksTransferred == 0 && again.chunksSkipped == 3)
            #expect(again.manifest.chunks == manifest.chunks && again.manifest.key == manifest.key)

            // The laptop (the account's keys, the manifest from the note) downloads and opens it.
            let saved = directory.appendingPathComponent("saved.txt")
            let download = try await laptop.downloadAttachment(manifest, to: saved)
            #expect(download.chunksTransferred == 3)
            #expect(try Data(contentsOf: saved) == data)
            #expect(laptop.hasAttachment(manifest))

            // Chunks in another order, or another file's key: nothing opens, nothing is written.
            var swapped = manifest
            swapped.chunks.swapAt(0, 1)
            await #expect(throws: NotesError.self) { try await laptop.downloadAttachment(swapped, to: directory.appendingPathComponent("swapped")) }
            var rekeyed = manifest
            rekeyed.key = String(repeating: "0", count: 64)
            let error = await #expect(throws: NotesError.self) {
                try await laptop.downloadAttachment(rekeyed, to: directory.appendingPathComponent("rekeyed"))
            }
            #expect(error?.code == .attachmentCorrupt)
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("swapped").path))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("rekeyed").path))
        }
    }

    /// A file that changed between the read that derived its key and the read that sealed it is refused: its
    /// manifest would name a key of other content (and its chunks would not dedupe with the file's own).
    @Test func aFileChangedBetweenItsTwoReadsIsRefused() async throws {
        try await withTemporaryDirectory("sealed-attachments") { directory in
            let server = try InProcessServer(store: try SQLiteNoteStore.temporary(), instance: 1000, tokenSeed: 7, logger: quietLogger)
            let (phone, _) = try await Self.alice(directory, server: server)
            let before = try AttachmentTests.file(directory, "before", AttachmentTests.bytes(AttachmentTests.mib + 9, seed: 1))
            let sealing = try #require(try phone.attachmentSealing(for: before))
            // The file is rewritten after it was hashed for its key.
            let after = try AttachmentTests.file(directory, "before", AttachmentTests.bytes(AttachmentTests.mib + 9, seed: 2))
            let cache = phone.chunkCache
            let error = await #expect(throws: NotesError.self) {
                try await phone.engine.withAccountConnection { (connection) throws(NotesError) in
                    try await ChunkUploader(connection: connection, cache: cache, progress: nil)
                        .upload(file: after, name: "f", mediaType: "a/b", sealing: sealing)
                }
            }
            #expect(error?.code == .fileAccess && error?.message.contains("changed while it was being attached") == true)
            // Unchanged, it goes through.
            let upload = try await phone.uploadAttachment(file: after)
            #expect(upload.manifest.key != nil && upload.chunksTransferred == 2)
        }
    }

    /// A plaintext account's attachments stay as they were: chunks stored as read, no key in the manifest.
    @Test func aPlaintextAccountsChunksAreNotSealed() async throws {
        try await withTemporaryDirectory("plain-attachments") { directory in
            let (_, _, alice) = try await AttachmentTests.alice(directory)
            let data = AttachmentTests.bytes(AttachmentTests.mib + 3, seed: 4)
            let upload = try await alice.uploadAttachment(file: try AttachmentTests.file(directory, "f.bin", data))
            #expect(upload.manifest.key == nil)
            #expect(upload.manifest.chunks.first == ContentHash(digest: SHA256.hash(data: data.prefix(AttachmentTests.mib))))
            #expect(upload.bytesTransferred == Int64(data.count))
        }
    }
}
