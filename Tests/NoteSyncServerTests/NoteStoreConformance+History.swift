import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Tags, flags and the history (issue 31), checked on every store by the conformance suite.
extension NoteStoreConformance {
    static func context(now: Int64 = testEpoch, device: String?, quota: AccountQuota = .default) -> PushContext {
        PushContext(limits: SyncLimits(), now: now, quota: quota, device: device, mintID: { minter.mint() })
    }

    static func page(_ store: any NoteStore, _ account: FlakeID, _ note: FlakeID, after: Int64 = 0, size: Int = 100, bytes: Int = 1 << 20)
        async throws -> VersionPage?
    {
        try await store.versions(accountID: account, query: HistoryPlanner.Query(serverID: note, after: after, pageSize: size, maxBytes: bytes))
    }

    static let historyChecks: [Check] = [
        Check(name: "tags and flags: stored, merged, pulled, and replayed with the answer's") { store in
            let alice = try await makeAccount(store, "alice")
            let created = try await store.push(
                accountID: alice, changes: [tagged(1, edit: 1, text: "a\n", tags: ["work", "Zed", "日本", "a/b"], pinned: true)],
                context: context())
            let note = try #require(created[0].serverID)
            var stored = try #require(try await everything(store, alice).first)
            #expect(stored.tags == ["a/b", "work", "Zed", "日本"] && stored.pinned && !stored.archived)
            #expect(stored.record.tags == ["a/b", "work", "Zed", "日本"] && stored.record.pinned == true && stored.record.archived == false)
            // Another device that last synced version 1 removes "work" and archives; the merge keeps the rest.
            let merged = try await store.push(
                accountID: alice,
                changes: [tagged(1, server: note, edit: 2, text: "a\n", baseVersion: 1, tags: ["a/b", "Zed", "日本", "new"], baseTags: ["a/b", "work", "Zed", "日本"], archived: true, baseArchived: false)],
                context: context())
            #expect(merged[0].status == .updated && merged[0].version == 2)
            stored = try #require(try await everything(store, alice).first)
            #expect(stored.tags == ["a/b", "new", "Zed", "日本"] && stored.pinned && stored.archived)
            // An answer with an empty set of tags and a false pin is kept as such (not as "none"), and replayed so.
            let emptied = try await store.push(
                accountID: alice,
                changes: [tagged(1, server: note, edit: 3, text: "a\n", baseVersion: 1, tags: ["work"], baseTags: ["work", "a/b", "Zed", "日本"], pinned: true, basePinned: true)],
                context: context())
            #expect(emptied[0].status == .updated && emptied[0].tags == ["new"])
            let cleared = try await store.push(
                accountID: alice,
                changes: [tagged(1, server: note, edit: 4, text: "a\n", baseVersion: 3, tags: ["x"], baseTags: ["x", "new"], pinned: true, basePinned: false)],
                context: context())
            // "new" is removed, "x" was never on the note: no tags; the pin wins.
            #expect(cleared[0].status == .updated && cleared[0].tags == [] && cleared[0].pinned == nil)
            let unpinned = try await store.push(
                accountID: alice, changes: [tagged(1, server: note, edit: 5, text: "a\n", baseVersion: 4, pinned: true, basePinned: true, archived: false, baseArchived: true)],
                context: context())
            #expect(unpinned[0].status == .updated && unpinned[0].pinned == nil && unpinned[0].archived == nil)
            _ = try await store.push(accountID: alice, changes: [tagged(1, server: note, edit: 6, text: "b\n", baseVersion: 5, tags: ["later"], pinned: false)], context: context())
            for (edit, expected) in [(3, emptied[0]), (4, cleared[0])] {
                let original = [3: tagged(1, server: note, edit: 3, text: "a\n", baseVersion: 1, tags: ["work"], baseTags: ["work", "a/b", "Zed", "日本"], pinned: true, basePinned: true),
                                4: tagged(1, server: note, edit: 4, text: "a\n", baseVersion: 3, tags: ["x"], baseTags: ["x", "new"], pinned: true, basePinned: false)][edit]!
                let replay = try await store.push(accountID: alice, changes: [original], context: context())
                var answer = expected
                answer.replayed = true
                #expect(replay[0] == answer, "edit \(edit)")
            }
            // A flag answered false is kept as false.
            let falsePin = try await store.push(
                accountID: alice, changes: [tagged(1, server: note, edit: 7, text: "b\n", baseVersion: 1, baseText: "b\n", pinned: true, basePinned: false, archived: true, baseArchived: true)],
                context: context())
            #expect(falsePin[0].pinned == nil && falsePin[0].archived == false)
            let falseReplay = try await store.push(
                accountID: alice, changes: [tagged(1, server: note, edit: 7, text: "b\n", baseVersion: 1, baseText: "b\n", pinned: true, basePinned: false, archived: true, baseArchived: true)],
                context: context())
            #expect(falseReplay[0].replayed && falseReplay[0].archived == false && falseReplay[0].pinned == nil)
            if let operators = store as? any OperatorStore { #expect(try await operators.checkInvariants() == []) }
        },
        Check(name: "history: every accepted version, oldest first, paged by count and bytes, tombstones included") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            let created = try await store.push(
                accountID: alice, changes: [tagged(1, edit: 1, text: "one\n", tags: ["work"])], context: context(now: testEpoch, device: "laptop"))
            let note = try #require(created[0].serverID)
            let texts = ["one\n", "two\u{0}\n", String(repeating: "é", count: 300), "four\n"]
            for (index, text) in texts.enumerated().dropFirst() {
                _ = try await store.push(
                    accountID: alice, changes: [change(1, server: note, edit: 1 + Int64(index), text: text, baseVersion: Int64(index))],
                    context: context(now: testEpoch + Int64(index), device: index == 2 ? nil : "phone"))
            }
            _ = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 9, text: "", deleted: true, baseVersion: 4)],
                context: context(now: testEpoch + 9, device: "phone"))
            // Unchanged and rejected changes keep nothing.
            _ = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 10, text: "", deleted: true, baseVersion: 5), change(1, server: note, edit: 11, text: "x", baseVersion: 9)],
                context: context(now: testEpoch + 10, device: "phone"))

            let all = try #require(try await page(store, alice, note))
            #expect(!all.hasMore)
            #expect(all.versions.map(\.version) == [1, 2, 3, 4, 5])
            #expect(all.versions.map { Array($0.text.utf8) } == (texts + [""]).map { Array($0.utf8) }, "texts byte for byte, NUL included")
            #expect(all.versions.map(\.deleted) == [false, false, false, false, true])
            #expect(all.versions.map(\.device) == ["laptop", "phone", nil, "phone", "phone"])
            #expect(all.versions.map(\.savedAt) == [testEpoch, testEpoch + 1, testEpoch + 2, testEpoch + 3, testEpoch + 9])
            #expect(all.versions.allSatisfy { $0.tags == ["work"] && $0.accountID == alice && $0.serverID == note })
            #expect(try await store.usage(accountID: alice)?.historyBytes == Int64(texts.reduce(0) { $0 + $1.utf8.count }))

            // By count: two, two, one.
            let first = try #require(try await page(store, alice, note, size: 2))
            #expect(first.versions.map(\.version) == [1, 2] && first.hasMore)
            let second = try #require(try await page(store, alice, note, after: 2, size: 2))
            #expect(second.versions.map(\.version) == [3, 4] && second.hasMore)
            let last = try #require(try await page(store, alice, note, after: 4, size: 2))
            #expect(last.versions.map(\.version) == [5] && !last.hasMore)
            #expect(try await page(store, alice, note, after: 5)?.versions == [])
            #expect(try await page(store, alice, note, after: .max)?.versions == [])
            // By bytes: the page ends after the version that reaches the bound (version 3 holds 600 bytes).
            let bounded = try #require(try await page(store, alice, note, bytes: 10))
            #expect(bounded.versions.map(\.version) == [1, 2, 3] && bounded.hasMore)
            let big = try #require(try await page(store, alice, note, after: 2, bytes: 10))
            #expect(big.versions.map(\.version) == [3] && big.hasMore, "at least one version, whatever its size")

            // Only the account's own notes: another account's, or an unknown ID, is no note.
            #expect(try await page(store, bob, note) == nil)
            #expect(try await page(store, alice, id(424242)) == nil)
            let bobs = try await store.push(accountID: bob, changes: [change(1, edit: 1, text: "bob\n")], context: context())
            #expect(try await page(store, alice, try #require(bobs[0].serverID)) == nil)
            #expect(try await page(store, bob, try #require(bobs[0].serverID))?.versions.count == 1)
            if let operators = store as? any OperatorStore {
                #expect(try await operators.checkInvariants() == [])
                let statistics = try await operators.statistics()
                #expect(statistics.noteVersions == 6 && statistics.historyBytes == Int64(texts.reduce(0) { $0 + $1.utf8.count }) + 4)
            }
        },
        Check(name: "history: a conflict keeps the copy's version and the note's, a batch every version it wrote") { store in
            let alice = try await makeAccount(store, "alice")
            let batch = try await store.push(
                accountID: alice,
                changes: [change(1, edit: 1, text: "a\nb\nc\n"), change(1, edit: 2, text: "a\nX\nc\n", baseVersion: 1, baseText: "a\nb\nc\n")],
                context: context())
            let note = try #require(batch[0].serverID)
            #expect(try await page(store, alice, note)?.versions.map(\.text) == ["a\nb\nc\n", "a\nX\nc\n"])
            let conflict = try await store.push(
                accountID: alice, changes: [tagged(1, server: note, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n", tags: ["mine"])],
                context: context())
            #expect(conflict[0].status == .conflict && conflict[0].tags == nil, "the note took the pushed tags")
            let copy = try #require(conflict[0].conflict?.serverID)
            #expect(try await page(store, alice, copy)?.versions.map(\.text) == ["a\nY\nc\n"])
            #expect(try await page(store, alice, copy)?.versions.first?.tags == ["mine"])
            let versions = try #require(try await page(store, alice, note)?.versions)
            #expect(versions.map(\.version) == [1, 2, 3] && versions.last?.text == "a\nX\nc\n" && versions.last?.tags == ["mine"])
        },
        Check(name: "history: pruning keeps each note's newest version and gives the bytes back") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            var notes: [FlakeID] = []
            for account in [alice, bob] {
                let created = try await store.push(accountID: account, changes: [change(1, edit: 1, text: "12345")], context: context(now: 1_000))
                let note = try #require(created[0].serverID)
                notes.append(note)
                _ = try await store.push(accountID: account, changes: [change(1, server: note, edit: 2, text: "123", baseVersion: 1)], context: context(now: 2_000))
                _ = try await store.push(accountID: account, changes: [change(1, server: note, edit: 3, text: "1", baseVersion: 2)], context: context(now: 9_000))
            }
            // Alice's second note was written once, long ago: its only version is its newest, and stays.
            let lonely = try await store.push(accountID: alice, changes: [change(2, edit: 4, text: "old")], context: context(now: 500))
            let lonelyNote = try #require(lonely[0].serverID)
            #expect(try await store.usage(accountID: alice)?.historyBytes == 12)
            #expect(try await store.pruneHistory(savedBefore: 5_000) == 4)
            #expect(try await page(store, alice, notes[0])?.versions.map(\.version) == [3])
            #expect(try await page(store, bob, notes[1])?.versions.map(\.version) == [3])
            #expect(try await page(store, alice, lonelyNote)?.versions.map(\.text) == ["old"])
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 2, textBytes: 4, historyBytes: 4))
            #expect(try await store.usage(accountID: bob) == AccountUsage(noteCount: 1, textBytes: 1, historyBytes: 1))
            #expect(try await store.pruneHistory(savedBefore: 100_000) == 0, "nothing but newest versions left")
            if let operators = store as? any OperatorStore { #expect(try await operators.checkInvariants() == []) }
        },
        Check(name: "history: deleting the account deletes its history") { store in
            let alice = try await makeAccount(store, "alice")
            let created = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: "a")], context: context())
            let note = try #require(created[0].serverID)
            #expect(try await store.deleteAccount(id: alice))
            #expect(try await page(store, alice, note) == nil)
            if let operators = store as? any OperatorStore {
                #expect(try await operators.statistics().noteVersions == 0)
                #expect(try await operators.checkInvariants() == [])
            }
        },
        Check(name: "operators: check verifies the history") { store in
            let operators = try operatorStore(store)
            let alice = try await makeAccount(store, "alice")
            let created = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: "é\n")], context: context())
            let note = try #require(created[0].serverID)
            #expect(try await operators.checkInvariants() == [])
            try await corrupt(store, "UPDATE accounts SET history_bytes = history_bytes + 1 WHERE id = \(alice.rawValue)")
            try await corrupt(store, "UPDATE note_versions SET version = 7 WHERE server_id = \(note.rawValue)")
            try await corrupt(store, "UPDATE notes SET deleted = \(store is SQLiteNoteStore ? "1" : "TRUE") WHERE server_id = \(note.rawValue)")
            let problems = try await operators.checkInvariants()
            #expect(problems.contains("history running total: account \(alice): 4 history bytes counted, 3 stored"))
            #expect(problems.contains("orphan version: version 7 of note \(note) of account \(alice): not a note of that account, or a version outside 1...1"))
            try await corrupt(store, "UPDATE note_versions SET version = 1 WHERE server_id = \(note.rawValue)")
            #expect(
                try await operators.checkInvariants().contains(
                    "version unlike its note: note \(note) of account \(alice): its kept version 1 disagrees with it on whether it is deleted"))
        },
    ]
}
