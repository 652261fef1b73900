import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// A model store: applies the planner exactly as a real store does (loading only what the planner asks for).
struct PlannerHarness {
    var notes: [FlakeID: StoredNote] = [:]
    var applied: [FlakeID: [AppliedEdit]] = [:]
    /// Every version the plans kept, by note, in order.
    var versions: [FlakeID: [StoredVersion]] = [:]
    var sequences: [FlakeID: Int64] = [:]
    let minter = CountingMinter()
    var now: Int64 = testEpoch
    var limits = SyncLimits()
    /// Also hand the planner every note of every account, to check it ignores what it must not see.
    var loadEverything = false

    mutating func push(_ account: FlakeID, _ changes: [NoteChange], pusher: FlakeID? = nil, device: String? = nil) -> [ChangeResult] {
        // Like the stores: every applied edit of the account with one of the batch's edit IDs, whoever pushed it, and
        // the account's notes named by server ID, by client ID (any origin) or by one of those applied edits.
        let keys = PushPlanner.loadKeys(of: changes)
        let wanted = Set(keys.editIDs)
        let edits = (applied[account] ?? []).filter { wanted.contains($0.editID) }
        let serverIDs = Set(keys.serverIDs).union(edits.compactMap(\.serverID))
        let clientIDs = Set(keys.clientIDs)
        let loaded = notes.values.filter {
            loadEverything || ($0.accountID == account && (serverIDs.contains($0.serverID) || clientIDs.contains($0.clientID)))
        }
        let plan = try! PushPlanner.plan(
            PushPlanner.Input(
                accountID: account, changes: changes, notes: loaded, appliedEdits: edits,
                currentSequence: sequences[account, default: 0], limits: limits, now: now, pusher: pusher, device: device
            ),
            mintID: minter.mint
        )
        var seen = Set<Int64>()
        for write in plan.writes {
            #expect(write.note.accountID == account)
            #expect(write.isNew == (notes[write.note.serverID] == nil))
            #expect(seen.insert(write.note.changeSeq).inserted)
            #expect(write.note.changeSeq > sequences[account, default: 0])
            notes[write.note.serverID] = write.note
        }
        for edit in plan.newEdits {
            let key = AppliedEditKey(editID: edit.editID, noteKey: edit.noteKey, pusher: edit.pusher)
            #expect(!(applied[account] ?? []).contains { AppliedEditKey(editID: $0.editID, noteKey: $0.noteKey, pusher: $0.pusher) == key })
            applied[account, default: []].append(edit)
        }
        // The history: one version per write, numbered on from the note's last, the last one the note's final state.
        for version in plan.versions {
            #expect(version.accountID == account && version.savedAt == now && version.device == device)
            #expect(version.version == (versions[version.serverID]?.last?.version ?? 0) + 1, "versions follow each other")
            versions[version.serverID, default: []].append(version)
        }
        for write in plan.writes {
            #expect(versions[write.note.serverID]?.last == StoredVersion(write.note, savedAt: now, device: device))
        }
        #expect(plan.newUsage.historyBytes - plan.oldUsage.historyBytes == plan.versions.reduce(0) { $0 + Int64($1.text.utf8.count) })
        #expect(plan.newSequence >= sequences[account, default: 0])
        sequences[account] = plan.newSequence
        now += 1
        return plan.results
    }

    func notes(of account: FlakeID) -> [StoredNote] {
        notes.values.filter { $0.accountID == account }.sorted { $0.changeSeq < $1.changeSeq }
    }

    func note(_ serverID: FlakeID?) -> StoredNote? { serverID.flatMap { notes[$0] } }
}

let alice = id(1)
let bob = id(2)

@Suite("PushPlanner rules")
struct PushPlannerRuleTests {
    /// The edit time is carried, never decided on: each write keeps the change's (else the server's time), a clean
    /// merge the later of the two, a conflict copy the pushed change's while the note keeps its own.
    @Test func editTimesFollowTheEdits() {
        var h = PlannerHarness()
        let early = testEpoch - 50_000
        let created = h.push(alice, [change(10, edit: 100, text: "a\nb\nc\n", editedAt: early)])[0]
        let serverID = created.serverID
        #expect(h.note(serverID)?.editedAt == early)
        #expect(h.note(serverID)?.updatedAt == testEpoch)

        let untimed = h.push(alice, [change(10, server: serverID, edit: 101, text: "a\nb\nc\nd\n", baseVersion: 1)])[0]
        #expect(untimed.status == .updated)
        #expect(h.note(serverID)?.editedAt == h.now - 1, "no editedAt: the server's time")

        // A device whose edit happened before the stored one merges cleanly: the later time stays.
        let merged = h.push(alice, [change(10, server: serverID, edit: 102, text: "A\nb\nc\n", baseVersion: 1, baseText: "a\nb\nc\n", editedAt: early + 1)])[0]
        #expect(merged.status == .merged)
        let afterMerge = h.note(serverID)?.editedAt
        #expect(afterMerge == testEpoch + 1)

        // An overlapping edit: the copy has the pushed edit's time, the note keeps its own.
        let conflict = h.push(alice, [change(10, server: serverID, edit: 103, text: "X\nb\nc\n", baseVersion: 1, baseText: "a\nb\nc\n", editedAt: early + 2)])[0]
        #expect(conflict.status == .conflict)
        #expect(h.note(conflict.conflict?.serverID)?.editedAt == early + 2)
        #expect(h.note(serverID)?.editedAt == afterMerge)
    }

    @Test func createThenReplay() {
        var h = PlannerHarness()
        let first = h.push(alice, [change(10, edit: 100, text: "hello\n")])
        #expect(first.count == 1)
        #expect(first[0].status == .created)
        #expect(first[0].version == 1)
        #expect(first[0].replayed == false)
        let serverID = try! #require(first[0].serverID)
        #expect(h.note(serverID)?.text == "hello\n")
        #expect(h.note(serverID)?.changeSeq == 1)

        let again = h.push(alice, [change(10, edit: 100, text: "hello\n")])
        #expect(again[0].status == .created)
        #expect(again[0].serverID == serverID)
        #expect(again[0].version == 1)
        #expect(again[0].replayed)
        #expect(again[0].text == nil)
        #expect(h.notes(of: alice).count == 1)
        #expect(h.sequences[alice] == 1)
        #expect(h.minter.minted == 1)
    }

    @Test func sameTextIsUnchangedOrReconciled() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [change(10, edit: 1, text: "a\n")])[0].serverID!
        let byServer = h.push(alice, [change(10, server: serverID, edit: 2, text: "a\n", baseVersion: 1, baseText: "a\n")])
        #expect(byServer[0].status == .unchanged)
        #expect(byServer[0].version == 1)
        let byKey = h.push(alice, [change(10, edit: 3, text: "a\n", baseText: "a\n")])
        #expect(byKey[0].status == .reconciled)
        #expect(byKey[0].serverID == serverID)
        #expect(h.sequences[alice] == 1)
    }

    @Test func fastForwardByVersionAndByBaseText() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [change(10, edit: 1, text: "a\n")])[0].serverID!
        let updated = h.push(alice, [change(10, server: serverID, edit: 2, text: "b\n", baseVersion: 1, baseText: "a\n")])
        #expect(updated[0].status == .updated)
        #expect(updated[0].version == 2)
        #expect(h.note(serverID)?.text == "b\n")
        // A signed-out client: no server ID, no version, base text = last synced.
        let reconciled = h.push(alice, [change(10, edit: 3, text: "c\n", baseText: "b\n")])
        #expect(reconciled[0].status == .reconciled)
        #expect(reconciled[0].serverID == serverID)
        #expect(reconciled[0].version == 3)
        #expect(h.note(serverID)?.text == "c\n")
        #expect(h.note(serverID)?.changeSeq == 3)
    }

    @Test func concurrentNonOverlappingEditsMerge() {
        var h = PlannerHarness()
        let base = "one\ntwo\nthree\nfour\n"
        let serverID = h.push(alice, [change(10, edit: 1, text: base)])[0].serverID!
        _ = h.push(alice, [change(10, server: serverID, edit: 2, text: "ONE\ntwo\nthree\nfour\n", baseVersion: 1, baseText: base)])
        let result = h.push(alice, [change(10, server: serverID, edit: 3, text: "one\ntwo\nthree\nFOUR\n", baseVersion: 1, baseText: base)])
        #expect(result[0].status == .merged)
        #expect(result[0].version == 3)
        #expect(result[0].text == "ONE\ntwo\nthree\nFOUR\n")
        #expect(h.note(serverID)?.text == "ONE\ntwo\nthree\nFOUR\n")
    }

    @Test func overlappingEditsMakeAConflictCopy() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [change(10, origin: 5, edit: 1, text: "a\nb\nc\n")])[0].serverID!
        _ = h.push(alice, [change(10, origin: 5, server: serverID, edit: 2, text: "a\nX\nc\n", baseVersion: 1, baseText: "a\nb\nc\n")])
        let result = h.push(alice, [change(10, origin: 5, server: serverID, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n")])
        #expect(result[0].status == .conflict)
        #expect(result[0].serverID == serverID)
        #expect(result[0].version == 2)
        #expect(result[0].text == "a\nX\nc\n")
        let copy = try! #require(result[0].conflict)
        let stored = try! #require(h.note(copy.serverID))
        #expect(stored.text == "a\nY\nc\n")
        #expect(stored.clientID == copy.clientID)
        #expect(stored.origin == id(5))
        #expect(stored.conflictOf == serverID)
        #expect(stored.version == 1)
        #expect(copy.clientID < copy.serverID)
        #expect(h.note(serverID)?.text == "a\nX\nc\n")
        // Replaying the conflicting push creates no second copy.
        let replay = h.push(alice, [change(10, origin: 5, server: serverID, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n")])
        #expect(replay[0].status == .conflict)
        #expect(replay[0].conflict == copy)
        #expect(replay[0].replayed)
        #expect(replay[0].text == "a\nX\nc\n")
        #expect(h.notes(of: alice).count == 2)
    }

    @Test func deletes() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [change(10, edit: 1, text: "a\n")])[0].serverID!
        // Stale base: the note changed since; the edit wins over the delete.
        _ = h.push(alice, [change(10, server: serverID, edit: 2, text: "b\n", baseVersion: 1)])
        let kept = h.push(alice, [change(10, server: serverID, edit: 3, text: "", deleted: true, baseVersion: 1, baseText: "a\n")])
        #expect(kept[0].status == .kept)
        #expect(kept[0].text == "b\n")
        #expect(kept[0].version == 2)
        #expect(h.note(serverID)?.deleted == false)
        // Current base: tombstone.
        let deleted = h.push(alice, [change(10, server: serverID, edit: 4, text: "", deleted: true, baseVersion: 2)])
        #expect(deleted[0].status == .deleted)
        #expect(deleted[0].version == 3)
        #expect(h.note(serverID)?.deleted == true)
        #expect(h.note(serverID)?.text == "")
        // Deleting again: unchanged.
        let again = h.push(alice, [change(10, server: serverID, edit: 5, text: "", deleted: true, baseVersion: 1)])
        #expect(again[0].status == .unchanged)
        #expect(again[0].version == 3)
        // An edit concurrent with the delete restores the note.
        let restored = h.push(alice, [change(10, server: serverID, edit: 6, text: "c\n", baseVersion: 2, baseText: "b\n")])
        #expect(restored[0].status == .updated)
        #expect(restored[0].version == 4)
        #expect(h.note(serverID)?.deleted == false)
        #expect(h.note(serverID)?.text == "c\n")
    }

    @Test func deleteOfUnknownNoteCreatesNothing() {
        var h = PlannerHarness()
        let result = h.push(alice, [change(10, edit: 1, text: "", deleted: true)])
        #expect(result[0].status == .unchanged)
        #expect(result[0].serverID == nil)
        #expect(result[0].version == nil)
        #expect(h.notes(of: alice).isEmpty)
        #expect(h.applied[alice]?.contains { $0.editID == id(1) } == true)
    }

    @Test func otherAccountsNotesAreUnknown() {
        var h = PlannerHarness()
        h.loadEverything = true  // even if a store handed them over, the planner must not touch them
        let alicesNote = h.push(alice, [change(10, edit: 1, text: "secret\n")])[0].serverID!
        let before = h.note(alicesNote)
        let result = h.push(bob, [change(10, server: alicesNote, edit: 2, text: "pwned\n", baseVersion: 1)])
        #expect(result[0].status == .rejected)
        #expect(result[0].error?.code == .unknownNote)
        #expect(result[0].error?.field == "changes[0].serverID")
        let missing = h.push(bob, [change(10, server: id(999_999), edit: 3, text: "x\n", baseVersion: 1)])
        #expect(missing[0].error?.code == .unknownNote)
        #expect(missing[0].error?.message.contains("999999") == true)
        #expect(result[0].error?.message.contains("\(alicesNote)") == true)
        // Same client ID and origin in Bob's account: a separate note in Bob's account.
        let bobs = h.push(bob, [change(10, edit: 4, text: "bob\n", baseText: "secret\n")])
        #expect(bobs[0].status == .created)
        #expect(bobs[0].serverID != alicesNote)
        #expect(h.note(alicesNote) == before)
        // Edit IDs are per account: Bob's edit 1 is not Alice's.
        let bobEdit1 = h.push(bob, [change(11, edit: 1, text: "z\n")])
        #expect(bobEdit1[0].status == .created)
        #expect(bobEdit1[0].replayed == false)
    }

    @Test func clientIDMismatch() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [change(10, edit: 1, text: "a\n")])[0].serverID!
        let wrongClient = h.push(alice, [change(11, server: serverID, edit: 2, text: "b\n", baseVersion: 1)])
        #expect(wrongClient[0].error?.code == .clientIDMismatch)
        let wrongOrigin = h.push(alice, [change(10, origin: 78, server: serverID, edit: 3, text: "b\n", baseVersion: 1)])
        #expect(wrongOrigin[0].error?.code == .clientIDMismatch)
        #expect(h.note(serverID)?.text == "a\n")
    }

    @Test func validation() {
        var h = PlannerHarness()
        h.limits.maxNoteBytes = 10
        let serverID = h.push(alice, [change(10, edit: 1, text: "a\n")])[0].serverID!
        let results = h.push(alice, [
            change(20, edit: 2, text: String(repeating: "x", count: 11)),
            change(21, edit: 3, text: "ok\n"),
            change(22, edit: 3, text: "dup\n"),
            change(10, server: serverID, edit: 4, text: "b\n", baseVersion: 0),
            change(10, server: serverID, edit: 5, text: "b\n", baseVersion: 2),
            change(23, edit: 6, text: "ééééé"),  // 10 bytes: fits
            change(24, edit: 7, text: "éééééé"),  // 12 bytes: too large even though 6 characters
        ])
        #expect(results.map(\.status) == [.rejected, .created, .rejected, .rejected, .rejected, .created, .rejected])
        #expect(results.map { $0.error?.code } == [.noteTooLarge, nil, .duplicateEdit, .invalidBase, .invalidBase, nil, .noteTooLarge])
        #expect(results[0].error?.field == "changes[0].text")
        #expect(results[2].error?.field == "changes[2].editID")
        #expect(results[3].error?.field == "changes[3].baseVersion")
        // Rejected changes store nothing: their edit IDs are free to be applied later.
        #expect(h.applied[alice]?.contains { $0.editID == id(2) } != true)
        #expect(h.applied[alice]?.contains { $0.editID == id(4) } != true)
        let retry = h.push(alice, [change(20, edit: 2, text: "short\n")])
        #expect(retry[0].status == .created)
        #expect(retry[0].replayed == false)
    }

    @Test func oneNoteTwiceInABatchUsesTheOverlay() {
        var h = PlannerHarness()
        let results = h.push(alice, [
            change(10, edit: 1, text: "v1\n"),
            change(10, edit: 2, text: "v2\n", baseVersion: 1, baseText: "v1\n"),
            change(10, edit: 3, text: "", deleted: true, baseVersion: 2),
        ])
        #expect(results.map(\.status) == [.created, .reconciled, .deleted])
        #expect(results.map(\.version) == [1, 2, 3])
        let notes = h.notes(of: alice)
        #expect(notes.count == 1)
        #expect(notes[0].deleted)
        #expect(notes[0].version == 3)
        #expect(notes[0].changeSeq == 3)
        #expect(h.sequences[alice] == 3)
    }

    @Test func clientIDCollisionAcrossDevicesNeverMerges() {
        var h = PlannerHarness()
        let results = h.push(alice, [change(10, origin: 1, edit: 1, text: "phone\n"), change(10, origin: 2, edit: 2, text: "laptop\n")])
        #expect(results.map(\.status) == [.created, .created])
        #expect(results[0].serverID != results[1].serverID)
        #expect(Set(h.notes(of: alice).map(\.text)) == ["phone\n", "laptop\n"])
    }

    @Test func sameEditIDFromAnotherInstallationIsNotAReplay() {
        // Two devices sharing a MiniFlake instance can mint one edit ID in one millisecond, even for one note.
        var h = PlannerHarness()
        let phone = id(900), laptop = id(901)
        let created = h.push(alice, [change(10, edit: 100, text: "a\n")], pusher: phone)
        let serverID = try! #require(created[0].serverID)
        let fromLaptop = h.push(
            alice, [change(10, server: serverID, edit: 200, text: "a\nlaptop\n", baseVersion: 1, baseText: "a\n")], pusher: laptop)
        #expect(fromLaptop[0].status == .updated && !fromLaptop[0].replayed)
        let fromPhone = h.push(
            alice, [change(10, server: serverID, edit: 200, text: "phone\na\n", baseVersion: 1, baseText: "a\n")], pusher: phone)
        #expect(fromPhone[0].replayed == false, "the phone's edit must not be swallowed as the laptop's replay")
        #expect(fromPhone[0].status == .merged)
        #expect(h.note(serverID)?.text == "phone\na\nlaptop\n")
        // The laptop's own retry is still a replay.
        let retry = h.push(
            alice, [change(10, server: serverID, edit: 200, text: "a\nlaptop\n", baseVersion: 1, baseText: "a\n")], pusher: laptop)
        #expect(retry[0].replayed && retry[0].status == .updated)
    }

    /// Issue 15: a replay answers exactly the original result, not the note's current text (it used to answer
    /// `text: "b\n"` here).
    @Test func replayAnswersTheOriginalResultAfterOtherDevicesChangedIt() {
        var h = PlannerHarness()
        let created = h.push(alice, [change(10, edit: 1, text: "a\n")])[0]
        let serverID = created.serverID!
        _ = h.push(alice, [change(10, server: serverID, edit: 2, text: "b\n", baseVersion: 1)])
        let replay = h.push(alice, [change(10, edit: 1, text: "a\n")])
        var expected = created
        expected.replayed = true
        #expect(replay[0] == expected)
        #expect(replay[0].text == nil)
    }

    @Test func cleanMergeEqualToCurrentWritesNothing() {
        var h = PlannerHarness()
        let base = "a\nb\nc\n"
        let serverID = h.push(alice, [change(10, edit: 1, text: base)])[0].serverID!
        _ = h.push(alice, [change(10, server: serverID, edit: 2, text: "A\nb\nc\nd\n", baseVersion: 1)])
        // This device made a subset of the same change.
        let result = h.push(alice, [change(10, server: serverID, edit: 3, text: "A\nb\nc\n", baseVersion: 1, baseText: base)])
        #expect(result[0].status == .merged)
        #expect(result[0].version == 2)
        #expect(result[0].text == "A\nb\nc\nd\n")
        #expect(h.sequences[alice] == 2)
    }
}

// MARK: - Property tests

/// A device of the model: its local notes and what it last synced.
struct ModelDevice {
    struct LocalNote {
        var clientID: FlakeID
        var origin: FlakeID
        var serverID: FlakeID?
        var version: Int64?
        var syncedText: String?
        var text: String
        var deleted = false
        var dirty = true
        var tags: [String] = []
        var syncedTags: [String]?
        var pinned = false
        var syncedPinned: Bool?
    }

    var origin: FlakeID
    var notes: [LocalNote] = []
    var cursor: Int64 = 0

    /// Forgets server IDs and versions (sign-out), keeping notes and synced text.
    mutating func signOut() {
        for index in notes.indices {
            notes[index].serverID = nil
            notes[index].version = nil
        }
        cursor = 0
    }
}

/// Random scenario driver: devices of one account edit, delete, create, push and pull through a harness.
struct Scenario {
    var harness = PlannerHarness()
    var devices: [ModelDevice]
    var rng: SplitMix64
    var nextEditID: Int64 = 1
    let account: FlakeID
    /// Every push in order, for replaying.
    var pushes: [[NoteChange]] = []
    var failures: [String] = []
    /// How often each status was answered (to check the scenarios exercise every rule).
    var statusCounts: [ChangeStatus: Int] = [:]

    init(seed: UInt64, deviceCount: Int = 3, account: FlakeID = alice) {
        rng = SplitMix64(seed: seed)
        devices = (0..<deviceCount).map { ModelDevice(origin: id(Int64(500 + $0))) }
        self.account = account
    }

    mutating func randomText(from existing: String?) -> String {
        var lines = (existing ?? "").split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        let operation = rng.next() % 4
        let word = "w\(rng.next() % 50)"
        switch operation {
        case 0 where !lines.isEmpty: lines[Int(rng.next() % UInt64(lines.count))] = word
        case 1: lines.insert(word, at: Int(rng.next() % UInt64(lines.count + 1)))
        case 2 where lines.count > 1: lines.remove(at: Int(rng.next() % UInt64(lines.count)))
        default: lines.append(word)
        }
        return lines.map { $0 + "\n" }.joined()
    }

    /// One random step on a random device.
    mutating func step() {
        let deviceIndex = Int(rng.next() % UInt64(devices.count))
        switch rng.next() % 12 {
        case 0...1:
            // Small client IDs on purpose: devices collide on client IDs, origins keep the notes apart.
            let clientID = id(Int64(1 + rng.next() % 6) + Int64(devices[deviceIndex].notes.count) * 10)
            devices[deviceIndex].notes.append(.init(clientID: clientID, origin: devices[deviceIndex].origin, text: randomText(from: nil)))
        case 2...5:
            guard !devices[deviceIndex].notes.isEmpty else { return }
            let noteIndex = Int(rng.next() % UInt64(devices[deviceIndex].notes.count))
            guard !devices[deviceIndex].notes[noteIndex].deleted else { return }
            devices[deviceIndex].notes[noteIndex].text = randomText(from: devices[deviceIndex].notes[noteIndex].text)
            devices[deviceIndex].notes[noteIndex].dirty = true
        case 6:
            guard !devices[deviceIndex].notes.isEmpty else { return }
            let noteIndex = Int(rng.next() % UInt64(devices[deviceIndex].notes.count))
            devices[deviceIndex].notes[noteIndex].deleted = true
            devices[deviceIndex].notes[noteIndex].text = ""
            devices[deviceIndex].notes[noteIndex].dirty = true
        case 7:
            // Tags and pins: add or remove a tag of five (in random case), or flip the pin.
            guard !devices[deviceIndex].notes.isEmpty else { return }
            let noteIndex = Int(rng.next() % UInt64(devices[deviceIndex].notes.count))
            guard !devices[deviceIndex].notes[noteIndex].deleted else { return }
            let tag = ["work", "home", "idea", "q4", "a/b"][Int(rng.next() % 5)]
            var note = devices[deviceIndex].notes[noteIndex]
            if rng.next() % 4 == 0 {
                note.pinned.toggle()
            } else if let existing = note.tags.firstIndex(where: { TagRules.key($0) == tag }) {
                note.tags.remove(at: existing)
            } else {
                note.tags.append(rng.next() % 2 == 0 ? tag : tag.uppercased())
            }
            note.dirty = true
            devices[deviceIndex].notes[noteIndex] = note
        case 8:
            push(deviceIndex)
        case 9...10:
            pull(deviceIndex)
        default:
            // Sign out and in again: server IDs forgotten, every synced note re-pushed by client ID.
            devices[deviceIndex].signOut()
            for index in devices[deviceIndex].notes.indices where devices[deviceIndex].notes[index].syncedText != nil {
                devices[deviceIndex].notes[index].dirty = true
            }
        }
    }

    mutating func push(_ deviceIndex: Int) {
        let device = devices[deviceIndex]
        var changes: [NoteChange] = []
        var indices: [Int] = []
        for (index, note) in device.notes.enumerated() where note.dirty {
            changes.append(
                NoteChange(
                    clientID: note.clientID, origin: note.origin, serverID: note.serverID, editID: id(nextEditID),
                    text: note.text, deleted: note.deleted, baseVersion: note.version, baseText: note.syncedText,
                    tags: note.tags, pinned: note.pinned, baseTags: note.syncedTags, basePinned: note.syncedPinned
                )
            )
            nextEditID += 1
            indices.append(index)
        }
        guard !changes.isEmpty else { return }
        pushes.append(changes)
        let results = harness.push(account, changes)
        absorb(results, changes: changes, indices: indices, deviceIndex: deviceIndex)
    }

    /// Updates the device from push results, checking that no pushed text was lost.
    mutating func absorb(_ results: [ChangeResult], changes: [NoteChange], indices: [Int], deviceIndex: Int) {
        for (position, result) in results.enumerated() {
            let change = changes[position]
            let index = indices[position]
            statusCounts[result.status, default: 0] += 1
            if result.status == .rejected {
                failures.append("unexpected rejection \(result.error?.description ?? "")")
                continue
            }
            let stored = harness.note(result.serverID)
            // No lost edit: the pushed text is the note's text, inside the merge, or in a conflict copy.
            if !change.deleted {
                switch result.status {
                case .created, .updated, .reconciled, .unchanged:
                    if stored?.text != change.text, !result.replayed { failures.append("pushed text not stored (\(result.status))") }
                case .merged:
                    let added = Set(change.text.split(separator: "\n")).subtracting(change.baseText?.split(separator: "\n") ?? [])
                    let mergedLines = Set((result.text ?? change.text).split(separator: "\n"))
                    if !added.isSubset(of: mergedLines) { failures.append("merge lost an added line") }
                case .conflict:
                    if harness.note(result.conflict?.serverID)?.text != change.text { failures.append("conflict copy lost the text") }
                default:
                    failures.append("edit answered \(result.status)")
                }
                // No lost tag change: what this device added is on the note, what it removed is not.
                if let stored, !result.replayed, result.status != .kept {
                    let keys = Set(stored.tags.map(TagRules.key))
                    let pushed = Set((change.tags ?? []).map(TagRules.key))
                    let base = Set((change.baseTags ?? []).map(TagRules.key))
                    if !pushed.subtracting(base).isSubset(of: keys) { failures.append("a tag added was lost (\(result.status))") }
                    if !keys.isDisjoint(with: base.subtracting(pushed)) { failures.append("a tag removed came back (\(result.status))") }
                    if let pinned = change.pinned, pinned != change.basePinned, stored.pinned != pinned {
                        failures.append("a pin change was lost (\(result.status))")
                    }
                    if result.tags != nil, result.tags != stored.tags { failures.append("the answer's tags are not the note's") }
                    if result.tags == nil, Set(stored.tags) != Set(change.tags ?? stored.tags) {
                        failures.append("the answer left out tags that differ")
                    }
                }
            }
            var note = devices[deviceIndex].notes[index]
            note.serverID = result.serverID
            note.version = result.version
            note.dirty = false
            if !change.deleted || result.status == .kept {
                note.tags = result.tags ?? change.tags ?? note.tags
                note.pinned = result.pinned ?? change.pinned ?? note.pinned
                note.syncedTags = note.tags
                note.syncedPinned = note.pinned
            }
            switch result.status {
            case .deleted:
                note.syncedText = ""
            case .kept:
                note.deleted = false
                note.text = result.text ?? ""
                note.syncedText = note.text
            case .unchanged where result.serverID == nil:
                note.syncedText = nil
            default:
                note.text = result.text ?? change.text
                note.syncedText = note.text
            }
            devices[deviceIndex].notes[index] = note
            if let copy = result.conflict {
                devices[deviceIndex].notes.append(
                    .init(
                        clientID: copy.clientID, origin: change.origin, serverID: copy.serverID, version: 1,
                        syncedText: change.text, text: change.text, dirty: false, tags: change.tags ?? [],
                        syncedTags: change.tags ?? [], pinned: change.pinned ?? false, syncedPinned: change.pinned ?? false
                    )
                )
            }
        }
    }

    mutating func pull(_ deviceIndex: Int) {
        let changed = harness.notes(of: account).filter { $0.changeSeq > devices[deviceIndex].cursor }
        for note in changed {
            if let index = devices[deviceIndex].notes.firstIndex(where: {
                $0.serverID == note.serverID || ($0.clientID == note.clientID && $0.origin == note.origin)
            }) {
                guard !devices[deviceIndex].notes[index].dirty else { continue }
                devices[deviceIndex].notes[index].serverID = note.serverID
                devices[deviceIndex].notes[index].version = note.version
                devices[deviceIndex].notes[index].syncedText = note.text
                devices[deviceIndex].notes[index].text = note.text
                devices[deviceIndex].notes[index].deleted = note.deleted
                devices[deviceIndex].notes[index].tags = note.tags
                devices[deviceIndex].notes[index].syncedTags = note.tags
                devices[deviceIndex].notes[index].pinned = note.pinned
                devices[deviceIndex].notes[index].syncedPinned = note.pinned
            } else {
                devices[deviceIndex].notes.append(
                    .init(
                        clientID: note.clientID, origin: note.origin, serverID: note.serverID, version: note.version,
                        syncedText: note.text, text: note.text, deleted: note.deleted, dirty: false, tags: note.tags,
                        syncedTags: note.tags, pinned: note.pinned, syncedPinned: note.pinned
                    )
                )
            }
        }
        devices[deviceIndex].cursor = harness.sequences[account, default: 0]
    }

    /// Note states comparable across runs.
    func snapshot() -> [String] {
        harness.notes(of: account).map(Self.describe).sorted()
    }

    static func describe(_ note: StoredNote) -> String {
        "\(note.serverID) \(note.clientID) \(note.origin) v\(note.version) \(note.deleted) \(note.conflictOf.map { "\($0)" } ?? "-") "
            + "\(note.tags) \(note.pinned) \(note.text)"
    }
}

@Suite("PushPlanner properties")
struct PushPlannerPropertyTests {
    @Test func noLostEditsInRandomScenarios() {
        var statuses: [ChangeStatus: Int] = [:]
        for seed in propertySeeds(150) {
            var scenario = Scenario(seed: seed)
            for _ in 0..<120 { scenario.step() }
            #expect(scenario.failures.isEmpty, "seed \(seed): \(scenario.failures.prefix(3))")
            statuses.merge(scenario.statusCounts, uniquingKeysWith: +)
        }
        // The scenarios reach every outcome but rejection (and `stale`, which only encrypted accounts answer).
        if propertySeeds(150).count > 1 {
            for status in ChangeStatus.allCases where status != .rejected && status != .stale {
                #expect(statuses[status, default: 0] > 0, "no scenario produced \(status): \(statuses)")
            }
        }
    }

    @Test func replayedPushesHaveTheEffectOfOne() {
        for seed in propertySeeds(150) {
            var scenario = Scenario(seed: seed)
            for _ in 0..<100 { scenario.step() }
            #expect(scenario.failures.isEmpty, "seed \(seed)")

            // Apply the same pushes again from scratch, each one replayed 1–3 more times at random later points,
            // interleaved with the other pushes.
            var rng = SplitMix64(seed: seed ^ 0xABCDEF)
            var schedule: [(push: Int, original: Bool)] = scenario.pushes.indices.map { ($0, true) }
            for index in scenario.pushes.indices {
                for _ in 0..<(1 + Int(rng.next() % 3)) {
                    let lowerBound = schedule.firstIndex { $0.push == index && $0.original }! + 1
                    let at = lowerBound + Int(rng.next() % UInt64(schedule.count - lowerBound + 1))
                    schedule.insert((index, false), at: at)
                }
            }
            var replay = PlannerHarness()
            var firstResults: [Int: [ChangeResult]] = [:]
            for (index, original) in schedule {
                let results = replay.push(alice, scenario.pushes[index])
                if original {
                    firstResults[index] = results
                } else if let first = firstResults[index] {
                    // A replay answers the stored outcome for every change accepted the first time.
                    for (a, b) in zip(first, results) where a.status != .rejected {
                        var expected = a
                        expected.replayed = true
                        #expect(b == expected, "seed \(seed)")
                    }
                }
            }
            let once = scenario.snapshot()
            let many = replay.notes(of: alice).map(Scenario.describe).sorted()
            #expect(once == many, "seed \(seed)")
            #expect(
                scenario.harness.notes(of: alice).filter { $0.conflictOf != nil }.count
                    == replay.notes(of: alice).filter { $0.conflictOf != nil }.count,
                "seed \(seed): extra conflict copies"
            )
        }
    }

    @Test func rePushAfterSignOutCreatesNothing() {
        for seed in propertySeeds(150) {
            var scenario = Scenario(seed: seed)
            for _ in 0..<100 { scenario.step() }
            // Every device syncs fully, then one signs out and in again and re-pushes everything it has.
            for index in scenario.devices.indices { scenario.push(index) }
            for index in scenario.devices.indices { scenario.pull(index) }
            let before = scenario.snapshot()
            let deviceIndex = Int(seed % UInt64(scenario.devices.count))
            scenario.devices[deviceIndex].signOut()
            let device = scenario.devices[deviceIndex]
            var changes: [NoteChange] = []
            for note in device.notes where note.syncedText != nil {
                changes.append(
                    NoteChange(
                        clientID: note.clientID, origin: note.origin, editID: id(scenario.nextEditID),
                        text: note.text, deleted: note.deleted, baseText: note.syncedText
                    )
                )
                scenario.nextEditID += 1
            }
            let results = scenario.harness.push(alice, changes)
            #expect(!results.contains { $0.status == .created || $0.status == .conflict || $0.status == .rejected }, "seed \(seed)")
            #expect(scenario.snapshot() == before, "seed \(seed)")
        }
    }
}
