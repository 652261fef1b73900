import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import Testing
import TestSupport

@testable import NotesClient

/// The `v-tags-flags-history` migration on a store written by the client released before issue 31, synced with the
/// daemon's store of the same release (both built by Tests/Fixtures/tags-migration/make-fixtures.sh): every note
/// has no tags and no flags, and their bases are those (the state the server's notes have after its own
/// migration); the snapshot in flight is sent again as it was, without the new fields; then tags sync.
@Suite struct TagsMigrationTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/tags-migration", isDirectory: true)

    @Test func aStoreOfThePreviousReleaseMigratesAndSyncsTagsWithTheMigratedServer() async throws {
        try await withTemporaryDirectory("tags-migration") { work in
            let home = work.appendingPathComponent("home", isDirectory: true)
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent("device.sqlite"), to: home.appendingPathComponent("notes.sqlite"))
            let serverFile = work.appendingPathComponent("notesyncd.sqlite")
            try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent("server.sqlite"), to: serverFile)
            let store = try SQLiteNoteStore(path: serverFile.path)
            let server = try InProcessServer(store: store, instance: 0, after: try await store.largestIssuedID(), logger: quietLogger)
            let transport = FaultInjectingTransport(server.transport)
            let device = try makeDevice(transport, seed: 9, home: home)

            // Migrated: no tags, no flags, and bases to match; the tag index is empty; the snapshot has no tags.
            let notes = try device.allNotes()
            #expect(notes.count == 6)
            #expect(notes.allSatisfy { $0.tags.isEmpty && !$0.isPinned && !$0.isArchived })
            #expect(notes.allSatisfy { $0.baseTags.isEmpty && !$0.basePinned && !$0.baseArchived })
            #expect(try device.tagCounts().isEmpty)
            let inFlight = try device.store.read { tx in try tx.outbox() }
            #expect(inFlight.count == 1 && inFlight[0].text == "in flight")
            #expect(inFlight[0].tagsAndFlags == nil && inFlight[0].baseTagsAndFlags == nil)
            #expect(try device.account()?.username == "alice")

            let report = try await device.syncOK()
            #expect(report.pushed == 4 && report.refused.isEmpty)
            let pushes = transport.requests.filter { $0.path == Endpoint.push.path }
            let firstPush = try #require(pushes.first?.body)
            let sent = try JSONDecoder().decode(PushRequest.self, from: firstPush).changes
            let again = try #require(sent.first { $0.editID == inFlight[0].editID }, "the snapshot is sent again with its edit ID")
            #expect(again.tags == nil && again.pinned == nil && again.baseTags == nil, "as it was taken: without tags")
            #expect(sent.filter { $0.editID != inFlight[0].editID }.allSatisfy { $0.tags == [] && $0.baseTags == [] })
            #expect(try device.status().pending == 0)

            // Tags and flags sync from here on.
            let synced = try #require(try device.notes().first { $0.text == "synced" })
            try device.tag(synced.id, adding: ["migrated"])
            try device.pin(synced.id)
            try await device.syncOK()
            let viewer = try makeDevice(server.transport, seed: 10)
            try await signIn(viewer, "alice")
            #expect(try viewer.texts() == ["in flight", "never synced", "synced", "synced, then edited here"])
            let seen = try #require(try viewer.notes().first { $0.text == "synced" })
            #expect(seen.tags == ["migrated"] && seen.isPinned)
            try expectTagIndexMatchesNotes(device, viewer)
        }
    }
}
