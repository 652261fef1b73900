import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

/// A transport for tests that must never reach a server.
struct NoNetwork: SyncTransport {
    func send(_ request: WireRequest) async throws -> WireResponse {
        Issue.record("a local command used the network: \(request.method) \(request.path)")
        throw TransportError("no network in this test")
    }
}

@Suite("Local store")
struct LocalStoreTests {
    func device(seed: UInt64 = 1, home: URL? = nil, clock: ManualFlakeClock? = nil) throws -> NotesClient {
        try makeDevice(NoNetwork(), seed: seed, home: home, clock: clock)
    }

    @Test func addEditDeleteList() throws {
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let client = try device(clock: clock)
        let first = try client.add("first note\nsecond line")
        clock.advance(milliseconds: 1000)
        let second = try client.add("shopping: milk")
        #expect(first.clientID < second.clientID)
        #expect(first.origin == client.origin && second.origin == client.origin)
        #expect(first.isDirty && first.revision == 1 && first.baseText == nil && first.serverID == nil)
        #expect(try client.notes().map(\.id) == [second.id, first.id], "newest first")
        #expect(first.title == "first note")

        clock.advance(milliseconds: 1000)
        let edited = try client.edit(first.id, text: "first note, edited")
        #expect(edited.revision == 2 && edited.isDirty && edited.updatedAt == testEpoch + 2000)
        #expect(try client.notes().map(\.id) == [first.id, second.id])
        let same = try client.edit(first.id, text: "first note, edited")
        #expect(same.revision == 2, "the same text is not an edit")

        let deleted = try client.delete(second.id)
        #expect(deleted.isDeleted)
        #expect(try client.notes().map(\.id) == [first.id])
        #expect(try client.notes(includeDeleted: true).count == 2)
        // Never synced: it stays a local tombstone and is never pushed.
        #expect(!deleted.isDirty)

        let restored = try client.edit(second.id, text: "shopping: milk, eggs")
        #expect(!restored.isDeleted && restored.isDirty)

        let status = try client.status()
        #expect(status.notes == 2 && status.deletedNotes == 0 && status.pending == 2 && status.account == nil)
    }

    @Test(arguments: ["", "   ", "\n\t \n"])
    func emptyNotesAreRefused(text: String) throws {
        let client = try device()
        #expect { try client.add(text) } throws: { ($0 as? NotesError)?.code == .emptyNote }
        let note = try client.add("something")
        #expect { try client.edit(note.id, text: text) } throws: { ($0 as? NotesError)?.code == .emptyNote }
        #expect(try client.note(note.id).text == "something")
    }

    @Test func searchMatchesEveryWordCaseInsensitively() throws {
        let client = try device()
        try client.add("Buy MILK and bread")
        try client.add("milk tea recipe")
        try client.add("Crème brûlée for Ève")
        let gone = try client.add("milk bread deleted")
        try client.delete(gone.id)
        #expect(try client.search(["milk"]).count == 2)
        #expect(try client.search(["bread", "milk"]).map(\.text) == ["Buy MILK and bread"])
        #expect(try client.search(["ÈVE", "crème"]).count == 1)
        #expect(try client.search(["absent"]).isEmpty)
    }

    @Test func idsNeverRepeatAcrossReopenWithTheClockSetBack() async throws {
        try await withTemporaryDirectory { home in
            let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
            var seen = Set<FlakeID>()
            var last: FlakeID?
            let first = try device(seed: 5, home: home, clock: clock)
            for _ in 0..<200 { let note = try first.add("note"); seen.insert(note.clientID); last = note.clientID }
            let mark = try first.status().highWaterMark
            #expect(mark == last, "the high-water mark is persisted with the note")
            let instance = first.flakeInstance
            let origin = first.origin

            // Reopen with the clock a year behind: every new ID is still greater than every old one.
            clock.advance(milliseconds: -365 * 86_400_000)
            let second = try device(seed: 6, home: home, clock: clock)
            #expect(second.flakeInstance == instance && second.origin == origin, "chosen once per installation")
            for _ in 0..<200 {
                let note = try second.add("note")
                #expect(note.clientID > last!)
                #expect(seen.insert(note.clientID).inserted)
                last = note.clientID
            }
            #expect(try second.status().highWaterMark == last)
            #expect(try second.notes().count == 400)
        }
    }

    @Test func twoClientsOnOneDirectoryNeverMintTheSameID() async throws {
        try await withTemporaryDirectory { home in
            let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
            let one = try device(seed: 1, home: home, clock: clock)
            let two = try device(seed: 2, home: home, clock: clock)
            var ids = Set<FlakeID>()
            for index in 0..<100 {
                let note = try (index % 2 == 0 ? one : two).add("note \(index)")
                #expect(ids.insert(note.clientID).inserted)
            }
        }
    }

    @Test func originAndInstanceComeFromTheInjectedGenerator() throws {
        let a = try device(seed: 42)
        let b = try device(seed: 42)
        let c = try device(seed: 43)
        #expect(a.origin == b.origin && a.flakeInstance == b.flakeInstance)
        #expect(a.origin != c.origin)
        #expect((0..<1024).contains(a.flakeInstance))
    }

    @Test func homeThatIsAFileIsAClearError() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("not-a-directory")
            try Data("x".utf8).write(to: file)
            #expect { try device(home: file) } throws: { error in
                let error = error as? NotesError
                return error?.code == .dataDirectory && error?.message.contains("not a directory") == true
            }
            #expect { try device(home: file.appendingPathComponent("below")) } throws: {
                ($0 as? NotesError)?.code == .dataDirectory
            }
        }
    }

    @Test func corruptDatabaseIsAClearError() async throws {
        try await withTemporaryDirectory { home in
            try Data(repeating: 0x42, count: 4096).write(to: home.appendingPathComponent("notes.sqlite"))
            #expect { try device(home: home) } throws: { error in
                let error = error as? NotesError
                return error?.code == .storage && error?.message.contains("not a notes database") == true
            }
        }
    }

    @Test(.enabled(if: getuid() != 0, "root reads any directory"))
    func unreadableHomeIsAClearError() async throws {
        try await withTemporaryDirectory { directory in
            let home = directory.appendingPathComponent("locked")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            chmod(home.path, 0)
            defer { chmod(home.path, 0o700) }
            #expect { try device(home: home) } throws: { ($0 as? NotesError)?.code == .dataDirectory }
        }
    }

    @Test func dataSurvivesReopen() async throws {
        try await withTemporaryDirectory { home in
            let note = try device(home: home).add("kept")
            let reopened = try device(seed: 9, home: home)
            #expect(try reopened.note(note.id) == note)
        }
    }

    @Test func readsTakeNoWriteLockWhileAnotherProcessWrites() async throws {
        try await withTemporaryDirectory { home in
            let client = try device(home: home)
            let note = try client.add("kept")
            // Another process (a `notes sync`, say) holding the write lock: reads must not wait for it (WAL readers
            // never do), which a read that began an IMMEDIATE transaction would, then fail after the busy timeout.
            let other = try DatabaseQueue(path: home.appendingPathComponent("notes.sqlite").path)
            try other.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                defer { try? db.execute(sql: "ROLLBACK") }
                #expect(try client.note(note.id).text == "kept")
                #expect(try client.notes().map(\.id) == [note.id])
            }
        }
    }

    @Test func defaultHomeFollowsTheEnvironment() {
        #expect(NotesClient.defaultHome(environment: ["NOTES_HOME": "/a/b", "HOME": "/h"]).path == "/a/b")
        #expect(NotesClient.defaultHome(environment: ["XDG_DATA_HOME": "/x", "HOME": "/h"]).path == "/x/notes")
        #expect(NotesClient.defaultHome(environment: ["HOME": "/h"]).path == "/h/.local/share/notes")
    }

    @Test func conflictsAndStatusOnAnEmptyStore() throws {
        let client = try device()
        #expect(try client.conflicts().isEmpty)
        let status = try client.status()
        #expect(status.notes == 0 && status.pending == 0 && status.cursor == nil && status.lastSyncAt == nil)
    }

    @Test func syncWhenSignedOutSaysSo() async throws {
        let client = try device()
        try client.add("offline")
        await #expect { try await client.sync() } throws: { ($0 as? NotesError)?.code == .notSignedIn }
    }
}
