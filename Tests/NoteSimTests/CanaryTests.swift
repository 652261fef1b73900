import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing

@testable import NoteSim

/// Issue 32: encrypted accounts in the simulation and its invariant `no-plaintext-on-server` (``Canary``,
/// ``StoreScan``).
@Suite struct CanaryTests {
    /// A file attached to a note of an encrypted account or of no account holds the canary word at the start of every
    /// chunk, so that any chunk of it stored in the clear is a hit; its other bytes, and its size, are the file's.
    @Test func aCanaryFileHoldsTheWordInEveryChunk() {
        let file = SimFile(name: "f1.bin", seed: 5, size: 2 * ChunkRules.chunkSize + 100)
        let (plain, marked) = (file.bytes, file.canaryBytes)
        let word = Data(Canary.word("file").utf8)
        #expect(marked.count == plain.count)
        for start in [0, ChunkRules.chunkSize, 2 * ChunkRules.chunkSize] {
            let end = min(start + ChunkRules.chunkSize, plain.count)
            #expect(marked[start..<start + word.count] == word && marked[start + word.count..<end] == plain[start + word.count..<end])
        }
        let short = SimFile(name: "f2.bin", seed: 6, size: word.count - 1)
        #expect(short.canaryBytes == short.bytes, "too short for the word")
    }

    /// The scan finds a canary word in any file of a store (here the WAL), with its file, offset and whole word; a
    /// marker cut short is no hit, and a missing file (the `-shm`) is skipped.
    @Test func theScanFindsACanaryWordInAnyFileOfTheStore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("canary-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("notesyncd.sqlite").path
        let near = Array(Canary.marker.utf8.dropLast())
        try Data([0, 1, 2] + near + [0x71, 0x7A] + Array(repeating: 0xAB, count: 100)).write(to: URL(fileURLWithPath: path))
        let wal = [UInt8](repeating: 0x20, count: 37) + Array(Canary.word("t42").utf8) + [0, 9] + Array(Canary.word("G7").utf8)
        try Data(wal).write(to: URL(fileURLWithPath: path + "-wal"))

        let result = try StoreScan.scan(files: StoreScan.sqliteFiles(of: path))
        #expect(result.bytes == 3 + near.count + 2 + 100 + wal.count)
        #expect(
            result.hits == [
                CanaryHit(file: "notesyncd.sqlite-wal", offset: 37, word: "qzcanaryxvt42"),
                CanaryHit(file: "notesyncd.sqlite-wal", offset: 37 + 13 + 2, word: "qzcanaryxvG7"),
            ])
        #expect(try StoreScan.scan(files: [path]).hits.isEmpty)
    }

    /// Issue 33: the store's attachment chunk files (`chunks/<account>/<ab>/<hash>` beside the database, and the
    /// bodies being received in `chunks/.incoming/`) are part of what is scanned, listed as they are at the scan: a
    /// canary word planted in one is found, named by the chunk's file.
    @Test func theScanFindsACanaryWordInAnAttachmentChunkFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("canary-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("notesyncd.sqlite").path
        try Data(repeating: 0xAB, count: 64).write(to: URL(fileURLWithPath: path))
        #expect(try StoreScan.scan(files: StoreScan.sqliteStoreFiles(of: path)).hits.isEmpty)

        let hash = String(repeating: "ab", count: 32)
        let chunks = directory.appendingPathComponent("chunks/1001/ab", isDirectory: true)
        try FileManager.default.createDirectory(at: chunks, withIntermediateDirectories: true)
        try Data([UInt8](repeating: 7, count: 1000) + Array(Canary.word("t9").utf8) + [0]).write(to: chunks.appendingPathComponent(hash))
        let incoming = directory.appendingPathComponent("chunks/.incoming", isDirectory: true)
        try FileManager.default.createDirectory(at: incoming, withIntermediateDirectories: true)
        try Data(Canary.word("g3").utf8).write(to: incoming.appendingPathComponent("partial"))

        let result = try StoreScan.scan(files: StoreScan.sqliteStoreFiles(of: path))
        #expect(result.bytes == 64 + 1000 + 12 + 1 + 12)
        #expect(
            result.hits == [
                CanaryHit(file: "partial", offset: 0, word: "qzcanaryxvg3"), CanaryHit(file: hash, offset: 1000, word: "qzcanaryxvt9"),
            ])
    }

    /// A PostgreSQL dump writes a chunk's bytes (`chunk_data.data`, a bytea) in hexadecimal: the dump's scan finds a
    /// canary word spelled that way too, decoded back, as well as one in a text column.
    @Test func theDumpScanFindsACanaryWordInABytea() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("canary-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let hex = Array(Canary.word("t5").utf8).map { String(format: "%02x", $0) }.joined()
        let dump = "COPY public.chunk_data (account_id, hash, data) FROM stdin;\n1001\tabab\t\\\\x00ff" + hex + "00\n\\.\n"
            + "COPY public.notes (text) FROM stdin;\n" + Canary.word("t6") + "\n"
        let path = directory.appendingPathComponent("dump.sql").path
        try Data(dump.utf8).write(to: URL(fileURLWithPath: path))
        let result = try StoreScan.scanDump(path, name: "pg_dump of notes")
        #expect(Set(result.hits.map(\.word)) == ["qzcanaryxvt5", "qzcanaryxvt6"], "\(result.hits)")
        #expect(result.hits.allSatisfy { $0.file == "pg_dump of notes" })
    }

    /// An encrypted account's word that reaches the server's store in the clear is a violation: a device of a
    /// plaintext account writes one (as a client leaking an encrypted account's note would) and the end-of-run scan
    /// finds it. With the scan broken (reading nothing, or looking for something else) this run passes.
    @Test func aCanaryWordInTheStoreIsAViolation() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .create(device: 0, token: Canary.word("leaked")), .sync(device: 0, faults: []),
        ]
        let parameters = SimParameters(seed: 1, accounts: 1, devices: 1, steps: steps.count, encryptedShare: 0)
        let outcome = try await Simulation.run(steps, parameters: parameters)
        let violation = try #require(outcome.violation)
        #expect(violation.invariant == .noPlaintextOnServer)
        #expect(violation.step == steps.count)  // the end of the run
        #expect(violation.detail.contains("'qzcanaryxvleaked' in notesyncd.sqlite"), "\(violation.detail)")
    }

    /// The scan after a restart finds it at the restart's step.
    @Test func theScanAfterARestartFindsItThere() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .create(device: 0, token: Canary.word("leaked")), .sync(device: 0, faults: []),
            .restartServer, .sync(device: 0, faults: []),
        ]
        let parameters = SimParameters(seed: 1, accounts: 1, devices: 1, steps: steps.count, encryptedShare: 0)
        let outcome = try await Simulation.run(steps, parameters: parameters)
        #expect(outcome.violation?.invariant == .noPlaintextOnServer)
        #expect(outcome.violation?.step == 3)
    }

    /// An encrypted account (two devices): notes and tags written in canary words, a concurrent edit the server
    /// answers `stale` and the device merges, a restart; the auditor opens every envelope it reads (records and
    /// history versions) and the store, scanned after the restart and at the end, holds none of the words.
    @Test func anEncryptedAccountsWordsNeverReachTheStore() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .create(device: 0, token: "first"), .create(device: 0, token: "second"),
            .tagNote(device: 0, note: 0, op: .add(tag: "g1")), .tagNote(device: 0, note: 1, op: .pin(true)),
            .sync(device: 0, faults: []), .sync(device: 1, faults: []),
            .concurrentEdit(first: 0, second: 1, note: 0, firstOp: .append(token: "mine"), secondOp: .insert(at: 0, token: "theirs")),
            .sync(device: 0, faults: []), .sync(device: 1, faults: [FaultPlan(request: 0, kind: .duplicate)]),
            .restartServer, .sync(device: 0, faults: []),
        ]
        let parameters = SimParameters(seed: 1, accounts: 1, devices: 2, steps: steps.count, encryptedShare: 1)
        let outcome = try await Simulation.run(steps, parameters: parameters)
        #expect(outcome.violation == nil, "\(outcome.violation.map(String.init(describing:)) ?? "")")
        let summary = outcome.summary
        #expect(summary.encryptedAccounts == 1)
        #expect(summary.canaryWords == 5)  // first, second, g1, mine, theirs
        #expect(summary.staleAnswers >= 1 && summary.deviceMerges >= 1)
        #expect(summary.envelopesOpened > 0)
        #expect(summary.storeScans == 2 && summary.bytesScanned > 0)
        #expect(summary.notes == 2 && summary.conflicts == 0)
    }

    /// A deleted encrypted account's notes become notes of no account on the deleting device; a sign-in to a
    /// plaintext account that would carry them keeps them aside (carrying them would put their words in the clear, as
    /// the user asked), and a copy of an encrypted account's note into a plaintext account is not made: no false
    /// alarm, every invariant holds (notes-sim seed 70 copied a deleted encrypted account's note).
    @Test func aDeletedEncryptedAccountsNotesAreNotCarriedIntoAPlaintextAccount() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 1, faults: []), .signIn(device: 0, account: 0, faults: []),
            .create(device: 0, token: "secret"), .copy(device: 0, note: 0, account: 1), .sync(device: 0, faults: []),
            .deleteAccount(device: 0), .copy(device: 0, note: 0, account: 1),
            .signIn(device: 0, account: 1, faults: [], carry: true), .sync(device: 0, faults: []),
        ]
        // Seed 2: account 2 mod 2 = 0 is the encrypted one.
        let parameters = SimParameters(seed: 2, accounts: 2, devices: 1, steps: steps.count, encryptedShare: 0.5)
        #expect(parameters.encryptedAccounts == [0])
        let outcome = try await Simulation.run(steps, parameters: parameters)
        #expect(outcome.violation == nil, "\(outcome.violation.map(String.init(describing:)) ?? "")")
        #expect(outcome.summary.copies == 0 && outcome.summary.carried == 0 && outcome.summary.keptAside == 1)
    }

    /// Which accounts are encrypted: round(share × accounts), from account seed mod accounts on.
    @Test func theEncryptedAccountsFollowTheSeedAndTheShare() {
        #expect(SimParameters(seed: 1).encryptedAccounts == [1])
        #expect(SimParameters(seed: 2).encryptedAccounts == [0])
        #expect(SimParameters(seed: 2, encryptedShare: 0).encryptedAccounts.isEmpty)
        #expect(SimParameters(seed: 2, encryptedShare: nil).encryptedAccounts.isEmpty)
        #expect(SimParameters(seed: 2, encryptedShare: 1).encryptedAccounts == [0, 1])
        #expect(SimParameters(seed: 4, accounts: 5, encryptedShare: 0.5).encryptedAccounts == [4, 0, 1])
        #expect(SimParameters(seed: 9, accounts: 1).encryptedAccounts == [0])
    }
}
