import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// The texts applied edits keep for replays (`merged`, `conflict`, `kept` answers) count against the byte limit beside
/// the notes' texts and their history's, and the retention purge gives them back.
extension NoteStoreConformance {
    /// 100 bytes in ten lines.
    static let hundredBytes = String(repeating: "abcdefghi\n", count: 10)

    /// A clean merge whose result is the note's text: the note is not written, the answer (100 bytes) is kept.
    static func hostileMerge(_ server: FlakeID?, edit: Int64) -> NoteChange {
        change(1, server: server, edit: edit, text: "base\n", baseText: "base\n")
    }

    static let replayQuotaChecks: [Check] = [
        Check(name: "quota: a merging loop is stopped at the byte limit, counting the texts kept for replays") { store in
            let alice = try await makeAccount(store, "alice")
            var quota = context()
            quota.quota = AccountQuota(maxNotes: 100, maxTextBytes: 1000)
            let created = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: hundredBytes)], context: quota)
            let note = try #require(created[0].serverID)
            let updated = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 2, text: hundredBytes.uppercased(), baseVersion: 1)],
                context: quota)
            #expect(updated[0].status == .updated)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 0, historyBytes: 200))

            // Each merge keeps its 100-byte answer for replays: 7 fit beside the note's 100 bytes and its two versions'
            // 200, then quota_exceeded.
            var statuses: [ChangeStatus] = []
            for round in 0..<20 {
                let results = try await store.push(accountID: alice, changes: [hostileMerge(note, edit: 100 + Int64(round))], context: quota)
                statuses.append(results[0].status)
                if round == 0 { #expect(results[0].text == hundredBytes.uppercased()) }
                if results[0].status == .rejected {
                    #expect(results[0].error?.code == .quotaExceeded && results[0].error?.field == "changes[0].text")
                }
            }
            #expect(statuses == Array(repeating: .merged, count: 7) + Array(repeating: .rejected, count: 13))
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 700, historyBytes: 200))
            // Many in one request: the same.
            let batch = try await store.push(
                accountID: alice, changes: (0..<20).map { hostileMerge(note, edit: 200 + Int64($0)) }, context: quota)
            #expect(batch.allSatisfy { $0.status == .rejected && $0.error?.code == .quotaExceeded })

            // A stale delete would keep the note's text (kept); a conflict would keep it and add a copy: refused too.
            let kept = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 300, text: "", deleted: true, baseVersion: 1)], context: quota)
            #expect(kept[0].status == .rejected && kept[0].error?.code == .quotaExceeded)
            let conflict = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 301, text: "mine\n", baseText: "theirs\n")], context: quota)
            #expect(conflict[0].status == .rejected && conflict[0].error?.code == .quotaExceeded)
            // A replay of an accepted merge still answers exactly (it stores nothing).
            let replay = try await store.push(accountID: alice, changes: [hostileMerge(note, edit: 100)], context: quota)
            #expect(replay[0].replayed && replay[0].status == .merged && replay[0].text == hundredBytes.uppercased())
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 700, historyBytes: 200))

            // At the limit a person can still tidy up: a text at most half as long from a device that has the current
            // version (no text kept; its version costs what the note frees), and a delete.
            let shorter = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 400, text: "short\n", baseVersion: 2)], context: quota)
            #expect(shorter[0].status == .updated)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 6, replayTextBytes: 700, historyBytes: 206))

            // Over a lowered limit, a merge that shrinks its note passes when it frees at least what its answer keeps.
            let base = "aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\nd\ne\nf\ng\n"  // 41 bytes
            let ours = "aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\nd\ne\nf\nG\n"
            var unlimited = context()
            unlimited.quota = .unlimited
            let two = try await store.push(
                accountID: alice, changes: [change(2, edit: 500, text: base), change(3, edit: 501, text: base)], context: unlimited)
            _ = try await store.push(
                accountID: alice,
                changes: [
                    change(2, server: two[0].serverID, edit: 502, text: ours, baseVersion: 1),
                    change(3, server: two[1].serverID, edit: 503, text: ours, baseVersion: 1),
                ],
                context: unlimited)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 3, textBytes: 88, replayTextBytes: 700, historyBytes: 370))
            quota.quota = AccountQuota(maxNotes: 100, maxTextBytes: 500)
            // Drops an 11-byte line, keeps a 30-byte answer and a 30-byte version: grows by 49, refused.
            let grows = try await store.push(
                accountID: alice,
                changes: [change(2, server: two[0].serverID, edit: 504, text: String(base.dropFirst(11)), baseText: base)],
                context: quota)
            #expect(grows[0].status == .rejected && grows[0].error?.code == .quotaExceeded)
            // Drops three lines (33 bytes), keeps an 8-byte answer and an 8-byte version: shrinks by 17, accepted.
            let frees = try await store.push(
                accountID: alice,
                changes: [change(3, server: two[1].serverID, edit: 505, text: "d\ne\nf\ng\n", baseText: base)],
                context: quota)
            #expect(frees[0].status == .merged && frees[0].text == "d\ne\nf\nG\n")
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 3, textBytes: 55, replayTextBytes: 708, historyBytes: 378))
            // A delete always passes.
            let deleted = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 600, text: "", deleted: true, baseVersion: 3)], context: quota)
            #expect(deleted[0].status == .deleted)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 3, textBytes: 49, replayTextBytes: 708, historyBytes: 378))
        },
        Check(name: "quota: the retention purge gives the replay texts' bytes back") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            var quota = context()
            quota.quota = AccountQuota(maxNotes: 100, maxTextBytes: 700)
            var later = context(now: testEpoch + 10_000)
            later.quota = quota.quota
            for account in [alice, bob] {
                let created = try await store.push(accountID: account, changes: [change(1, edit: 1, text: hundredBytes)], context: quota)
                let note = try #require(created[0].serverID)
                _ = try await store.push(
                    accountID: account, changes: [change(1, server: note, edit: 2, text: hundredBytes.uppercased(), baseVersion: 1)],
                    context: quota)
                let merges = try await store.push(
                    accountID: account, changes: (0..<3).map { hostileMerge(note, edit: 10 + Int64($0)) }, context: quota)
                #expect(merges.map(\.status) == [.merged, .merged, .merged])
            }
            let alicesNote = try #require(try await everything(store, alice).first?.serverID)
            #expect(try await store.push(accountID: alice, changes: [hostileMerge(alicesNote, edit: 20)], context: later)[0].status == .merged)
            #expect(try await store.push(accountID: alice, changes: [hostileMerge(alicesNote, edit: 21)], context: later)[0].status == .rejected)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 400, historyBytes: 200))
            #expect(try await store.usage(accountID: bob) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 300, historyBytes: 200))

            // Five applied edits of each account are older than the cutoff; alice's later merge stays.
            #expect(try await store.pruneAppliedEdits(createdBefore: testEpoch + 1) == 10)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 100, historyBytes: 200))
            #expect(try await store.usage(accountID: bob) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 0, historyBytes: 200))
            if let operators = store as? any OperatorStore { #expect(try await operators.checkInvariants() == []) }
            // The bytes given back make room again.
            #expect(try await store.push(accountID: alice, changes: [hostileMerge(alicesNote, edit: 22)], context: later)[0].status == .merged)
            #expect(try await store.pruneAppliedEdits(createdBefore: testEpoch + 10_001) == 2)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 1, textBytes: 100, replayTextBytes: 0, historyBytes: 200))
        },
        Check(name: "operators: check verifies the replay texts' running total") { store in
            let operators = try operatorStore(store)
            let alice = try await makeAccount(store, "alice")
            let created = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: "é\n")], context: context())
            let note = try #require(created[0].serverID)
            _ = try await store.push(accountID: alice, changes: [change(1, server: note, edit: 2, text: "ét\n", baseVersion: 1)], context: context())
            let merged = try await store.push(accountID: alice, changes: [hostileMerge(note, edit: 3)], context: context())
            #expect(merged[0].status == .merged && merged[0].text == "ét\n")
            // UTF-8 bytes, as the check counts them (é is two).
            #expect(try await store.usage(accountID: alice)?.replayTextBytes == 4)
            #expect(try await operators.checkInvariants() == [])
            #expect(try await operators.statistics().replayTextBytes == 4)
            try await corrupt(store, "UPDATE accounts SET replay_text_bytes = replay_text_bytes + 1 WHERE id = \(alice.rawValue)")
            let problems = try await operators.checkInvariants()
            #expect(problems == ["replay running total: account \(alice): 5 replay text bytes counted, 4 stored"])
        },
    ]
}
