import Foundation
import GRDB
import MiniFlake
import NoteMerge
import NoteSyncProtocol
import NoteSyncServer
@testable import NotesClient
import Testing
import TestSupport

/// The everyday client: byte-exact texts, the server's limits, edit times, conflicts, the trash, search, export and
/// import, against the real server library in process.
@Suite("Daily client")
struct DailyTests {
    // MARK: - Input fidelity

    /// A NUL in a note survives the local store, a sync and a pull onto another device, byte for byte.
    @Test func textsKeepEveryByteThroughTheStoreAndASync() async throws {
        let server = try TestServer.make()
        try await withTemporaryDirectory("nul") { home in
            let a = try makeDevice(server.transport, seed: 1, home: home)
            let text = "before\u{0}after\nsecond \u{0} line é"
            let note = try a.add(text)
            #expect(Array(try a.note(note.id).text.utf8) == Array(text.utf8))
            // Reopened from disk.
            let reopened = try makeDevice(server.transport, seed: 1, home: home)
            #expect(Array(try reopened.note(note.id).text.utf8) == Array(text.utf8))
            try await signUp(reopened, "alice")
            let b = try makeDevice(server.transport, seed: 2)
            try await signIn(b, "alice")
            #expect(try b.notes().map { Array($0.text.utf8) } == [Array(text.utf8)])
            // An edit from the other side comes back exactly too, and is found by search.
            let onB = try #require(try b.notes().first)
            try b.edit(onB.id, text: text + "\u{0}more")
            try await b.syncOK()
            try await reopened.syncOK()
            #expect(Array(try reopened.note(note.id).text.utf8) == Array((text + "\u{0}more").utf8))
            #expect(try reopened.note(note.id).isDirty == false)
            #expect(try reopened.search(["after"]).map(\.id) == [note.id])
        }
    }

    /// A store written before texts became bytes is migrated: its texts read back the same (NUL-free, as they
    /// were), and a text equal to its base still compares equal in SQL.
    @Test func textsOfAnOlderStoreAreMigrated() throws {
        try withTemporaryDirectorySync { home in
            let path = home.appendingPathComponent("notes.sqlite").path
            let queue = try DatabaseQueue(path: path)
            try LocalStore.migrator.migrate(queue, upTo: "v2-account-bases")
            try queue.write { db in
                try db.execute(sql: "INSERT INTO settings (id, origin, flake_instance) VALUES (1, 77, 5)")
                try db.execute(
                    sql: """
                        INSERT INTO notes (client_id, origin, text, base_text, created_at, updated_at)
                        VALUES (1, 77, 'plain text é', 'plain text é', 1, 1), (2, 77, '', '', 1, 1)
                        """)
            }
            try queue.close()
            let client = try makeDevice(NoNetwork(), seed: 1, home: home)
            #expect(try client.notes(includeDeleted: true).map(\.text).sorted() == ["", "plain text é"])
            let check = try DatabaseQueue(path: path)
            let (types, same, hits) = try check.read { db throws in
                (
                    try String.fetchAll(db, sql: "SELECT typeof(text) FROM notes ORDER BY id"),
                    try Bool.fetchAll(db, sql: "SELECT text IS base_text FROM notes"),
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notes_search WHERE notes_search MATCH 'plain'")
                )
            }
            #expect(types == ["blob", "text"])
            #expect(same == [true, true])
            #expect(hits == 1)
            try check.close()
        }
    }

    @Test(arguments: [
        ([0x61, 0xFF], 1), ([0xC3, 0x28], 0), ([0x61, 0x62, 0xE2, 0x82], 2), ([0xED, 0xA0, 0x80], 0), ([0xC0, 0x80], 0),
        ([0xF4, 0x90, 0x80, 0x80], 0), ([0x68, 0xC3, 0xA9, 0x00, 0xF0, 0x9F, 0x98, 0x80, 0x80], 8),
    ] as [([UInt8], Int)])
    func invalidUTF8IsRefusedWithItsOffset(bytes: [UInt8], offset: Int) {
        #expect(TextInput.firstInvalidOffset(bytes) == offset)
        #expect { try TextInput.decode(bytes, source: "Standard input") } throws: { error in
            let error = error as? NotesError
            return error?.code == .invalidText && error?.message.contains("byte offset \(offset)") == true
        }
    }

    @Test func validUTF8IsKeptAsItIs() throws {
        for seed in propertySeeds(100) {
            var rng = SplitMix64(seed: seed)
            let scalars = (0..<Int(rng.next() % 40)).compactMap { _ -> Unicode.Scalar? in
                let ranges: [ClosedRange<UInt32>] = [0...0x7F, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF, 0x10000...0x10FFFF]
                let range = ranges[Int(rng.next() % UInt64(ranges.count))]
                return Unicode.Scalar(range.lowerBound + UInt32(rng.next() % UInt64(range.count)))
            }
            var text = ""
            text.unicodeScalars.append(contentsOf: scalars)
            #expect(TextInput.firstInvalidOffset(Array(text.utf8)) == nil, "seed \(seed)")
            #expect(try TextInput.decode(Array(text.utf8), source: "x") == text, "seed \(seed)")
        }
    }

    // MARK: - The server's limits

    /// After a sync the server's limits are known: a note over them is refused when written, not accepted and
    /// then forgotten; a note refused before (a limit lowered later) is reported by every sync until edited.
    @Test func notesTooLargeForTheServerAreRefusedWhenWrittenAndReportedUntilEdited() async throws {
        let server = try TestServer.make(limits: SyncLimits(maxNoteBytes: 100))
        let transport = FaultInjectingTransport(server.transport)
        let a = try makeDevice(transport, seed: 1)
        let early = try a.add(String(repeating: "e", count: 150))  // before any sync: the limit is not known yet
        try await signUp(a, "alice")
        #expect(try a.note(early.id).pushError?.code == "note_too_large")
        #expect { try a.add(String(repeating: "x", count: 101)) } throws: { ($0 as? NotesError)?.code == .invalidText }
        let small = try a.add("small")
        #expect { try a.edit(small.id, text: String(repeating: "y", count: 200)) } throws: {
            ($0 as? NotesError)?.message.contains("at most 100 bytes") == true
        }
        #expect(try a.note(small.id).text == "small")
        // Every later sync still names the refused note.
        for _ in 0..<2 {
            let report = try await a.syncOK()
            #expect(report.refused.map(\.noteID) == [early.id])
        }
        try a.edit(early.id, text: "now it fits")
        let fixed = try await a.syncOK()
        #expect(fixed.refused.isEmpty && fixed.created == 1)
    }

    // MARK: - Edit times

    /// Every device shows the time a note was edited on the device that edited it, not when it arrived.
    @Test func editTimesAreTheSameOnEveryDevice() async throws {
        let server = try TestServer.make()
        let clockA = ManualFlakeClock(unixMilliseconds: testEpoch)
        let clockB = ManualFlakeClock(unixMilliseconds: testEpoch + 3_600_000)
        let a = try makeDevice(server.transport, seed: 1, clock: clockA)
        let b = try makeDevice(server.transport, seed: 2, clock: clockB)
        try await signUp(a, "alice")
        let first = try a.add("first")
        clockA.advance(milliseconds: 60_000)
        let second = try a.add("second")
        try await a.syncOK()
        clockB.advance(milliseconds: 600_000)
        try await signIn(b, "alice")  // a new device, an hour and more later
        let onB = Dictionary(uniqueKeysWithValues: try b.notes().map { ($0.clientID, $0.updatedAt) })
        #expect(onB[first.clientID] == first.updatedAt && onB[second.clientID] == second.updatedAt)
        #expect(try b.notes().map(\.clientID) == [second.clientID, first.clientID], "the same order as on a")

        // An edit on b carries b's time to a.
        let secondOnB = try #require(try b.notes().first { $0.clientID == second.clientID })
        clockB.advance(milliseconds: 5_000)
        let edited = try b.edit(secondOnB.id, text: "second, edited on b")
        try await b.syncOK()
        clockA.advance(milliseconds: 999_999)
        try await a.syncOK()
        #expect(try a.note(second.id).updatedAt == edited.updatedAt)
    }

    // MARK: - Conflicts

    /// An overlapping edit: the device that pushed second gets its text back as a copy marked as its own; the other
    /// device receives the copy marked as another device's; resolving deletes the copy everywhere.
    @Test func conflictsSayWhoseTextTheCopyHoldsAndResolve() async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        let note = try a.add("title\nline")
        try await a.syncOK()
        try await b.syncOK()
        let onB = try #require(try b.notes().first)
        try a.edit(note.id, text: "title\nline from a")
        try b.edit(onB.id, text: "title\nline from b")
        try await a.syncOK()
        let report = try await b.syncOK()
        #expect(report.conflictNotes == [onB.id])
        let copyOnB = try #require(try b.conflicts().first)
        #expect(copyOnB.isConflictFromThisDevice && copyOnB.text == "title\nline from b")
        #expect(try b.original(ofConflictCopy: copyOnB)?.id == onB.id)
        let pulled = try await a.syncOK()
        #expect(pulled.pulledConflictCopies == 1)
        let copyOnA = try #require(try a.conflicts().first)
        #expect(!copyOnA.isConflictFromThisDevice)

        // The diff shows the two lines that differ.
        #expect(LineDiff.lines(from: try a.note(note.id).text, to: copyOnA.text) == [.same("title"), .removed("line from a"), .added("line from b")])

        // A merge in the editor: the draft marks the stretch, the result becomes the note and the copy goes.
        let draft = LineDiff.mergeDraft(try a.note(note.id).text, copyOnA.text, oldLabel: "note", newLabel: "copy")
        #expect(draft == "title\n<<<<<<< note\nline from a\n=======\nline from b\n>>>>>>> copy\n")
        #expect(LineDiff.hasConflictMarkers(draft))
        let merged = try a.resolveConflict(copy: copyOnA.id, .merged("title\nline from a and b"))
        #expect(merged?.text == "title\nline from a and b")
        #expect(try a.conflicts().isEmpty && a.note(copyOnA.id).isDeleted)
        try await a.syncOK()
        try await b.syncOK()
        #expect(try b.conflicts().isEmpty)
        #expect(try b.texts() == ["title\nline from a and b"])
    }

    @Test(arguments: [NotesClient.ConflictResolution.keepNote, .keepCopy, .keepBoth])
    func everyResolutionRemovesTheCopy(resolution: NotesClient.ConflictResolution) async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        let note = try a.add("x")
        try await a.syncOK()
        try await b.syncOK()
        try a.edit(note.id, text: "from a")
        try b.edit(try #require(try b.notes().first).id, text: "from b")
        try await a.syncOK()
        try await b.syncOK()
        let copy = try #require(try b.conflicts().first)
        try b.resolveConflict(copy: copy.id, resolution)
        try await b.syncOK()
        try await a.syncOK()
        let expected: [String] =
            switch resolution {
            case .keepNote: ["from a"]
            case .keepCopy: ["from b"]
            default: ["from a", "from b"]
            }
        #expect(try a.texts() == expected && b.texts() == expected)
        #expect(try a.conflicts().isEmpty && b.conflicts().isEmpty)
        #expect { try b.resolveConflict(copy: copy.id, .keepNote) } throws: { ($0 as? NotesError)?.code == .invalidInput }
    }

    /// A delete undone by another device's concurrent edit is named by the sync.
    @Test func aDeleteUndoneByAnotherDevicesEditIsReported() async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        let note = try a.add("contested")
        try await a.syncOK()
        try await b.syncOK()
        try b.edit(try #require(try b.notes().first).id, text: "contested, edited")
        try await b.syncOK()
        try a.delete(note.id)
        let report = try await a.syncOK()
        #expect(report.undeleted == [note.id] && report.kept == 1)
        #expect(try a.note(note.id).isDeleted == false)

        // Deleted here and synced, then edited on the other device with an older base: it comes back, and the pull says so.
        try a.delete(note.id)
        try await a.syncOK()
        let onB = try #require(try b.notes().first)
        try b.edit(onB.id, text: "still wanted")
        let bReport = try await b.syncOK()
        #expect(bReport.pushed == 1)
        let back = try await a.syncOK()
        #expect(back.undeleted == [note.id])
    }

    // MARK: - Trash

    @Test func deletedNotesCanBeRestoredFromTheTrashAfterASync() async throws {
        let server = try TestServer.make()
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let a = try makeDevice(server.transport, seed: 1, clock: clock)
        let b = try makeDevice(server.transport, seed: 2)
        try await signUp(a, "alice")
        try await signIn(b, "alice")
        let keep = try a.add("to restore\nwith two lines")
        let local = try a.add("never synced, deleted")
        try await a.syncOK()
        try await b.syncOK()
        try a.delete(keep.id)
        try await a.syncOK()
        #expect(try a.note(keep.id).text == "", "a synced tombstone has no text")
        try a.delete(local.id)
        #expect(try a.trash().map(\.note.id).sorted() == [keep.id, local.id].sorted())
        #expect(try a.trash().first { $0.note.id == keep.id }?.text == "to restore\nwith two lines")
        // The other device's trash has it too (the delete arrived by pull).
        try await b.syncOK()
        #expect(try b.trash().map(\.text).contains("to restore\nwith two lines"))

        try a.restore(keep.id)
        #expect(try a.trash().map(\.note.id) == [local.id])
        try await a.syncOK()
        try await b.syncOK()
        #expect(try b.texts() == ["never synced, deleted", "to restore\nwith two lines"].filter { $0.hasPrefix("to") })
        #expect { try a.restore(keep.id) } throws: { ($0 as? NotesError)?.code == .invalidInput }

        // Thirty days later the trash has forgotten the rest.
        clock.advance(milliseconds: Int64(NotesClient.trashDays) * 86_400_000 + 1)
        #expect(try a.trash().isEmpty)
    }

    // MARK: - Search

    @Test func searchIsRankedAndKeptInStepWithEveryChange() async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        let once = try a.add("Shopping\nbuy zebra food once")
        let often = try a.add("Zebra zebra ZEBRA\nall about zebras: zebra")
        try a.add("nothing here")
        let results = try a.search(["zebra"], limit: nil)
        #expect(results.hits.map(\.note.id) == [often.id, once.id], "more matches in a shorter note rank first")
        #expect(results.hits[1].matchingLine == "buy \(SearchHit.markStart)zebra\(SearchHit.markEnd) food once")
        #expect(try a.search(["zeb*"], limit: 1).total == 2)
        #expect(try a.search(["ZÉBRA", "shopping"]).map(\.id) == [once.id], "every word, any case and accent")
        #expect(try a.search(["\"", "*", "AND"]).isEmpty)
        #expect(SearchQuery.fts5(["-", "**"]) == nil)

        // Edits, deletes, and changes arriving by pull keep the index in step.
        try a.edit(once.id, text: "Shopping\nbuy lion food")
        #expect(try a.search(["zebra"]).map(\.id) == [often.id])
        #expect(try a.search(["lion"]).map(\.id) == [once.id])
        try a.delete(often.id)
        #expect(try a.search(["zebra"]).isEmpty)
        try await a.syncOK()
        try await b.syncOK()
        #expect(try b.search(["lion"]).map(\.text) == ["Shopping\nbuy lion food"])
        let onB = try #require(try b.notes().first { $0.text.contains("lion") })
        try b.edit(onB.id, text: "Shopping\nbuy tiger food")
        try await b.syncOK()
        try await a.syncOK()
        #expect(try a.search(["lion"]).isEmpty && a.search(["tiger"]).map(\.id) == [once.id])
    }

    // MARK: - Export and import

    /// A JSON export imported on a fresh device of the same account (before signing in) makes no duplicate, and
    /// plain files imported twice are added once.
    @Test func exportAndImportMakeNoDuplicates() async throws {
        let server = try TestServer.make()
        let a = try makeDevice(server.transport, seed: 1)
        try await signUp(a, "alice")
        try a.add("synced one")
        try await a.syncOK()
        try a.add("not synced yet")
        let export = try a.export()
        #expect(export.notes.count == 2 && export.notes.filter { $0.pending == true }.count == 1)
        let data = try JSONEncoder().encode(export)
        let decoded = try JSONDecoder().decode(NotesExport.self, from: data)

        let fresh = try makeDevice(server.transport, seed: 2)
        let report = try fresh.importNotes([.export(decoded)])
        #expect(report.added == 2)
        #expect(try fresh.importNotes([.export(decoded)]).alreadyHere == 2)
        try await signIn(fresh, "alice")
        try await a.syncOK()
        try await fresh.syncOK()
        #expect(try fresh.texts() == ["not synced yet", "synced one"])
        #expect(try await serverTexts(server, "alice") == ["not synced yet", "synced one"], "no duplicate on the server")

        // Plain texts: the same text twice (trailing newlines aside) is one note.
        let texts: [ImportItem] = [.text("# Title\nbody\n", source: "a.md"), .text("# Title\nbody", source: "b.md"), .text("\n\n", source: "c.txt")]
        let first = try fresh.importNotes(texts)
        #expect(first.added == 1 && first.sameText == 1 && first.empty == 1)
        #expect(try fresh.importNotes(texts).added == 0)

        // This device's own export, imported after a wipe: the generator never mints those IDs again.
        try await fresh.syncOK()
        try await a.syncOK()
        let own = try a.export()
        try await a.signOut(wipe: true)
        #expect(try a.importNotes([.export(own)]).added == 3)
        let next = try a.add("after the import")
        #expect(own.notes.allSatisfy { $0.clientID < next.clientID || $0.origin != next.origin })
    }
}

/// Runs `body` with a temporary directory, removed afterwards (synchronous tests).
func withTemporaryDirectorySync(_ body: (URL) throws -> Void) throws {
    let directory = try makeTemporaryDirectory("client")
    defer { try? FileManager.default.removeItem(at: directory) }
    try body(directory)
}
