import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import NotesClient
import Testing
import TestSupport

@testable import NotesClient

/// Issue 31: tags, pinned and archived notes, and history, synced through the real server code in process.
@Suite("Tags, flags and history sync")
struct TagSyncTests {
    /// The note `note` of one device on another device of the account.
    func same(_ note: LocalNote, on device: NotesClient) throws -> LocalNote {
        try #require(try device.allNotes().first { $0.clientID == note.clientID && $0.origin == note.origin })
    }

    @Test func twoDevicesTaggingOfflineKeepBothChanges() async throws {
        let (server, a, b) = try await aliceOnTwoDevices()
        let note = try a.add("groceries", tags: ["shop", "home"])
        try await a.syncOK()
        try await b.syncOK()
        let onB = try same(note, on: b)
        #expect(onB.tags == ["home", "shop"])

        // Offline: a adds work and takes off shop; b adds Errands and takes off home. Both add urgent.
        try a.tag(note.id, adding: ["work", "Urgent"], removing: ["shop"])
        try b.tag(onB.id, adding: ["Errands", "urgent"], removing: ["home"])
        try await a.syncOK()
        try await b.syncOK()
        try await a.syncOK()
        let expected = ["Errands", "Urgent", "work"]
        #expect(try a.note(note.id).tags == expected, "a tag added on one side and another taken off the other both take effect")
        #expect(try b.note(onB.id).tags == expected, "the same tag added on both is one tag, as the server first had it")
        #expect(try !a.note(note.id).isDirty && !b.note(onB.id).isDirty)
        let viewer = try makeDevice(server.transport, seed: 77)
        try await signIn(viewer, "alice")
        #expect(try viewer.notes().map(\.tags) == [expected])
        try expectTagIndexMatchesNotes(a, b, viewer)
    }

    @Test func aPinAndATextEditMadeConcurrentlyBothSurvive() async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        let note = try a.add("line 1\nline 2")
        try await a.syncOK()
        try await b.syncOK()
        let onB = try same(note, on: b)
        try a.pin(note.id)
        try a.archive(note.id)
        try b.edit(onB.id, text: "line 1\nline 2, edited on b")
        try await a.syncOK()
        try await b.syncOK()
        try await a.syncOK()
        for (device, id) in [(a, note.id), (b, onB.id)] {
            let now = try device.note(id)
            #expect(now.isPinned && now.isArchived && now.text == "line 1\nline 2, edited on b")
        }
        // Pinned first; archived notes out of the listing, in it with --all.
        let other = try a.add("another")
        #expect(try a.listing().notes.map(\.id) == [other.id])
        #expect(try a.listing(ListingFilter(archived: .only)).notes.map(\.id) == [note.id])
        #expect(try a.listing(.all).notes.map(\.id) == [note.id, other.id], "pinned first")
        try a.archive(note.id, false)
        #expect(try a.listing().notes.map(\.id) == [note.id, other.id])
        #expect(try a.recent(limit: 1).listing.notes.map(\.id) == [note.id] && a.recent(limit: 1).total == 2)
    }

    @Test func aConflictCopyKeepsThePushingDevicesTagsAndTheNoteTheMergedOnes() async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        let note = try a.add("title\nbody", tags: ["shared"])
        try await a.syncOK()
        try await b.syncOK()
        let onB = try same(note, on: b)
        try a.edit(note.id, text: "title\nbody by a")
        try a.tag(note.id, adding: ["from-a"])
        try b.edit(onB.id, text: "title\nbody by b")
        try b.tag(onB.id, adding: ["from-b"], removing: ["shared"])
        try b.pin(onB.id)
        try await a.syncOK()
        #expect(try await b.syncOK().conflicts == 1)
        try await a.syncOK()
        let copy = try #require(try b.conflicts().first)
        #expect(copy.text == "title\nbody by b" && copy.tags == ["from-b"] && copy.isPinned)
        for device in [a, b] {
            let merged = try #require(try device.notes().first { $0.clientID == note.clientID })
            #expect(merged.text == "title\nbody by a" && merged.tags == ["from-a", "from-b"] && merged.isPinned)
        }
        #expect(try a.conflicts().first?.tags == ["from-b"])
        try expectTagIndexMatchesNotes(a, b)
    }

    @Test func tagsChangedWhileSignedOutAreSentAtTheNextSignIn() async throws {
        let (server, a, _) = try await aliceOnTwoDevices()
        let note = try a.add("a note")
        try await a.syncOK()
        try await a.signOut()
        try a.tag(note.id, adding: ["offline"])
        try a.pin(note.id)
        try await signIn(a, "alice")
        #expect(try !a.note(note.id).isDirty)
        let viewer = try makeDevice(server.transport, seed: 78)
        try await signIn(viewer, "alice")
        let seen = try #require(try viewer.notes().first)
        #expect(seen.tags == ["offline"] && seen.isPinned)
    }

    @Test func aCopyToAnotherAccountCarriesTagsAndFlags() async throws {
        let (server, a, _) = try await aliceOnTwoDevices()
        try await a.signOut()
        try await signUp(a, "bob", unowned: .keepAside)
        try await a.signOut()
        try await signIn(a, "alice", unowned: .keepAside)
        let note = try a.add("to share", tags: ["Shared"])
        try a.archive(note.id)
        let copy = try a.copy(note.id, to: "bob").note
        #expect(copy.tags == ["Shared"] && copy.isArchived)
        try await a.signOut()
        try await signIn(a, "bob", unowned: .keepAside)
        let viewer = try makeDevice(server.transport, seed: 79)
        try await signIn(viewer, "bob")
        let seen = try #require(try viewer.notes().first)
        #expect(seen.text == "to share" && seen.tags == ["Shared"] && seen.isArchived)
    }

    /// A device holds one note twice, under one key: as a note of no account (kept from a deleted account) and as a
    /// note of the account signed up again, which it tagged. When that account is deleted too, its note meets its
    /// twin of no account: the same text, but other tags and flags, so it is not dropped as a duplicate but becomes a
    /// new note of this device, tags and all.
    @Test func aNoteOfADeletedAccountWithOtherTagsThanItsTwinIsKept() async throws {
        let (_, a, b) = try await aliceOnTwoDevices()
        _ = try a.add("shared")
        try await a.syncOK()
        try await b.syncOK()
        _ = try await b.deleteAccount(password: "correct horse battery")
        try await signUp(b, "alice", unowned: .keepAside)
        try await a.signOut()
        try await signIn(a, "alice", unowned: .carry)
        try await a.syncOK()
        try await b.syncOK()
        let pulled = try #require(try b.notes().first { $0.text == "shared" })
        try b.tag(pulled.id, adding: ["kept"])
        try b.pin(pulled.id)
        _ = try await b.deleteAccount(password: "correct horse battery")
        let notes = try b.allNotes(includingSetAside: true).filter { $0.text == "shared" && !$0.isDeleted }
        #expect(notes.count == 2, "the note of no account, and the tagged one as a new note")
        #expect(notes.contains { $0.tags == ["kept"] && $0.isPinned })
        try expectTagIndexMatchesNotes(b)
    }

    @Test func historyIsFetchedWhenAskedForAndKeptSoAskingAgainIsLocal() async throws {
        let server = try TestServer.make()
        let transport = FaultInjectingTransport(server.transport)
        let a = try makeDevice(transport, seed: 1)
        let b = try makeDevice(server.transport, seed: 2)
        try await signUp(a, "alice")
        try await signIn(b, "alice")
        let note = try a.add("v1", tags: ["one"])
        try await a.syncOK()
        try a.edit(note.id, text: "v2")
        try await a.syncOK()
        try a.tag(note.id, adding: ["two"], removing: ["one"])
        try await a.syncOK()
        let versionsAsked = { transport.requests.filter { $0.path.hasSuffix("/versions") }.count }
        #expect(versionsAsked() == 0, "never during a sync or a sign-in")

        let first = try await a.history(note.id)
        #expect(first.versions.map(\.version) == [1, 2, 3] && first.fetched == 3 && first.askedServer)
        #expect(first.versions.map(\.text) == ["v1", "v2", "v2"])
        #expect(first.versions.map(\.tags) == [["one"], ["one"], ["two"]])
        #expect(first.versions.allSatisfy { $0.device == "device-1" })
        #expect(versionsAsked() == 1)

        let again = try await a.history(note.id)
        #expect(again.versions == first.versions && again.fetched == 0 && !again.askedServer)
        #expect(versionsAsked() == 1, "every version the device knows of is here: no request")

        // b edits; once a has pulled it, only the new version is fetched.
        try await b.syncOK()
        try b.edit(try same(note, on: b).id, text: "v4 from b")
        try await b.syncOK()
        try await a.syncOK()
        let later = try await a.history(note.id)
        #expect(later.versions.map(\.version) == [1, 2, 3, 4] && later.fetched == 1)
        #expect(later.versions.last?.device == "device-2" && later.versions.last?.text == "v4 from b")
        #expect(transport.requests.last { $0.path.hasSuffix("/versions") }?.queryValue(HistoryQuery.after) == "3")

        // Signed out, the versions kept here are shown; a version is read from them.
        try await a.signOut()
        #expect(try await a.history(note.id).versions.count == 4)
        #expect(try await a.version(2, of: note.id).text == "v2")
        await #expect(throws: NotesError.self) { try await a.version(9, of: note.id) }
    }

    @Test func aNoteNeverSyncedHasNoHistory() async throws {
        let (_, a, _) = try await aliceOnTwoDevices()
        let note = try a.add("local only")
        let error = await #expect(throws: NotesError.self) { try await a.history(note.id) }
        #expect(error?.code == .invalidInput)
    }

    @Test func aVersionOfANoteDeletedOnAnotherDeviceIsRestored() async throws {
        let (server, a, _) = try await aliceOnTwoDevices()
        let note = try a.add("first text", tags: ["kept"])
        try a.pin(note.id)
        try await a.syncOK()
        try a.edit(note.id, text: "second text")
        try await a.syncOK()
        try a.delete(note.id)
        try await a.syncOK()

        // A fresh device pulls the note already deleted: it was never in its trash.
        let c = try makeDevice(server.transport, seed: 3)
        try await signIn(c, "alice")
        let tombstone = try #require(try c.notes(includeDeleted: true).first { $0.clientID == note.clientID })
        #expect(try tombstone.isDeleted && c.trash().isEmpty)
        let history = try await c.history(tombstone.id)
        #expect(history.versions.map(\.isDeleted) == [false, false, true])
        await #expect(throws: NotesError.self) { try await c.restore(tombstone.id, version: 3) }

        let restored = try await c.restore(tombstone.id, version: 1)
        #expect(!restored.isDeleted && restored.text == "first text" && restored.tags == ["kept"] && restored.isPinned)
        #expect(restored.isDirty)
        try await c.syncOK()
        try await a.syncOK()
        let back = try a.note(note.id)
        #expect(!back.isDeleted && back.text == "first text" && back.tags == ["kept"] && back.isPinned)
        #expect(try await a.history(note.id).versions.count == 4, "the restore is a version too")
        try expectTagIndexMatchesNotes(a, c)
    }

    @Test func searchFindsNotesByTagAndArchivedNotesToo() throws {
        let client = try makeDevice(TestServer.make().transport, seed: 4)
        let milk = try client.add("buy milk", tags: ["Shop"])
        let bread = try client.add("buy bread", tags: ["shop", "bakery"])
        _ = try client.add("milk for the cat")
        try client.archive(bread.id)
        #expect(try client.search(["tag:shop", "milk"]).map(\.id) == [milk.id])
        #expect(Set(try client.search(["tag:SHOP"]).map(\.id)) == [milk.id, bread.id], "archived notes are searched")
        #expect(try client.search(["tag:shop", "tag:bakery"]).map(\.id) == [bread.id])
        #expect(try client.search(["tag:none"]).isEmpty)
        #expect(try client.search(["milk"]).count == 2)
        #expect(try client.tagCounts() == [TagCount(name: "bakery", notes: 1), TagCount(name: "Shop", notes: 2)])
        try client.delete(milk.id)
        #expect(try client.tagCounts() == [TagCount(name: "bakery", notes: 1), TagCount(name: "shop", notes: 1)])
        #expect(try client.listing(ListingFilter(archived: .included, tags: ["SHOP"])).notes.map(\.id) == [bread.id])
        try expectTagIndexMatchesNotes(client)
    }

    /// Pulled notes with tags cost at most one statement more each (the `note_tags` rows of a note, in one
    /// statement); notes without tags none (`SignInBudgetTests`).
    @Test func aPulledNoteWithTagsCostsOneStatementMore() async throws {
        let server = try TestServer.make()
        let api = APIClient(transport: server.transport)
        let count = 500
        var costs: [Int] = []
        for (index, tags) in [[String](), ["alpha", "Beta", "gamma"]].enumerated() {
            let username = "budget\(index)"
            _ = try await api.signUp(username, "correct horse battery")
            let filler = try await api.signIn(username, "correct horse battery", device: "filler", origin: id(91))
            var batch: [NoteChange] = []
            for n in 1...count {
                var change = TestSupport.change(Int64(1_000 + n), origin: 91, edit: Int64(1_000 + n), text: "note \(n)")
                change.tags = tags
                batch.append(change)
            }
            _ = try await api.push(filler.token, batch)
            var environment = NotesEnvironment(
                clock: ManualFlakeClock(unixMilliseconds: testEpoch), random: SplitMix64(seed: 30 + UInt64(index)),
                transport: NotesEnvironment.fixed(server.transport), sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3),
                deviceName: "budget")
            environment.countsStoreActivity = true
            let device = try NotesClient.inMemory(environment: environment)
            let before = try #require(try device.storeActivity())
            try await signIn(device, username, unowned: .keepAside)
            costs.append(try #require(try device.storeActivity()).since(before).statements)
            #expect(try device.notes().allSatisfy { $0.tags == Tags.canonical(tags) })
            #expect(try device.tagCounts().map(\.notes) == (tags.isEmpty ? [] : [count, count, count]))
        }
        print("a first sign-in of \(count) notes: \(costs[0]) statements without tags, \(costs[1]) with three each")
        #expect(costs[1] - costs[0] <= count + 10)
    }
}
