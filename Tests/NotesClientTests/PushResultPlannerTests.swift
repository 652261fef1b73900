import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing

@testable import NotesClient

/// `PushResultPlanner`: what one push result does to the local note. Values only, no database.
@Suite("Push result planner")
struct PushResultPlannerTests {
    static let now: Int64 = 1_795_305_600_000
    static let serverID: Int64 = 5_000
    static let origin: Int64 = 42

    static func entry(deleted: Bool = false, revision: Int64 = 3, text: String = "pushed") -> OutboxEntry {
        OutboxEntry(
            snapshot: OutboxPlanner.Snapshot(
                noteID: 7, editID: try! FlakeID(validating: 900), text: deleted ? "" : text, deleted: deleted, baseVersion: 2,
                baseText: "base", serverID: try! FlakeID(validating: serverID), revision: revision, editedAt: nil),
            clientID: try! FlakeID(validating: 1_000), origin: try! FlakeID(validating: origin), isConflict: false)
    }

    static func result(
        _ status: ChangeStatus, serverID: Int64? = serverID, version: Int64? = 4, text: String? = nil,
        conflict: ConflictCopy? = nil, replayed: Bool = false, error: APIErrorBody? = nil
    ) -> ChangeResult {
        ChangeResult(
            clientID: try! FlakeID(validating: 1_000), editID: try! FlakeID(validating: 900), status: status,
            serverID: serverID.map { try! FlakeID(validating: $0) }, version: version, text: text, conflict: conflict,
            replayed: replayed, error: error)
    }

    // MARK: - Accepted, not edited meanwhile

    struct SettleCase: Sendable, CustomTestStringConvertible {
        var status: ChangeStatus
        var pushedDelete: Bool
        var deleted: Bool
        var testDescription: String { "\(status)\(pushedDelete ? " (a delete)" : "")" }
    }

    static let settleCases: [SettleCase] = [
        SettleCase(status: .created, pushedDelete: false, deleted: false),
        SettleCase(status: .reconciled, pushedDelete: false, deleted: false),
        SettleCase(status: .reconciled, pushedDelete: true, deleted: true),
        SettleCase(status: .updated, pushedDelete: false, deleted: false),
        SettleCase(status: .unchanged, pushedDelete: false, deleted: false),
        SettleCase(status: .unchanged, pushedDelete: true, deleted: true),
        SettleCase(status: .merged, pushedDelete: false, deleted: false),
        SettleCase(status: .conflict, pushedDelete: false, deleted: false),
        SettleCase(status: .deleted, pushedDelete: true, deleted: true),
        SettleCase(status: .kept, pushedDelete: true, deleted: false),
    ]

    @Test(arguments: settleCases)
    func aNoteNotEditedMeanwhileSettles(_ example: SettleCase) throws {
        let entry = Self.entry(deleted: example.pushedDelete)
        let (acceptance, settle) = try #require(Self.settled(Self.result(example.status), entry, localRevision: entry.revision))
        #expect(acceptance.releaseServerID == Self.serverID)
        #expect(settle.deleted == example.deleted)
        #expect(settle.text == entry.text && settle.baseText == entry.text)
        #expect(settle.serverID == Self.serverID && settle.serverVersion == 4)
        #expect(settle.updatedAt == nil, "the text is the pushed one: the note keeps its time")
    }

    @Test func theServersTextWinsAndStampsTheNote() {
        let entry = Self.entry()
        let action = PushResultPlanner.apply(
            Self.result(.merged, text: "merged text"), to: entry, localRevision: entry.revision, now: Self.now)
        #expect(
            action
                == .accept(
                    PushResultPlanner.Acceptance(
                        releaseServerID: Self.serverID, conflictCopy: nil,
                        update: .settle(
                            PushResultPlanner.Settle(
                                serverID: Self.serverID, serverVersion: 4, text: "merged text", deleted: false,
                                baseText: "merged text", updatedAt: Self.now, tagsAndFlags: TagsAndFlags())))))
    }

    @Test func aReplayForgetsTheVersion() throws {
        let entry = Self.entry()
        let (_, settle) = try #require(Self.settled(Self.result(.updated, replayed: true), entry))
        #expect(settle.serverVersion == nil)
    }

    @Test func aDeleteTheServerStoredNothingForStaysALocalTombstone() {
        let entry = Self.entry(deleted: true)
        let action = PushResultPlanner.apply(
            Self.result(.unchanged, serverID: nil, version: nil), to: entry, localRevision: 3, now: Self.now)
        #expect(
            action
                == .accept(
                    PushResultPlanner.Acceptance(
                        releaseServerID: nil, conflictCopy: nil,
                        update: .settle(
                            PushResultPlanner.Settle(
                                serverID: nil, serverVersion: nil, text: "", deleted: true, baseText: nil, updatedAt: nil,
                                tagsAndFlags: TagsAndFlags())))))
    }

    // MARK: - Accepted, edited meanwhile

    @Test func aNoteEditedMeanwhileRebasesOnWhatWasPushed() {
        let entry = Self.entry()
        #expect(
            PushResultPlanner.apply(Self.result(.updated, text: "server"), to: entry, localRevision: 4, now: Self.now)
                == .accept(
                    PushResultPlanner.Acceptance(
                        releaseServerID: Self.serverID, conflictCopy: nil,
                        update: .rebase(serverID: Self.serverID, baseText: "pushed", baseTagsAndFlags: TagsAndFlags()))))
        #expect(
            PushResultPlanner.apply(Self.result(.unchanged, serverID: nil), to: entry, localRevision: 4, now: Self.now)
                == .accept(PushResultPlanner.Acceptance(releaseServerID: nil, conflictCopy: nil, update: nil)),
            "without a server ID there is nothing to learn")
    }

    // MARK: - Conflicts

    @Test func aConflictKeepsTheServersCopyHere() throws {
        let copyClientID = try FlakeID(validating: 1_795_305_600_000 << 22)
        let copy = ConflictCopy(serverID: try FlakeID(validating: 6_000), clientID: copyClientID)
        let entry = Self.entry(text: "my line")
        let action = PushResultPlanner.apply(
            Self.result(.conflict, text: "their line", conflict: copy), to: entry, localRevision: 3, now: Self.now + 5)
        guard case .accept(let acceptance) = action else {
            Issue.record("expected an acceptance")
            return
        }
        #expect(
            acceptance.conflictCopy
                == NewSyncedNote(
                    clientID: copyClientID.rawValue, origin: Self.origin,
                    state: SyncedState(
                        serverID: 6_000, version: 1, text: "my line", deleted: false, baseText: "my line", isConflict: true,
                        conflictOf: Self.serverID),
                    createdAt: copyClientID.unixMilliseconds, updatedAt: Self.now + 5, conflictHere: true))
        #expect(
            acceptance.update
                == .settle(
                    PushResultPlanner.Settle(
                        serverID: Self.serverID, serverVersion: 4, text: "their line", deleted: false, baseText: "their line",
                        updatedAt: Self.now + 5, tagsAndFlags: TagsAndFlags())))

        let noServerID = PushResultPlanner.apply(
            Self.result(.conflict, serverID: nil, conflict: copy), to: entry, localRevision: 3, now: Self.now)
        guard case .accept(let without) = noServerID else {
            Issue.record("expected an acceptance")
            return
        }
        #expect(without.conflictCopy == nil, "a copy needs the note it was split from")
    }

    // MARK: - Tags and flags (issue 31)

    static func tagged(_ entry: OutboxEntry, _ state: TagsAndFlags?, base: TagsAndFlags? = TagsAndFlags()) -> OutboxEntry {
        var entry = entry
        entry.tagsAndFlags = state
        entry.baseTagsAndFlags = base
        return entry
    }

    /// What answering `entry`'s push with `result` does when it settles the note (not edited since the snapshot at
    /// `localRevision`): the acceptance and its settle; nil for any other action.
    static func settled(
        _ result: ChangeResult, _ entry: OutboxEntry, localRevision: Int64 = 3
    ) -> (acceptance: PushResultPlanner.Acceptance, settle: PushResultPlanner.Settle)? {
        guard case .accept(let acceptance) = PushResultPlanner.apply(result, to: entry, localRevision: localRevision, now: now),
            case .settle(let settle) = acceptance.update
        else { return nil }
        return (acceptance, settle)
    }

    @Test func theServersMergedTagsAndFlagsBecomeTheNotesAndItsBases() throws {
        let entry = Self.tagged(Self.entry(), TagsAndFlags(tags: ["mine"]))
        var result = Self.result(.merged, text: "merged text")
        result.tags = ["theirs", "Mine"]
        result.pinned = true
        let (_, settle) = try #require(Self.settled(result, entry))
        #expect(settle.tagsAndFlags == TagsAndFlags(tags: ["Mine", "theirs"], pinned: true), "in key order")
        #expect(settle.reindexTags, "the tags changed")

        // The answer leaves out what the note holds as pushed.
        let (_, settled) = try #require(Self.settled(Self.result(.updated), entry))
        #expect(settled.tagsAndFlags == TagsAndFlags(tags: ["mine"]) && !settled.reindexTags)
    }

    @Test func aDeleteTheServerRefusedBringsTheTagsBack() throws {
        let entry = Self.tagged(Self.entry(deleted: true), TagsAndFlags(tags: ["kept"]))
        let (_, settle) = try #require(Self.settled(Self.result(.kept, text: "edited elsewhere"), entry))
        #expect(!settle.deleted && settle.reindexTags, "a live note again: its tags are listed again")
    }

    @Test func aConflictCopyKeepsThePushingDevicesTagsAndFlags() throws {
        let copy = ConflictCopy(serverID: try FlakeID(validating: 6_000), clientID: try FlakeID(validating: 1 << 30))
        let mine = TagsAndFlags(tags: ["mine"], archived: true)
        let entry = Self.tagged(Self.entry(text: "my line"), mine)
        var result = Self.result(.conflict, text: "their line", conflict: copy)
        result.tags = ["mine", "theirs"]
        result.archived = false
        let (acceptance, settle) = try #require(Self.settled(result, entry))
        #expect(acceptance.conflictCopy?.state.tagsAndFlags == mine && acceptance.conflictCopy?.state.baseTagsAndFlags == mine)
        #expect(settle.tagsAndFlags == TagsAndFlags(tags: ["mine", "theirs"]), "the note keeps the merged ones")
    }

    @Test func aSnapshotTakenBeforeTagsLeavesTheNotesTagsAndFlags() throws {
        let entry = Self.tagged(Self.entry(), nil, base: nil)
        let (_, settle) = try #require(Self.settled(Self.result(.updated), entry))
        #expect(settle.tagsAndFlags == nil && !settle.reindexTags)
        #expect(
            PushResultPlanner.apply(Self.result(.updated), to: entry, localRevision: 4, now: Self.now)
                == .accept(
                    PushResultPlanner.Acceptance(
                        releaseServerID: Self.serverID, update: .rebase(serverID: Self.serverID, baseText: "pushed", baseTagsAndFlags: nil))))
    }

    @Test func aNoteEditedMeanwhileTakesThePushedTagsAndFlagsAsItsBases() {
        let pushed = TagsAndFlags(tags: ["a", "b"], pinned: true)
        let entry = Self.tagged(Self.entry(), pushed, base: TagsAndFlags(tags: ["a"]))
        #expect(
            PushResultPlanner.apply(Self.result(.updated), to: entry, localRevision: 4, now: Self.now)
                == .accept(
                    PushResultPlanner.Acceptance(
                        releaseServerID: Self.serverID, update: .rebase(serverID: Self.serverID, baseText: "pushed", baseTagsAndFlags: pushed))))
    }

    // MARK: - Refusals

    struct RefusalCase: Sendable, CustomTestStringConvertible {
        var error: APIErrorBody?
        var refusal: PushResultPlanner.Refusal
        var testDescription: String { error?.code.rawValue ?? "no error body" }
    }

    static let refusalCases: [RefusalCase] = [
        RefusalCase(error: APIErrorBody(code: .unknownNote, message: "gone"), refusal: .forgetServerID),
        RefusalCase(error: APIErrorBody(code: .invalidBase, message: "behind"), refusal: .forgetServerVersion),
        RefusalCase(
            error: APIErrorBody(code: .noteTooLarge, message: "big"),
            refusal: .recordError(APIErrorBody(code: .noteTooLarge, message: "big"))),
        RefusalCase(
            error: nil,
            refusal: .recordError(APIErrorBody(code: APIErrorCode("rejected"), message: "The server refused the change."))),
    ]

    @Test(arguments: refusalCases)
    func aRejectedChangeIsRefused(_ example: RefusalCase) {
        let entry = Self.entry()
        for revision in [entry.revision, entry.revision + 1] {
            #expect(
                PushResultPlanner.apply(Self.result(.rejected, error: example.error), to: entry, localRevision: revision, now: Self.now)
                    == .refuse(example.refusal))
        }
        if let error = example.error { #expect(PushResultPlanner.refusal(for: error) == example.refusal) }
    }

    // MARK: - Properties

    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func rulesHoldForRandomResults(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<500 {
            let status = ChangeStatus.allCases.randomElement(using: &random)!
            let serverID: Int64? = Bool.random(using: &random) ? Int64.random(in: 1...50, using: &random) : nil
            let copy: ConflictCopy? =
                Bool.random(using: &random)
                ? ConflictCopy(serverID: try FlakeID(validating: 60), clientID: try FlakeID(validating: 1 << 30)) : nil
            let result = Self.result(
                status, serverID: serverID, version: Int64.random(in: 1...9, using: &random),
                text: Bool.random(using: &random) ? "server text" : nil, conflict: copy, replayed: Bool.random(using: &random),
                error: nil)
            let entry = Self.entry(deleted: Bool.random(using: &random), revision: 3)
            let revision = Int64.random(in: 3...4, using: &random)
            let action = PushResultPlanner.apply(result, to: entry, localRevision: revision, now: Self.now)
            let context = "seed \(seed): \(result) at revision \(revision)"
            guard case .accept(let acceptance) = action else {
                #expect(status == .rejected, "\(context)")
                continue
            }
            #expect(status != .rejected, "\(context)")
            #expect(acceptance.releaseServerID == serverID, "\(context)")
            #expect((acceptance.conflictCopy != nil) == (status == .conflict && copy != nil && serverID != nil), "\(context)")
            if let row = acceptance.conflictCopy {
                #expect(row.state.text == entry.text && row.state.conflictOf == serverID && row.origin == Self.origin, "\(context)")
            }
            switch acceptance.update {
            case .settle(let settle):
                #expect(revision == entry.revision, "\(context)")
                #expect(settle.serverID == serverID && settle.text == (result.text ?? entry.text), "\(context)")
                #expect((settle.baseText == nil) == (serverID == nil && settle.deleted), "\(context)")
                #expect(settle.baseText == nil || settle.baseText == settle.text, "\(context)")
                #expect((settle.updatedAt != nil) == (result.text != nil), "\(context)")
                #expect(settle.serverVersion == (result.replayed ? nil : result.version), "\(context)")
                #expect(settle.reindexTags == (settle.deleted != entry.deleted), "\(context)")
            case .rebase(let rebasedID, let baseText, let baseTagsAndFlags):
                #expect(revision != entry.revision && rebasedID == serverID && baseText == entry.text, "\(context)")
                #expect(baseTagsAndFlags == entry.tagsAndFlags, "\(context)")
            case nil:
                #expect(revision != entry.revision && serverID == nil, "\(context)")
            }
        }
    }

    @Test func acceptedResultsAreCounted() {
        var report = SyncReport()
        // `stale` (encrypted accounts only) is not an acceptance: nothing was stored.
        for status in ChangeStatus.allCases where status != .rejected && status != .stale {
            report.countAccepted(Self.result(status, replayed: status == .updated))
        }
        #expect(report.pushed == 8 && report.replayed == 1)
        #expect(
            [report.created, report.reconciled, report.updated, report.unchanged, report.merged, report.conflicts,
             report.deleted, report.kept] == Array(repeating: 1, count: 8))
    }
}
