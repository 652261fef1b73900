import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing

@testable import NotesClient

/// A local note as plain values.
struct LocalNoteValue: PullLocalNote, Sendable, Equatable {
    var id: Int64 = 1
    var isDirty = false
    var serverID: Int64? = 500
    var text = "text"
    var isDeleted = false
    var updatedAt: Int64 = 1_000
    var serverVersion: Int64? = 3
    var baseText: String? = "text"
    var isConflict = false
    var conflictOf: Int64?
    var pushError: String?
    var tagsAndFlags = TagsAndFlags()
    var baseTagsAndFlags = TagsAndFlags()
}

/// Counts what the planner reads (it must read each property at most once, and only what it needs).
final class CountingNote: PullLocalNote {
    let note: LocalNoteValue
    var reads: [String: Int] = [:]
    init(_ note: LocalNoteValue) { self.note = note }
    private func read<T>(_ name: String, _ value: T) -> T {
        reads[name, default: 0] += 1
        return value
    }
    var id: Int64 { read("id", note.id) }
    var isDirty: Bool { read("isDirty", note.isDirty) }
    var serverID: Int64? { read("serverID", note.serverID) }
    var text: String { read("text", note.text) }
    var isDeleted: Bool { read("isDeleted", note.isDeleted) }
    var updatedAt: Int64 { read("updatedAt", note.updatedAt) }
    var serverVersion: Int64? { read("serverVersion", note.serverVersion) }
    var baseText: String? { read("baseText", note.baseText) }
    var isConflict: Bool { read("isConflict", note.isConflict) }
    var conflictOf: Int64? { read("conflictOf", note.conflictOf) }
    var pushError: String? { read("pushError", note.pushError) }
    var tagsAndFlags: TagsAndFlags { read("tagsAndFlags", note.tagsAndFlags) }
    var baseTagsAndFlags: TagsAndFlags { read("baseTagsAndFlags", note.baseTagsAndFlags) }
}

/// `PullPlanner`: what one pulled record does to the local notes. Values only, no database.
@Suite("Pull planner")
struct PullPlannerTests {
    static let now: Int64 = 1_795_305_600_000
    static let recordTime = "2026-11-22T00:00:01.500Z"
    static let recordMilliseconds: Int64 = 1_795_305_601_500

    /// A record from this server (tags and flags always written: none, unless given), or, with `older`, from a
    /// server older than tags (none written).
    static func record(
        serverID: Int64 = 500, version: Int64 = 3, text: String = "text", deleted: Bool = false, conflictOf: Int64? = nil,
        updatedAt: String = recordTime, editedAt: Int64? = nil, tags: [String] = [], pinned: Bool = false,
        archived: Bool = false, older: Bool = false
    ) -> NoteRecord {
        NoteRecord(
            serverID: try! FlakeID(validating: serverID), clientID: try! FlakeID(validating: 1 << 40),
            origin: try! FlakeID(validating: 42), version: version, text: text, deleted: deleted,
            conflictOf: conflictOf.map { try! FlakeID(validating: $0) }, updatedAt: updatedAt,
            editedAt: editedAt.map { WireTime.format(unixMilliseconds: $0) }, tags: older ? nil : tags,
            pinned: older ? nil : pinned, archived: older ? nil : archived)
    }

    /// The state `take` or `insert` writes for a record: the record's, its tags and flags as its bases too (or,
    /// from an older server, `kept` and `keptBase`).
    static func pulled(_ record: NoteRecord, kept: TagsAndFlags = TagsAndFlags(), keptBase: TagsAndFlags = TagsAndFlags()) -> SyncedState {
        let state = record.tags.map { TagsAndFlags(tags: $0, pinned: record.pinned ?? false, archived: record.archived ?? false) }
        return SyncedState(
            serverID: record.serverID.rawValue, version: record.version, text: record.text, deleted: record.deleted,
            baseText: record.text, isConflict: record.conflictOf != nil, conflictOf: record.conflictOf?.rawValue,
            tagsAndFlags: state ?? kept, baseTagsAndFlags: state ?? keptBase)
    }

    // MARK: - Table

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var record: NoteRecord
        var local: LocalNoteValue?
        var outcome: PullPlanner.Outcome
        var testDescription: String { name }
    }

    static let cases: [Case] = {
        let same = record()
        let edited = record(version: 4, text: "edited elsewhere")
        let deleted = record(version: 4, text: "", deleted: true)
        let copy = record(serverID: 600, version: 1, conflictOf: 500)
        return [
            Case(
                name: "a note this device does not have is inserted",
                record: copy, local: nil,
                outcome: PullPlanner.Outcome(
                    action: .insert(
                        NewSyncedNote(
                            clientID: 1 << 40, origin: 42, state: pulled(copy),
                            createdAt: (try! FlakeID(validating: 1 << 40)).unixMilliseconds, updatedAt: recordMilliseconds)),
                    applied: true, matched: false, newConflictCopy: true)),
            Case(
                name: "an edit takes the editing device's time when the record carries it",
                record: record(version: 4, text: "edited elsewhere", editedAt: 777_000), local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(edited), updatedAt: 777_000, reindexTags: false), applied: true, matched: false)),
            Case(
                name: "a note already as pulled but with another edit time takes the time",
                record: record(editedAt: 2_000), local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(action: .take(noteID: 1, pulled(same), updatedAt: 2_000, reindexTags: false), applied: false, matched: false)),
            Case(
                name: "a note already as pulled, edit time included, is not written",
                record: record(editedAt: 1_000), local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(action: .none, applied: false, matched: false)),
            Case(
                name: "a tombstone here that an edit elsewhere brings back is reported",
                record: edited, local: LocalNoteValue(text: "", isDeleted: true, baseText: ""),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(edited), updatedAt: recordMilliseconds, reindexTags: true), applied: true, matched: false,
                    undeleted: true)),
            Case(
                name: "a note already as pulled is not written",
                record: same, local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(action: .none, applied: false, matched: false)),
            Case(
                name: "an edit from elsewhere is taken with the server's time",
                record: edited, local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(edited), updatedAt: recordMilliseconds, reindexTags: false), applied: true, matched: false)),
            Case(
                name: "a delete from elsewhere is taken",
                record: deleted, local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(deleted), updatedAt: recordMilliseconds, reindexTags: true), applied: true, matched: false)),
            Case(
                name: "a new version with the same text is taken and keeps the note's time",
                record: record(version: 9), local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(record(version: 9)), updatedAt: 1_000, reindexTags: false), applied: false, matched: false)),
            Case(
                name: "a push refusal is cleared by taking the record",
                record: same, local: LocalNoteValue(pushError: "note_too_large"),
                outcome: PullPlanner.Outcome(action: .take(noteID: 1, pulled(same), updatedAt: 1_000, reindexTags: false), applied: false, matched: false)),
            Case(
                name: "a clean note found by (client ID, origin) takes the account's version",
                record: edited, local: LocalNoteValue(serverID: nil, serverVersion: nil),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(edited), updatedAt: recordMilliseconds, reindexTags: false), applied: true, matched: true)),
            Case(
                name: "a clean unchanged note found by (client ID, origin) learns its server ID",
                record: same, local: LocalNoteValue(serverID: nil, serverVersion: nil),
                outcome: PullPlanner.Outcome(action: .take(noteID: 1, pulled(same), updatedAt: 1_000, reindexTags: false), applied: false, matched: true)),
            Case(
                name: "a dirty note found by (client ID, origin) learns its server ID only",
                record: edited, local: LocalNoteValue(isDirty: true, serverID: nil, text: "mine"),
                outcome: PullPlanner.Outcome(action: .adoptServerID(noteID: 1, serverID: 500), applied: false, matched: true)),
            Case(
                name: "a dirty note with another server ID takes the record's",
                record: edited, local: LocalNoteValue(isDirty: true, serverID: 499, text: "mine"),
                outcome: PullPlanner.Outcome(action: .adoptServerID(noteID: 1, serverID: 500), applied: false, matched: false)),
            Case(
                name: "a dirty note keeps its changes",
                record: edited, local: LocalNoteValue(isDirty: true, text: "mine"),
                outcome: PullPlanner.Outcome(action: .none, applied: false, matched: false)),
            // Tags and flags (issue 31).
            Case(
                name: "a clean note takes the server's tags and flags, and their bases, and indexes the tags again",
                record: record(tags: ["Work", "idea"], pinned: true), local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(record(tags: ["idea", "Work"], pinned: true)), updatedAt: 1_000, reindexTags: true),
                    applied: true, matched: false)),
            Case(
                name: "a clean note with the server's tags and flags is not written",
                record: record(tags: ["idea", "Work"], archived: true),
                local: LocalNoteValue(
                    tagsAndFlags: TagsAndFlags(tags: ["idea", "Work"], archived: true),
                    baseTagsAndFlags: TagsAndFlags(tags: ["idea", "Work"], archived: true)),
                outcome: PullPlanner.Outcome(action: .none, applied: false, matched: false)),
            Case(
                name: "a flag changed elsewhere is taken without indexing the tags again",
                record: record(tags: ["idea"], pinned: true),
                local: LocalNoteValue(tagsAndFlags: TagsAndFlags(tags: ["idea"]), baseTagsAndFlags: TagsAndFlags(tags: ["idea"])),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(record(tags: ["idea"], pinned: true)), updatedAt: 1_000, reindexTags: false),
                    applied: true, matched: false)),
            Case(
                name: "a dirty note keeps its tags and flags for the server to merge",
                record: record(version: 4, tags: ["theirs"], pinned: true),
                local: LocalNoteValue(isDirty: true, tagsAndFlags: TagsAndFlags(tags: ["mine"]), baseTagsAndFlags: TagsAndFlags()),
                outcome: PullPlanner.Outcome(action: .none, applied: false, matched: false)),
            Case(
                name: "a record from a server older than tags keeps the note's tags, flags and bases",
                record: record(version: 4, text: "edited elsewhere", older: true),
                local: LocalNoteValue(
                    tagsAndFlags: TagsAndFlags(tags: ["mine"], pinned: true), baseTagsAndFlags: TagsAndFlags(tags: ["base"])),
                outcome: PullPlanner.Outcome(
                    action: .take(
                        noteID: 1,
                        pulled(
                            record(version: 4, text: "edited elsewhere", older: true), kept: TagsAndFlags(tags: ["mine"], pinned: true),
                            keptBase: TagsAndFlags(tags: ["base"])), updatedAt: recordMilliseconds, reindexTags: false),
                    applied: true, matched: false)),
            Case(
                name: "a note new here comes with its tags and flags",
                record: record(serverID: 601, version: 1, tags: ["b", "A"], archived: true), local: nil,
                outcome: PullPlanner.Outcome(
                    action: .insert(
                        NewSyncedNote(
                            clientID: 1 << 40, origin: 42, state: pulled(record(serverID: 601, version: 1, tags: ["A", "b"], archived: true)),
                            createdAt: (try! FlakeID(validating: 1 << 40)).unixMilliseconds, updatedAt: recordMilliseconds)),
                    applied: true, matched: false)),
            Case(
                name: "a record time that does not parse is now",
                record: record(text: "new", updatedAt: "yesterday"), local: LocalNoteValue(),
                outcome: PullPlanner.Outcome(
                    action: .take(noteID: 1, pulled(record(text: "new", updatedAt: "yesterday")), updatedAt: now, reindexTags: false), applied: true,
                    matched: false)),
        ]
    }()

    @Test(arguments: cases)
    func table(_ example: Case) {
        #expect(PullPlanner.apply(example.record, local: example.local, now: Self.now) == example.outcome)
    }

    @Test(arguments: cases)
    func readsEachPropertyAtMostOnce(_ example: Case) throws {
        guard let local = example.local else { return }
        let counting = CountingNote(local)
        #expect(PullPlanner.apply(example.record, local: counting, now: Self.now) == example.outcome)
        #expect(counting.reads.values.allSatisfy { $0 == 1 }, "\(counting.reads)")
        if local.isDirty {
            #expect(counting.reads["text"] == nil && counting.reads["baseText"] == nil, "a dirty note's texts are not read")
        }
    }

    // MARK: - Properties

    /// What the store writes for an action, on a model of the note.
    static func applying(_ action: PullPlanner.Action, to local: LocalNoteValue?) -> LocalNoteValue? {
        switch action {
        case .none:
            return local
        case .adoptServerID(_, let serverID):
            var note = local!
            note.serverID = serverID
            return note
        case .insert(let new):
            return LocalNoteValue(
                id: 99, isDirty: false, serverID: new.state.serverID, text: new.state.text, isDeleted: new.state.deleted,
                updatedAt: new.updatedAt, serverVersion: new.state.version, baseText: new.state.baseText,
                isConflict: new.state.isConflict, conflictOf: new.state.conflictOf, pushError: nil,
                tagsAndFlags: new.state.tagsAndFlags, baseTagsAndFlags: new.state.baseTagsAndFlags)
        case .take(_, let state, let updatedAt, _):
            var note = local!
            note.serverID = state.serverID
            note.serverVersion = state.version
            note.text = state.text
            note.isDeleted = state.deleted
            note.baseText = state.baseText
            note.isConflict = state.isConflict
            note.conflictOf = state.conflictOf
            note.pushError = nil
            note.updatedAt = updatedAt
            note.tagsAndFlags = state.tagsAndFlags
            note.baseTagsAndFlags = state.baseTagsAndFlags
            return note
        }
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func pullingARecordTwiceChangesNothingTheSecondTime(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let texts = ["a", "b", "", "e\u{301}", "\u{e9}"]
        for _ in 0..<1_000 {
            let record = Self.record(
                serverID: Int64.random(in: 500...501, using: &random), version: Int64.random(in: 1...3, using: &random),
                text: texts.randomElement(using: &random)!, deleted: Bool.random(using: &random),
                conflictOf: Bool.random(using: &random) ? 7 : nil,
                updatedAt: Bool.random(using: &random) ? Self.recordTime : "garbage",
                editedAt: [nil, 1_000, 5_000].randomElement(using: &random)!,
                tags: [[], ["a"], ["a", "B"]].randomElement(using: &random)!, pinned: Bool.random(using: &random),
                older: Int.random(in: 0..<4, using: &random) == 0)
            let local: LocalNoteValue? =
                Int.random(in: 0..<5, using: &random) == 0
                ? nil
                : LocalNoteValue(
                    id: 1, isDirty: Bool.random(using: &random),
                    serverID: [nil, 500, 501].randomElement(using: &random)!, text: texts.randomElement(using: &random)!,
                    isDeleted: Bool.random(using: &random), updatedAt: 1_000,
                    serverVersion: [nil, 1, 2, 3].randomElement(using: &random)!,
                    baseText: [nil, "a", "b", ""].randomElement(using: &random)!, isConflict: Bool.random(using: &random),
                    conflictOf: [nil, 7].randomElement(using: &random)!,
                    pushError: Bool.random(using: &random) ? "note_too_large" : nil,
                    tagsAndFlags: TagsAndFlags(tags: [[], ["a"], ["c"]].randomElement(using: &random)!, archived: Bool.random(using: &random)),
                    baseTagsAndFlags: TagsAndFlags(tags: [[], ["a"]].randomElement(using: &random)!))
            let first = PullPlanner.apply(record, local: local, now: Self.now)
            let context = "seed \(seed): \(record) over \(String(describing: local)) → \(first)"
            #expect(first.matched == (local != nil && local?.serverID == nil), "\(context)")
            switch first.action {
            case .insert, .take: break
            case .adoptServerID, .none: #expect(!first.applied, "\(context)")
            }
            if local?.isDirty == true {
                guard case .take = first.action else { continue }
                Issue.record("a dirty note is never overwritten: \(context)")
            }
            let after = Self.applying(first.action, to: local)
            let second = PullPlanner.apply(record, local: after, now: Self.now)
            #expect(second.action == .none && !second.applied, "\(context) then \(second)")
        }
    }
}
