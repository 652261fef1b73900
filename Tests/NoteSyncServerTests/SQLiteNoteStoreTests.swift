import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

@Suite("SQLiteNoteStore")
struct SQLiteNoteStoreTests {
    @Test func durableSettings() async throws {
        let store = try SQLiteNoteStore.temporary()
        #expect(try await store.synchronousMode() == 2)  // FULL
        try await store.close()
    }

    /// The simulation's store (``SQLiteNoteStore/unsynced(path:)``): a file with its WAL and `-shm`, as a daemon's,
    /// whose commits are not flushed; what it wrote is in the file, and the daemon's store opens it.
    @Test func theUnsyncedStoreIsAFileInWALModeThatIsNotFlushed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-unsynced-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(SQLiteNoteStore.fileName).path
        let minter = CountingMinter()
        var store = try SQLiteNoteStore.unsynced(path: path)
        #expect(try await store.synchronousMode() == 0)  // OFF
        #expect(store.databasePath == path)
        let account = AccountRecord(id: minter.mint(), username: "alice", passwordHash: "h", createdAt: 1)
        try await store.createAccount(account)
        _ = try await store.push(
            accountID: account.id, changes: [change(1, edit: 1, text: "in the file\n")],
            context: PushContext(limits: SyncLimits(), now: testEpoch, mintID: { minter.mint() }))
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect((wal ?? 0) > 0)
        #expect(FileManager.default.fileExists(atPath: path + "-shm"))
        try await store.close()

        store = try SQLiteNoteStore(path: path)
        #expect(try await store.pull(accountID: account.id, after: 0, limit: 10).notes.map(\.text) == ["in the file\n"])
        try await store.close()
    }

    @Test func reopeningKeepsDataAndMigratesOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-reopen-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let minter = CountingMinter()
        var store = try SQLiteNoteStore(dataDirectory: directory)
        let account = AccountRecord(id: minter.mint(), username: "alice", passwordHash: "h", createdAt: 1)
        try await store.createAccount(account)
        let results = try await store.push(
            accountID: account.id, changes: [change(1, edit: 1, text: "persisted\n")],
            context: PushContext(limits: SyncLimits(), now: testEpoch, mintID: { minter.mint() })
        )
        try await store.close()

        store = try SQLiteNoteStore(dataDirectory: directory)
        #expect(try await store.account(byID: account.id) == account)
        let notes = try await store.pull(accountID: account.id, after: 0, limit: 10).notes
        #expect(notes.map(\.text) == ["persisted\n"])
        #expect(notes.map(\.serverID) == [results[0].serverID!])
        #expect(try await store.largestIssuedID() == results[0].serverID)
        try await store.close()
    }

    @Test func concurrentPushesOfOneAccountAreSerialized() async throws {
        let store = try SQLiteNoteStore.temporary()
        let minter = CountingMinter()
        let account = AccountRecord(id: minter.mint(), username: "alice", passwordHash: "h", createdAt: 1)
        try await store.createAccount(account)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for round in 0..<10 {
                        let base = Int64(task * 1000 + round * 10)
                        _ = try await store.push(
                            accountID: account.id, changes: (1...5).map { change(base + $0, edit: base + $0, text: "t\(task)\n") },
                            context: PushContext(limits: SyncLimits(), now: testEpoch, mintID: { minter.mint() })
                        )
                    }
                }
            }
            try await group.waitForAll()
        }
        let notes = try await store.pull(accountID: account.id, after: 0, limit: 1000)
        #expect(notes.notes.count == 400)
        #expect(notes.notes.map(\.changeSeq) == Array(1...400))
        #expect(notes.currentSequence == 400)
        try await store.close()
    }
}

@Suite("applied-edit pruning")
struct PruneServiceTests {
    @Test func pruneOnceDeletesOnlyEditsOlderThanTheRetention() async throws {
        let store = try SQLiteNoteStore.inMemory()
        let alice = try await NoteStoreConformance.makeAccount(store, "alice")
        _ = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: "old\n")], context: NoteStoreConformance.context(now: 1_000))
        _ = try await store.push(accountID: alice, changes: [change(2, edit: 2, text: "new\n")], context: NoteStoreConformance.context(now: 9_000))
        let clock = ManualFlakeClock(unixMilliseconds: 10_000)
        let service = PruneService(
            store: store, editRetention: 5_000, historyRetention: nil, interval: .seconds(3600), clock: clock, logger: testLogger)
        await service.pruneOnce()
        // Edit 1 (at 1,000, before 10,000 - 5,000) is gone: re-sending it reconciles; edit 2 is still a replay.
        let again = try await store.push(
            accountID: alice, changes: [change(1, edit: 1, text: "old\n"), change(2, edit: 2, text: "new\n")],
            context: NoteStoreConformance.context(now: 10_000)
        )
        #expect(again.map(\.replayed) == [false, true])
        #expect(again[0].status == .reconciled)
        try await store.close()
    }
}
