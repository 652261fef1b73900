import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing

@testable import NotesClient

/// `OutboxPlanner`: what a push round sends, in which order and batches. Values only, no database.
@Suite("Outbox planner")
struct OutboxPlannerTests {
    typealias State = OutboxPlanner.NoteState

    /// Every combination of the six flags.
    static let allStates: [State] = (0..<64).map { bits in
        State(
            isDirty: bits & 1 != 0, isDeleted: bits & 2 != 0, hasBaseText: bits & 4 != 0, hasServerID: bits & 8 != 0,
            hasSnapshot: bits & 16 != 0, hasPushError: bits & 32 != 0)
    }

    // MARK: - Queueing

    struct QueueCase: Sendable, CustomTestStringConvertible {
        var name: String
        var state: State
        var isDirty: Bool
        var needsSnapshot: Bool
        var testDescription: String { name }
    }

    static let queueCases: [QueueCase] = [
        QueueCase(
            name: "an edited synced note is snapshotted",
            state: State(isDirty: true, isDeleted: false, hasBaseText: true, hasServerID: true, hasSnapshot: false, hasPushError: false),
            isDirty: true, needsSnapshot: true),
        QueueCase(
            name: "a clean synced note stays clean",
            state: State(isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: true, hasSnapshot: false, hasPushError: false),
            isDirty: false, needsSnapshot: false),
        QueueCase(
            name: "a clean live note without server ID (left by a sign-in) is queued again",
            state: State(isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: false, hasSnapshot: false, hasPushError: false),
            isDirty: true, needsSnapshot: true),
        QueueCase(
            name: "a clean tombstone without server ID is not queued again",
            state: State(isDirty: false, isDeleted: true, hasBaseText: true, hasServerID: false, hasSnapshot: false, hasPushError: false),
            isDirty: false, needsSnapshot: false),
        QueueCase(
            name: "a dirty tombstone never synced anywhere is settled",
            state: State(isDirty: true, isDeleted: true, hasBaseText: false, hasServerID: false, hasSnapshot: false, hasPushError: false),
            isDirty: false, needsSnapshot: false),
        QueueCase(
            name: "a dirty tombstone with a snapshot in flight keeps it",
            state: State(isDirty: true, isDeleted: true, hasBaseText: false, hasServerID: false, hasSnapshot: true, hasPushError: false),
            isDirty: true, needsSnapshot: false),
        QueueCase(
            name: "a dirty tombstone with a base is pushed",
            state: State(isDirty: true, isDeleted: true, hasBaseText: true, hasServerID: false, hasSnapshot: false, hasPushError: false),
            isDirty: true, needsSnapshot: true),
        QueueCase(
            name: "a refused note waits for an edit",
            state: State(isDirty: true, isDeleted: false, hasBaseText: true, hasServerID: true, hasSnapshot: false, hasPushError: true),
            isDirty: true, needsSnapshot: false),
        QueueCase(
            name: "a note whose snapshot is in flight gets no second one",
            state: State(isDirty: true, isDeleted: false, hasBaseText: true, hasServerID: true, hasSnapshot: true, hasPushError: false),
            isDirty: true, needsSnapshot: false),
    ]

    @Test(arguments: queueCases)
    func queueing(_ example: QueueCase) {
        let result = OutboxPlanner.prepare(example.state)
        #expect(result.isDirty == example.isDirty)
        #expect(result.needsSnapshot == example.needsSnapshot)
    }

    @Test func queueingRulesOverEveryState() {
        for state in Self.allStates {
            let result = OutboxPlanner.prepare(state)
            // A snapshot goes only to a dirty note with neither a snapshot nor a refusal.
            #expect(!result.needsSnapshot || (result.isDirty && !state.hasSnapshot && !state.hasPushError), "\(state)")
            // A tombstone never synced anywhere is never sent.
            if state.isDeleted && !state.hasBaseText && !state.hasServerID && !state.hasSnapshot {
                #expect(!result.isDirty && !result.needsSnapshot, "\(state)")
            }
            // A live note without a server ID and without a refusal or snapshot is always sent.
            if !state.isDeleted && !state.hasServerID && !state.hasSnapshot && !state.hasPushError {
                #expect(result.needsSnapshot, "\(state)")
            }
            // A synced note is queued only by its own dirty flag.
            if state.hasServerID { #expect(result.isDirty == state.isDirty, "\(state)") }
            // A second round over the result changes no flag.
            var again = state
            again.isDirty = result.isDirty
            #expect(OutboxPlanner.prepare(again).isDirty == result.isDirty, "\(state)")
        }
    }

    /// A note refused for the account's quota, or for a chunk the account lacks (`unknown_chunk`: the next sync
    /// uploads what the cache holds), is tried again at every sync, without an edit; any other refusal waits for an
    /// edit (the note stays as the server cannot take it until it changes).
    @Test func onlyQuotaAndUnknownChunkRefusalsAreRetriedAtEverySync() {
        #expect(OutboxPlanner.retriesAtEverySync(APIErrorCode.quotaExceeded.rawValue))
        #expect(OutboxPlanner.retriesAtEverySync(APIErrorCode.unknownChunk.rawValue))
        for code in APIErrorCode.allKnown where code != .quotaExceeded && code != .unknownChunk {
            #expect(!OutboxPlanner.retriesAtEverySync(code.rawValue), "\(code)")
        }
        #expect(!OutboxPlanner.retriesAtEverySync("rejected"))
        #expect(!OutboxPlanner.retriesAtEverySync("a code from a newer server"))
    }

    /// Pending: dirty and not refused; a snapshot goes to a pending note with none in flight.
    @Test func pendingIsDirtyAndNotRefused() {
        for state in Self.allStates {
            #expect(OutboxPlanner.isPending(state) == (state.isDirty && !state.hasPushError), "\(state)")
            #expect(OutboxPlanner.needsSnapshot(state) == (OutboxPlanner.isPending(state) && !state.hasSnapshot), "\(state)")
        }
    }

    // MARK: - Snapshots

    @Test func snapshotsTakeTheNotesStateAndTheirEditIDsInOrder() throws {
        let edits = [try FlakeID(validating: 1000), try FlakeID(validating: 2000)]
        let notes = [
            OutboxPlanner.DirtyNote(
                id: 3, text: "hello", isDeleted: false, serverVersion: 4, baseText: "hell", serverID: try FlakeID(validating: 77), revision: 5),
            OutboxPlanner.DirtyNote(id: 9, text: "gone", isDeleted: true, serverVersion: nil, baseText: "gone", serverID: nil, revision: 2),
        ]
        #expect(
            OutboxPlanner.snapshots(of: notes, editIDs: edits) == [
                OutboxPlanner.Snapshot(
                    noteID: 3, editID: edits[0], text: "hello", deleted: false, baseVersion: 4, baseText: "hell",
                    serverID: try FlakeID(validating: 77), revision: 5, editedAt: 0),
                OutboxPlanner.Snapshot(
                    noteID: 9, editID: edits[1], text: "", deleted: true, baseVersion: nil, baseText: "gone", serverID: nil,
                    revision: 2, editedAt: 0),
            ])
        #expect(OutboxPlanner.snapshots(of: [], editIDs: []).isEmpty)
    }

    @Test func aChangeSendsTheNotesTagsAndFlagsWithTheirBases() throws {
        let note = OutboxPlanner.DirtyNote(
            id: 3, text: "hello", isDeleted: false, serverVersion: 4, baseText: "hell", serverID: try FlakeID(validating: 77),
            revision: 5, tagsAndFlags: TagsAndFlags(tags: ["idea", "Work"], pinned: true),
            baseTagsAndFlags: TagsAndFlags(tags: ["idea"], archived: true))
        let snapshot = OutboxPlanner.snapshots(of: [note], editIDs: [try FlakeID(validating: 1000)])[0]
        let entry = OutboxEntry(snapshot: snapshot, clientID: try FlakeID(validating: 5), origin: try FlakeID(validating: 42), isConflict: false)
        let change = entry.change
        #expect(change.tags == ["idea", "Work"] && change.pinned == true && change.archived == false)
        #expect(change.baseTags == ["idea"] && change.basePinned == false && change.baseArchived == true)

        // A note never synced sends the empty set and false as its bases: nothing the server has is taken off.
        let new = OutboxPlanner.DirtyNote(id: 4, text: "new", isDeleted: false, serverVersion: nil, baseText: nil, serverID: nil, revision: 1)
        let fresh = OutboxEntry(
            snapshot: OutboxPlanner.snapshots(of: [new], editIDs: [try FlakeID(validating: 1001)])[0], clientID: try FlakeID(validating: 6),
            origin: try FlakeID(validating: 42), isConflict: false
        ).change
        #expect(fresh.tags == [] && fresh.baseTags == [] && fresh.basePinned == false && fresh.baseArchived == false)

        // A snapshot taken before tags existed is sent as it was: without them.
        var old = entry
        old.tagsAndFlags = nil
        old.baseTagsAndFlags = nil
        let sent = old.change
        #expect(sent.tags == nil && sent.pinned == nil && sent.archived == nil)
        #expect(sent.baseTags == nil && sent.basePinned == nil && sent.baseArchived == nil)
        #expect(!String(decoding: sent.encodedJSON(), as: UTF8.self).contains("ags"), "no tag field on the wire")
    }

    // MARK: - Order

    @Test func pushOrderPutsConflictCopiesFirstThenOldestEdit() throws {
        let entries = try [(5, false), (3, true), (1, false), (9, true), (4, false)].map { edit, conflict in
            try entry(edit: Int64(edit), isConflict: conflict)
        }
        #expect(OutboxPlanner.pushOrder(entries).map(\.editID.rawValue) == [3, 9, 1, 4, 5])
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func pushOrderProperties(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<50 {
            var editIDs = Set<Int64>()
            let count = Int.random(in: 0...30, using: &random)
            while editIDs.count < count { editIDs.insert(Int64.random(in: 1...10_000, using: &random)) }
            let entries = try editIDs.shuffled(using: &random).map { try entry(edit: $0, isConflict: Bool.random(using: &random)) }
            let ordered = OutboxPlanner.pushOrder(entries)
            #expect(ordered.map(\.editID).sorted() == entries.map(\.editID).sorted(), "a permutation (seed \(seed))")
            let copies = ordered.prefix { $0.isConflict }
            #expect(!ordered.dropFirst(copies.count).contains { $0.isConflict }, "copies first (seed \(seed))")
            for group in [Array(copies), Array(ordered.dropFirst(copies.count))] {
                #expect(zip(group, group.dropFirst()).allSatisfy { $0.editID < $1.editID }, "oldest edit first (seed \(seed))")
            }
            #expect(OutboxPlanner.pushOrder(ordered.shuffled(using: &random)) == ordered, "a total order (seed \(seed))")
        }
    }

    // MARK: - Sending

    @Test func plansRefuseWhatTheServerCouldNeverTake() throws {
        var limits = SyncLimits()
        limits.maxNoteBytes = 200
        limits.maxBodyBytes = 1024
        limits.maxBatchChanges = 2
        let small = try entry(edit: 1, text: "small")
        let tooLarge = try entry(edit: 2, text: String(repeating: "x", count: 201))
        // At the note limit, but 200 control characters quoted as `\u0001` do not fit in one body.
        let tooWide = try entry(edit: 3, text: String(repeating: "\u{1}", count: 200))
        let other = try entry(edit: 4, text: "other")
        let last = try entry(edit: 5, text: "last")
        let plan = OutboxPlanner.plan([small, tooLarge, tooWide, other, last], limits: limits)
        #expect(plan.refused.map(\.entry.editID.rawValue) == [2, 3])
        #expect(plan.refused.map(\.error.code) == [.noteTooLarge, .bodyTooLarge])
        #expect(plan.batches.map { $0.map(\.entry.editID.rawValue) } == [[1, 4], [5]])
        #expect(plan.total == 3)
        #expect(plan.batches.joined().allSatisfy { $0.json == $0.entry.change.encodedJSON() })
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func batchesFitTheLimitsAndCloseOnlyWhenTheyMust(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<100 {
            var limits = SyncLimits()
            limits.maxBatchChanges = Int.random(in: 1...8, using: &random)
            limits.maxBodyBytes = Int.random(in: 20...400, using: &random)
            let sizes = (0..<Int.random(in: 0...40, using: &random)).map { _ in Int.random(in: 1...120, using: &random) }
            let prepared = sizes.enumerated().map { index, size in
                OutboxPlanner.Prepared(entry: try! entry(edit: Int64(index + 1)), json: Data(repeating: UInt8(ascii: "x"), count: size))
            }
            let batches = OutboxPlanner.batches(prepared, limits: limits)
            #expect(batches.joined().map(\.entry.editID) == prepared.map(\.entry.editID), "order kept (seed \(seed))")
            #expect(batches.allSatisfy { !$0.isEmpty && $0.count <= limits.maxBatchChanges }, "seed \(seed)")
            for batch in batches {
                let bytes = OutboxPlanner.body(of: batch).count
                #expect(bytes <= limits.maxBodyBytes || batch.count == 1, "only a lone change may overflow (seed \(seed))")
            }
            for (batch, next) in zip(batches, batches.dropFirst()) {
                let grown = batch + [next[0]]
                #expect(
                    grown.count > limits.maxBatchChanges || OutboxPlanner.body(of: grown).count > limits.maxBodyBytes,
                    "a batch closes only when the next change breaks a limit (seed \(seed))")
            }
        }
    }

    @Test func theBodyIsThePushRequestAndTheEnvelopeCountIsExact() throws {
        let entries = try [entry(edit: 1, text: "one"), entry(edit: 2, text: "two \"quoted\""), entry(edit: 3, text: "")]
        let prepared = entries.map { OutboxPlanner.Prepared(entry: $0, json: $0.change.encodedJSON()) }
        for count in 0...prepared.count {
            let batch = Array(prepared.prefix(count))
            let body = OutboxPlanner.body(of: batch)
            let commas = max(0, count - 1)
            #expect(body.count == OutboxPlanner.pushEnvelopeBytes + batch.map(\.json.count).reduce(0, +) + commas)
            let request = try WireJSON.decoder().decode(PushRequest.self, from: body)
            #expect(request.changes == batch.map(\.entry.change))
        }
    }

    @Test func aBatchTheServerFindsTooLargeIsHalvedOrItsLoneChangeRefused() throws {
        let prepared = try (1...5).map { OutboxPlanner.Prepared(entry: try entry(edit: Int64($0)), json: Data("{}".utf8)) }
        #expect(OutboxPlanner.whenTooLarge(prepared, serverError: nil) == .split(Array(prepared[..<2]), Array(prepared[2...])))
        #expect(OutboxPlanner.whenTooLarge(Array(prepared[..<2]), serverError: nil) == .split([prepared[0]], [prepared[1]]))
        let fallback = OutboxPlanner.whenTooLarge([prepared[3]], serverError: nil)
        guard case .refuse(let refused) = fallback else { Issue.record("expected a refusal"); return }
        #expect(refused.entry == prepared[3].entry && refused.error.code == .bodyTooLarge)
        let serverError = APIErrorBody(code: .bodyTooLarge, message: "The server says no.")
        #expect(
            OutboxPlanner.whenTooLarge([prepared[0]], serverError: serverError)
                == .refuse(OutboxPlanner.Refused(entry: prepared[0].entry, error: serverError)))
    }

    // MARK: - Support

    func entry(edit: Int64, text: String = "text", isConflict: Bool = false) throws -> OutboxEntry {
        OutboxEntry(
            snapshot: OutboxPlanner.Snapshot(
                noteID: edit, editID: try FlakeID(validating: edit), text: text, deleted: false, baseVersion: nil, baseText: nil,
                serverID: nil, revision: 1, editedAt: nil),
            clientID: try FlakeID(validating: 1_000_000 + edit), origin: try FlakeID(validating: 42), isConflict: isConflict)
    }
}
