import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// A change with tags and flags, tersely.
func tagged(
    _ clientID: Int64, origin: Int64 = 77, server: FlakeID? = nil, edit: Int64, text: String, deleted: Bool = false,
    baseVersion: Int64? = nil, baseText: String? = nil, tags: [String]? = nil, baseTags: [String]? = nil, pinned: Bool? = nil,
    basePinned: Bool? = nil, archived: Bool? = nil, baseArchived: Bool? = nil
) -> NoteChange {
    NoteChange(
        clientID: id(clientID), origin: id(origin), serverID: server, editID: id(edit), text: text, deleted: deleted,
        baseVersion: baseVersion, baseText: baseText, tags: tags, pinned: pinned, archived: archived, baseTags: baseTags,
        basePinned: basePinned, baseArchived: baseArchived)
}

@Suite("PushPlanner tags, flags and history")
struct PushPlannerTagTests {
    @Test func aNewNoteTakesThePushedTagsAndFlagsInCanonicalOrder() {
        var h = PlannerHarness()
        let created = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["work", "Idea", "a/b"], pinned: true)])[0]
        #expect(created.status == .created)
        #expect(created.tags == nil && created.pinned == nil && created.archived == nil, "the note holds what was pushed")
        let note = h.note(created.serverID)
        #expect(note?.tags == ["a/b", "Idea", "work"])
        #expect(note?.pinned == true && note?.archived == false)
        let bare = h.push(alice, [change(11, edit: 2, text: "b\n")])[0]
        #expect(h.note(bare.serverID)?.tags == [] && h.note(bare.serverID)?.pinned == false)
    }

    @Test func aChangeOfTagsOrFlagsAloneIsAWrite() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["work"])])[0].serverID!
        let retagged = h.push(alice, [tagged(10, server: serverID, edit: 2, text: "a\n", baseVersion: 1, baseText: "a\n", tags: ["home"], baseTags: ["work"])])[0]
        #expect(retagged.status == .updated && retagged.version == 2 && retagged.tags == nil)
        #expect(h.note(serverID)?.tags == ["home"])
        let archived = h.push(alice, [tagged(10, edit: 3, text: "a\n", baseText: "a\n", archived: true, baseArchived: false)])[0]
        #expect(archived.status == .reconciled && archived.version == 3)
        #expect(h.note(serverID)?.archived == true)
        // The same tags and flags again: nothing to write.
        let same = h.push(alice, [tagged(10, server: serverID, edit: 4, text: "a\n", baseVersion: 3, tags: ["HOME"], baseTags: ["home"], archived: true)])[0]
        #expect(same.status == .unchanged && same.version == 3)
        #expect(same.tags == ["home"], "the server's spelling differs from the pushed one: the answer says so")
        #expect(h.sequences[alice] == 3)
    }

    /// Issue 31: a tag added on one device and another removed on the other both take effect.
    @Test func concurrentTagChangesMergeThreeWay() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["home", "idea"])])[0].serverID!
        let phone = h.push(alice, [tagged(10, server: serverID, edit: 2, text: "a\n", baseVersion: 1, tags: ["home", "idea", "work"], baseTags: ["home", "idea"])])[0]
        #expect(phone.status == .updated && phone.tags == nil)
        // The laptop still has version 1: it removes "home" and adds "Work" (the phone's tag, in another case).
        let laptop = h.push(alice, [tagged(10, server: serverID, edit: 3, text: "a\n", baseVersion: 1, tags: ["idea", "Work"], baseTags: ["home", "idea"])])[0]
        #expect(laptop.status == .updated && laptop.version == 3)
        #expect(h.note(serverID)?.tags == ["idea", "work"], "home removed, work kept once as first written")
        #expect(laptop.tags == ["idea", "work"], "the answer names the spelling the laptop did not push")
    }

    @Test func aFieldLeftOutLeavesTheServersAndTagsWithoutABaseRemoveNothing() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["home"], pinned: true, archived: true)])[0].serverID!
        // An older client: no tags, no flags; its text edit leaves them as they are.
        let old = h.push(alice, [change(10, server: serverID, edit: 2, text: "b\n", baseVersion: 1)])[0]
        #expect(old.status == .updated && old.tags == nil && old.pinned == nil)
        #expect(h.note(serverID)?.tags == ["home"] && h.note(serverID)?.pinned == true && h.note(serverID)?.archived == true)
        // Tags without a base: the base is the empty set, so "home" stays; a flag without its base wins.
        let unbased = h.push(alice, [tagged(10, server: serverID, edit: 3, text: "b\n", baseVersion: 2, tags: ["work"], pinned: false)])[0]
        #expect(h.note(serverID)?.tags == ["home", "work"])
        #expect(h.note(serverID)?.pinned == false)
        #expect(unbased.tags == ["home", "work"] && unbased.pinned == nil)
    }

    /// A concurrent pin and text edit both survive: separate fields.
    @Test func aConcurrentPinAndTextEditBothSurvive() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [change(10, edit: 1, text: "a\nb\n")])[0].serverID!
        _ = h.push(alice, [change(10, server: serverID, edit: 2, text: "a\nB\n", baseVersion: 1, baseText: "a\nb\n")])
        // The other device pins version 1, whose text it did not touch.
        let pin = h.push(alice, [tagged(10, server: serverID, edit: 3, text: "a\nb\n", baseVersion: 1, baseText: "a\nb\n", pinned: true, basePinned: false)])[0]
        #expect(pin.status == .merged && pin.text == "a\nB\n" && pin.version == 3)
        #expect(h.note(serverID)?.text == "a\nB\n" && h.note(serverID)?.pinned == true)
        // And the other way round: a text edit on a base that did not know of an archive keeps the archive.
        _ = h.push(alice, [tagged(10, server: serverID, edit: 4, text: "a\nB\n", baseVersion: 3, archived: true, baseArchived: false)])
        let edit = h.push(alice, [tagged(10, server: serverID, edit: 5, text: "a\nB\nc\n", baseVersion: 3, baseText: "a\nB\n", archived: false, baseArchived: false)])[0]
        #expect(edit.status == .updated && edit.archived == true)
        #expect(h.note(serverID)?.archived == true && h.note(serverID)?.text == "a\nB\nc\n")
    }

    /// A conflict copy keeps the pushing device's tags and flags; the note keeps its text and takes the merged ones.
    @Test func aConflictCopyKeepsThePushersTagsAndTheNoteTheMergedOnes() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\nb\nc\n", tags: ["home"])])[0].serverID!
        _ = h.push(alice, [tagged(10, server: serverID, edit: 2, text: "a\nX\nc\n", baseVersion: 1, tags: ["home", "q4"], baseTags: ["home"])])
        let result = h.push(alice, [tagged(10, server: serverID, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n", tags: ["work"], baseTags: ["home"], pinned: true, basePinned: false)])[0]
        #expect(result.status == .conflict)
        let copy = try! #require(h.note(result.conflict?.serverID))
        #expect(copy.text == "a\nY\nc\n" && copy.tags == ["work"] && copy.pinned)
        let note = try! #require(h.note(serverID))
        #expect(note.text == "a\nX\nc\n" && note.tags == ["q4", "work"] && note.pinned, "home removed, q4 and work added, pinned")
        #expect(note.version == 3 && result.version == 3, "the note was written for its tags")
        #expect(result.tags == ["q4", "work"] && result.pinned == nil)
        // The copy was written before the note, so a pull that stops between them has the copy.
        #expect(copy.changeSeq < note.changeSeq)
        // The replay answers the same, tags included, after the note changed again.
        _ = h.push(alice, [tagged(10, server: serverID, edit: 4, text: "a\nX\nc\n", baseVersion: 3, tags: [], baseTags: ["q4", "work"])])
        let replay = h.push(alice, [tagged(10, server: serverID, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n", tags: ["work"], baseTags: ["home"], pinned: true, basePinned: false)])[0]
        var expected = result
        expected.replayed = true
        #expect(replay == expected)
    }

    @Test func aTombstoneKeepsItsTagsAndARestoreMergesThem() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["home"], pinned: true)])[0].serverID!
        let deleted = h.push(alice, [tagged(10, server: serverID, edit: 2, text: "", deleted: true, baseVersion: 1, tags: [])])[0]
        #expect(deleted.status == .deleted)
        #expect(h.note(serverID)?.tags == ["home"] && h.note(serverID)?.pinned == true)
        // A device that edited version 1 and added a tag restores it, with both tags.
        let restored = h.push(alice, [tagged(10, server: serverID, edit: 3, text: "b\n", baseVersion: 1, baseText: "a\n", tags: ["home", "work"], baseTags: ["home"])])[0]
        #expect(restored.status == .updated && restored.version == 3)
        #expect(h.note(serverID)?.tags == ["home", "work"] && h.note(serverID)?.deleted == false)
    }

    /// A delete based on the note's text but on tags and flags older than the note's (another device tagged or
    /// pinned it since) loses as against a text edit: the note stays, with the tag the deleting device never saw.
    @Test func aDeleteOfANoteTaggedSinceItsBaseIsKept() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["home"])])[0].serverID!
        let tagged2 = h.push(alice, [tagged(10, server: serverID, edit: 2, text: "a\n", baseVersion: 1, tags: ["home", "work"], baseTags: ["home"])])[0]
        #expect(tagged2.status == .updated && tagged2.version == 2)
        let deleted = h.push(
            alice, [tagged(10, server: serverID, edit: 3, text: "", deleted: true, baseVersion: 1, baseText: "a\n", tags: ["home"], baseTags: ["home"])])[0]
        #expect(deleted.status == .kept, "the tag added since the delete's base keeps the note")
        #expect(h.note(serverID)?.deleted == false && h.note(serverID)?.tags == ["home", "work"])
        let pinned = h.push(alice, [tagged(10, server: serverID, edit: 4, text: "a\n", baseVersion: 2, pinned: true, basePinned: false)])[0]
        #expect(pinned.status == .updated && pinned.version == 3)
        let deletedAgain = h.push(
            alice, [tagged(10, server: serverID, edit: 5, text: "", deleted: true, baseVersion: 2, baseText: "a\n", basePinned: false)])[0]
        #expect(deletedAgain.status == .kept, "a pin since the base keeps it too")
        // Based on what the note holds now: deleted. A delete that names no bases (an older client) by its text.
        let current = h.push(
            alice, [tagged(10, server: serverID, edit: 6, text: "", deleted: true, baseVersion: 2, baseText: "a\n", baseTags: ["HOME", "work"], basePinned: true)])[0]
        #expect(current.status == .deleted)
    }

    /// A delete that loses (the note's text changed since its base) still carries what its device changed of the
    /// tags and flags before deleting: merged onto the kept note like an edit's, so a tag it took off stays off
    /// (notes-sim seed 1190: the tag came back with the note the delete could not remove).
    @Test func aKeptDeleteStillTakesTheTagsItsDeviceTookOff() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["home", "work"], pinned: false)])[0].serverID!
        let edited = h.push(alice, [tagged(10, server: serverID, edit: 2, text: "a\nb\n", baseVersion: 1, baseText: "a\n")])[0]
        #expect(edited.version == 2)
        let deleted = h.push(
            alice,
            [
                tagged(
                    10, server: serverID, edit: 3, text: "", deleted: true, baseVersion: 1, baseText: "a\n", tags: ["home"],
                    baseTags: ["home", "work"], pinned: true, basePinned: false)
            ])[0]
        #expect(deleted.status == .kept && deleted.version == 3 && deleted.text == "a\nb\n")
        let note = h.note(serverID)
        #expect(note?.deleted == false && note?.text == "a\nb\n" && note?.tags == ["home"] && note?.pinned == true)
        #expect(h.versions[serverID]?.count == 3, "the kept note's new tags are a version")
        // Nothing of the tags or flags changed: kept as before, no write.
        let again = h.push(
            alice,
            [tagged(10, server: serverID, edit: 4, text: "", deleted: true, baseVersion: 1, baseText: "a\n", tags: ["home"], baseTags: ["home"])])[0]
        #expect(again.status == .kept && again.version == 3)
        #expect(h.versions[serverID]?.count == 3)
    }

    /// A delete on the current version leaves the tags and flags its device sent on the tombstone: a tag it took off
    /// before deleting does not come back when another device's edit restores the note (notes-sim seed 1190).
    @Test func aTombstoneKeepsTheTagsTheDeletingDeviceLeft() {
        var h = PlannerHarness()
        let serverID = h.push(alice, [tagged(10, edit: 1, text: "a\n", tags: ["home", "work"])])[0].serverID!
        let deleted = h.push(
            alice, [tagged(10, server: serverID, edit: 2, text: "", deleted: true, baseVersion: 1, tags: ["home"], baseTags: ["home", "work"])])[0]
        #expect(deleted.status == .deleted && h.note(serverID)?.tags == ["home"])
        let restored = h.push(
            alice, [tagged(10, server: serverID, edit: 3, text: "a\nb\n", baseVersion: 1, baseText: "a\n", tags: ["home", "work"], baseTags: ["home", "work"])])[0]
        #expect(restored.status == .updated)
        #expect(h.note(serverID)?.deleted == false && h.note(serverID)?.tags == ["home"])
        // Deleted on two devices, the second having taken a tag off first: the tombstone takes that too.
        let v = h.note(serverID)!.version
        #expect(h.push(alice, [tagged(10, server: serverID, edit: 4, text: "", deleted: true, baseVersion: v, tags: ["home"], baseTags: ["home"])])[0].status == .deleted)
        let second = h.push(
            alice, [tagged(10, server: serverID, edit: 5, text: "", deleted: true, baseVersion: v, tags: [], baseTags: ["home"])])[0]
        #expect(second.status == .deleted && second.version == v + 2 && h.note(serverID)?.tags == [])
        let third = h.push(alice, [tagged(10, server: serverID, edit: 6, text: "", deleted: true, baseVersion: v, tags: [], baseTags: [])])[0]
        #expect(third.status == .unchanged && third.version == v + 2, "nothing to change: no write")
    }

    /// Every write keeps a version: a batch that changes a note twice keeps both, a conflict keeps the copy's and the
    /// note's, and each carries the pushing session's device name.
    @Test func everyWriteKeepsAVersionWithItsDevice() {
        var h = PlannerHarness()
        let results = h.push(
            alice,
            [
                change(10, edit: 1, text: "v1\n"), change(10, edit: 2, text: "v2\n", baseVersion: 1, baseText: "v1\n"),
                change(10, edit: 3, text: "v2\n", baseVersion: 2),
            ], device: "laptop")
        let serverID = results[0].serverID!
        #expect(results.map(\.status) == [.created, .reconciled, .reconciled])
        #expect(results.map(\.version) == [1, 2, 2])
        #expect(h.versions[serverID]?.map(\.text) == ["v1\n", "v2\n"], "the third change wrote nothing")
        #expect(h.versions[serverID]?.allSatisfy { $0.device == "laptop" } == true)
        _ = h.push(alice, [tagged(10, server: serverID, edit: 4, text: "", deleted: true, baseVersion: 2)], device: "phone")
        #expect(h.versions[serverID]?.last?.deleted == true && h.versions[serverID]?.last?.text == "")
        #expect(h.versions[serverID]?.last?.device == "phone")
    }

    /// The history counts in the byte quota: each written note keeps its text twice (note and version), so only a
    /// delete, or an edit that at least halves a note, is sure to pass an account over its limit.
    @Test func theHistoryCountsInTheByteQuota() {
        let quota = AccountQuota(maxNotes: 10, maxTextBytes: 100)
        var plan = try! PushPlanner.plan(
            .init(
                accountID: alice, changes: [change(10, edit: 1, text: String(repeating: "x", count: 40))], notes: [], appliedEdits: [],
                currentSequence: 0, limits: SyncLimits(), now: testEpoch, quota: quota),
            mintID: CountingMinter().mint)
        #expect(plan.results[0].status == .created)
        #expect(plan.newUsage == AccountUsage(noteCount: 1, textBytes: 40, historyBytes: 40))
        let note = plan.writes[0].note
        func push(_ change: NoteChange, usage: AccountUsage) -> PushPlanner.Plan {
            try! PushPlanner.plan(
                .init(
                    accountID: alice, changes: [change], notes: [note], appliedEdits: [], currentSequence: 1, limits: SyncLimits(),
                    now: testEpoch, usage: usage, quota: quota),
                mintID: CountingMinter().mint)
        }
        // 40 + 40 stored: an 11-byte note would need 22 more.
        plan = push(change(11, edit: 2, text: String(repeating: "y", count: 11)), usage: plan.newUsage)
        #expect(plan.results[0].error?.code == .quotaExceeded)
        #expect(plan.results[0].error?.message.contains("history") == true)
        // An edit of the note that does not halve it grows the total: refused; one that halves it does not.
        let usage = AccountUsage(noteCount: 1, textBytes: 40, historyBytes: 60)
        plan = push(change(10, server: note.serverID, edit: 3, text: String(repeating: "x", count: 21), baseVersion: 1), usage: usage)
        #expect(plan.results[0].error?.code == .quotaExceeded)
        plan = push(change(10, server: note.serverID, edit: 4, text: String(repeating: "x", count: 20), baseVersion: 1), usage: usage)
        #expect(plan.results[0].status == .updated)
        #expect(plan.newUsage == AccountUsage(noteCount: 1, textBytes: 20, historyBytes: 80))
        // A delete always passes.
        plan = push(change(10, server: note.serverID, edit: 5, text: "", deleted: true, baseVersion: 1), usage: usage)
        #expect(plan.results[0].status == .deleted)
        #expect(plan.versions.map(\.text) == [""])
    }
}

@Suite("HistoryPlanner")
struct HistoryPlannerTests {
    static let limits = HistoryLimits(retentionDays: 90, maxPageSize: 50, defaultPageSize: 20, maxPageBytes: 1000)

    @Test func theQueryIsParsedStrictly() throws {
        let query = try HistoryPlanner.query(serverID: "42", after: nil, limit: nil, limits: Self.limits)
        #expect(query == HistoryPlanner.Query(serverID: id(42), after: 0, pageSize: 20, maxBytes: 1000))
        #expect(try HistoryPlanner.query(serverID: "42", after: "7", limit: "99999999999999999999", limits: Self.limits).pageSize == 50)
        #expect(try HistoryPlanner.query(serverID: "42", after: "99999999999999999999", limit: "3", limits: Self.limits).after == .max)
        for bad in ["0", "-1", "abc", "042", "", "9223372036854775808", " 1"] {
            #expect(throws: SyncError.self) { try HistoryPlanner.query(serverID: bad[...], after: nil, limit: nil, limits: Self.limits) }
            do {
                _ = try HistoryPlanner.query(serverID: bad[...], after: nil, limit: nil, limits: Self.limits)
            } catch {
                #expect(error.code == .invalidID && error.body.field == "serverID", "\(bad)")
            }
        }
        for (after, limit, code) in [("-1", "1", APIErrorCode.invalidField), ("1.5", "1", .invalidField), ("x", "1", .invalidField), ("1", "0", .invalidLimit), ("1", "-2", .invalidLimit)] {
            do {
                _ = try HistoryPlanner.query(serverID: "42", after: after, limit: limit, limits: Self.limits)
                Issue.record("accepted after=\(after) limit=\(limit)")
            } catch {
                #expect(error.code == code, "after=\(after) limit=\(limit)")
            }
        }
    }

    @Test func aPageEndsAtItsSizeOrAfterTheVersionThatReachesItsBytes() {
        let query = HistoryPlanner.Query(serverID: id(1), pageSize: 3, maxBytes: 100)
        #expect(HistoryPlanner.pageLength(sizes: [Int](), query: query) == (0, false))
        #expect(HistoryPlanner.pageLength(sizes: [10, 10], query: query) == (2, false))
        #expect(HistoryPlanner.pageLength(sizes: [10, 10, 10], query: query) == (3, false))
        #expect(HistoryPlanner.pageLength(sizes: [10, 10, 10, 10], query: query) == (3, true))
        #expect(HistoryPlanner.pageLength(sizes: [60, 40, 10], query: query) == (2, true), "the second reaches 100")
        #expect(HistoryPlanner.pageLength(sizes: [60, 39, 10], query: query) == (3, false))
        #expect(HistoryPlanner.pageLength(sizes: [500, 10], query: query) == (1, true), "at least one, whatever its size")
        #expect(HistoryPlanner.pageLength(sizes: [500], query: query) == (1, false))
    }
}
