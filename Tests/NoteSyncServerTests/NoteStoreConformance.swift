import Foundation
import MiniFlake
import NoteSyncProtocol
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// The behaviour every ``NoteStore`` must have, as named checks, each run on a fresh, empty store. Each store's suite
/// runs every check as a test case of its own (`@Test(arguments: NoteStoreConformance.checks.map(\.name))`): SQLite
/// on disk and in memory in `NoteStoreConformanceTests.sqlite`, PostgreSQL in `PostgresNoteStoreTests.conformance`.
enum NoteStoreConformance {
    /// A named check over a fresh store.
    struct Check: Sendable {
        var name: String
        var body: @Sendable (any NoteStore) async throws -> Void
    }

    static let minter = CountingMinter()

    static func context(_ limits: SyncLimits = SyncLimits(), now: Int64 = testEpoch) -> PushContext {
        PushContext(limits: limits, now: now, mintID: { minter.mint() })
    }

    static func makeAccount(_ store: any NoteStore, _ name: String) async throws -> FlakeID {
        let account = AccountRecord(id: minter.mint(), username: name, passwordHash: "$2b$04$hash", createdAt: testEpoch)
        try await store.createAccount(account)
        return account.id
    }

    static func everything(_ store: any NoteStore, _ account: FlakeID) async throws -> [StoredNote] {
        try await store.pull(accountID: account, after: 0, limit: Int.max / 2).notes
    }

    static let checks: [Check] = operatorChecks + inviteChecks + replayQuotaChecks + historyChecks + encryptionChecks + conversionChecks + [
        Check(name: "accounts") { store in
            let account = AccountRecord(id: minter.mint(), username: "alice", passwordHash: "h1", createdAt: 5)
            try await store.createAccount(account)
            #expect(try await store.account(byUsername: "alice") == account)
            #expect(try await store.account(byID: account.id) == account)
            #expect(try await store.account(byUsername: "bob") == nil)
            #expect(try await store.account(byID: id(424242)) == nil)
            await #expect(throws: NoteStoreError.usernameTaken) {
                try await store.createAccount(AccountRecord(id: minter.mint(), username: "alice", passwordHash: "h2", createdAt: 6))
            }
            #expect(try await store.currentChangeSequence(accountID: account.id) == 0)
        },
        Check(name: "sessions") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            let session = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "aa", deviceName: "phone", origin: id(9), createdAt: 7)
            try await store.createSession(session)
            let bare = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "bb", deviceName: nil, origin: nil, createdAt: 8)
            try await store.createSession(bare)
            #expect(try await store.session(byTokenHash: "aa") == session)
            #expect(try await store.session(byTokenHash: "bb") == bare)
            #expect(try await store.session(byTokenHash: "cc") == nil)
            // Deleting is scoped by account.
            try await store.deleteSession(id: session.id, accountID: bob)
            #expect(try await store.session(byTokenHash: "aa") == session)
            try await store.deleteSession(id: session.id, accountID: alice)
            #expect(try await store.session(byTokenHash: "aa") == nil)
            try await store.deleteSession(id: session.id, accountID: alice)
            #expect(try await store.session(byTokenHash: "bb") == bare)
        },
        Check(name: "push, pull and change sequence") { store in
            let alice = try await makeAccount(store, "alice")
            let results = try await store.push(
                accountID: alice, changes: (1...5).map { change($0, edit: 100 + $0, text: "note \($0)\n") }, context: context()
            )
            #expect(results.map(\.status) == Array(repeating: .created, count: 5))
            #expect(try await store.currentChangeSequence(accountID: alice) == 5)
            let all = try await everything(store, alice)
            #expect(all.map(\.changeSeq) == [1, 2, 3, 4, 5])
            #expect(all.map(\.text) == (1...5).map { "note \($0)\n" })
            #expect(all.map(\.serverID) == results.map(\.serverID!))
            #expect(all.allSatisfy { $0.accountID == alice && $0.version == 1 && !$0.deleted && $0.createdAt == testEpoch })

            let page = try await store.pull(accountID: alice, after: 2, limit: 2)
            #expect(page.notes.map(\.changeSeq) == [3, 4])
            #expect(page.currentSequence == 5 && page.noteCount == 5 && !page.cutByBytes)
            #expect(try await store.pull(accountID: alice, after: 5, limit: 10).notes.isEmpty)
            // Issue 30: a page stops after the note whose text reaches its bytes (each text here is 7 bytes), holds
            // at least one note, and says whether it stopped before its limit.
            let cut = try await store.pull(accountID: alice, after: 0, limit: 10, maxBytes: 14)
            #expect(cut.notes.map(\.changeSeq) == [1, 2] && cut.cutByBytes && cut.noteCount == 5)
            let one = try await store.pull(accountID: alice, after: 0, limit: 10, maxBytes: 1)
            #expect(one.notes.map(\.changeSeq) == [1] && one.cutByBytes)
            let whole = try await store.pull(accountID: alice, after: 0, limit: 10, maxBytes: 35)
            #expect(whole.notes.count == 5 && !whole.cutByBytes)
            let limited = try await store.pull(accountID: alice, after: 0, limit: 3, maxBytes: 21)
            #expect(limited.notes.count == 3 && !limited.cutByBytes, "the limit, not the bytes, ended it")

            // An update moves the note to the end of the change order, once.
            let first = results[0].serverID!
            let update = try await store.push(
                accountID: alice, changes: [change(1, server: first, edit: 200, text: "changed\n", baseVersion: 1)],
                context: context(now: testEpoch + 10)
            )
            #expect(update[0].status == .updated)
            let after = try await everything(store, alice)
            #expect(after.count == 5)
            #expect(after.last?.serverID == first)
            #expect(after.last?.changeSeq == 6)
            #expect(after.last?.version == 2)
            #expect(after.last?.updatedAt == testEpoch + 10)
            #expect(after.last?.createdAt == testEpoch)
            #expect(try await store.pull(accountID: alice, after: 5, limit: 10).notes.map(\.serverID) == [first])
        },
        Check(name: "edit times are stored and pulled") { store in
            let alice = try await makeAccount(store, "alice")
            let edited = testEpoch - 86_400_000
            let results = try await store.push(
                accountID: alice,
                changes: [change(1, edit: 1, text: "dated\n", editedAt: edited), change(2, edit: 2, text: "undated\n")],
                context: context(now: testEpoch + 5))
            var pulled = try await everything(store, alice)
            #expect(pulled.map(\.editedAt) == [edited, testEpoch + 5], "an absent edit time is the server's")
            #expect(pulled.map(\.record.editedAt) == [WireTime.format(unixMilliseconds: edited), WireTime.format(unixMilliseconds: testEpoch + 5)])
            _ = try await store.push(
                accountID: alice, changes: [change(1, server: results[0].serverID, edit: 3, text: "", deleted: true, baseVersion: 1, editedAt: edited + 7)],
                context: context(now: testEpoch + 9))
            pulled = try await everything(store, alice)
            #expect(pulled.last?.deleted == true && pulled.last?.editedAt == edited + 7)
        },
        Check(name: "replays write nothing") { store in
            let alice = try await makeAccount(store, "alice")
            let batch = [change(1, edit: 1, text: "a\n"), change(2, edit: 2, text: "b\n"), change(3, edit: 3, text: "", deleted: true)]
            let first = try await store.push(accountID: alice, changes: batch, context: context())
            let before = try await everything(store, alice)
            for _ in 0..<3 {
                let again = try await store.push(accountID: alice, changes: batch, context: context(now: testEpoch + 99))
                #expect(again.map(\.status) == first.map(\.status))
                #expect(again.map(\.serverID) == first.map(\.serverID))
                #expect(again.allSatisfy { $0.replayed })
            }
            #expect(try await everything(store, alice) == before)
            #expect(try await store.currentChangeSequence(accountID: alice) == 2)
        },
        Check(name: "a replay answers exactly the original result") { store in
            // Issue 15: a replay used to answer today's text (and an `updated` one the note's current text). Every
            // status whose answer may carry a text, replayed after another device changed the note again.
            let alice = try await makeAccount(store, "alice")
            let base = "a\nb\nc\n"
            let created = try await store.push(accountID: alice, changes: [change(1, origin: 5, edit: 1, text: base)], context: context())[0]
            let note = try #require(created.serverID)
            let emptied = try await store.push(accountID: alice, changes: [change(2, origin: 5, edit: 20, text: "e\n")], context: context())[0]
            let empty = try #require(emptied.serverID)
            let edits = [
                change(1, origin: 5, server: note, edit: 2, text: "a\nb\nc\nd\n", baseVersion: 1),  // updated, v2
                change(1, origin: 5, server: note, edit: 3, text: "A\nb\nc\n", baseVersion: 1, baseText: base),  // merged, v3
                change(1, origin: 5, server: note, edit: 4, text: "", deleted: true, baseVersion: 1),  // kept
                change(1, origin: 5, server: note, edit: 5, text: "Z\nb\nc\n", baseVersion: 1, baseText: base),  // conflict
                change(2, origin: 5, server: empty, edit: 21, text: "", baseVersion: 1),  // updated to ""
                change(2, origin: 5, server: empty, edit: 22, text: "", deleted: true, baseVersion: 1, baseText: "e\n"),  // kept, text ""
            ]
            var originals: [ChangeResult] = []
            for edit in edits { originals += try await store.push(accountID: alice, changes: [edit], context: context()) }
            #expect(originals.map(\.status) == [.updated, .merged, .kept, .conflict, .updated, .kept])
            #expect(originals[1].text == "A\nb\nc\nd\n" && originals[2].text == "A\nb\nc\nd\n" && originals[3].text == "A\nb\nc\nd\n")
            #expect(originals[5].text == "")
            // Another device changes both notes again.
            _ = try await store.push(
                accountID: alice,
                changes: [
                    change(1, origin: 5, server: note, edit: 6, text: "today\n", baseVersion: 3),
                    change(2, origin: 5, server: empty, edit: 23, text: "today\n", baseVersion: 2),
                ],
                context: context())
            let before = try await everything(store, alice)
            let replays = try await store.push(
                accountID: alice, changes: [change(1, origin: 5, edit: 1, text: base)] + edits, context: context(now: testEpoch + 99))
            for (replay, original) in zip(replays, [created] + originals) {
                var expected = original
                expected.replayed = true
                #expect(replay == expected)
                #expect(replay.text.map { Array($0.utf8) } == original.text.map { Array($0.utf8) })
            }
            #expect(try await everything(store, alice) == before)
        },
        Check(name: "accounts never see each other's notes") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            let secret = try await store.push(accountID: alice, changes: [change(10, edit: 1, text: "secret\n")], context: context())[0]
            let aliceBefore = try await everything(store, alice)
            let attack = try await store.push(
                accountID: bob,
                changes: [
                    change(10, server: secret.serverID, edit: 2, text: "pwned\n", baseVersion: 1),
                    change(10, edit: 1, text: "bob's own\n", baseText: "secret\n"),
                ],
                context: context()
            )
            #expect(attack[0].status == .rejected)
            #expect(attack[0].error?.code == .unknownNote)
            #expect(attack[1].status == .created)
            #expect(attack[1].replayed == false)
            #expect(attack[1].serverID != secret.serverID)
            #expect(try await everything(store, alice) == aliceBefore)
            let bobs = try await everything(store, bob)
            #expect(bobs.map(\.text) == ["bob's own\n"])
            #expect(bobs[0].changeSeq == 1)
            #expect(try await store.pull(accountID: bob, after: 0, limit: 100).notes.allSatisfy { $0.accountID == bob })
        },
        Check(name: "client ID collisions keep notes apart") { store in
            let alice = try await makeAccount(store, "alice")
            let results = try await store.push(
                accountID: alice, changes: [change(10, origin: 1, edit: 1, text: "one\n"), change(10, origin: 2, edit: 2, text: "two\n")],
                context: context()
            )
            #expect(results.map(\.status) == [.created, .created])
            // Reconciliation finds each by (clientID, origin).
            let again = try await store.push(
                accountID: alice,
                changes: [change(10, origin: 2, edit: 3, text: "two\n", baseText: "two\n"), change(10, origin: 1, edit: 4, text: "one!\n", baseText: "one\n")],
                context: context()
            )
            #expect(again.map(\.status) == [.reconciled, .reconciled])
            #expect(again.map(\.serverID) == [results[1].serverID, results[0].serverID])
            #expect(try await everything(store, alice).count == 2)
        },
        Check(name: "conflict copies") { store in
            let alice = try await makeAccount(store, "alice")
            let created = try await store.push(accountID: alice, changes: [change(10, edit: 1, text: "a\nb\nc\n")], context: context())[0]
            let server = created.serverID!
            _ = try await store.push(accountID: alice, changes: [change(10, server: server, edit: 2, text: "a\nX\nc\n", baseVersion: 1)], context: context())
            let result = try await store.push(
                accountID: alice, changes: [change(10, server: server, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n")],
                context: context()
            )[0]
            #expect(result.status == .conflict)
            let copy = try #require(result.conflict)
            let all = try await everything(store, alice)
            let stored = try #require(all.first { $0.serverID == copy.serverID })
            #expect(stored.conflictOf == server)
            #expect(stored.clientID == copy.clientID)
            #expect(stored.text == "a\nY\nc\n")
            let replay = try await store.push(
                accountID: alice, changes: [change(10, server: server, edit: 3, text: "a\nY\nc\n", baseVersion: 1, baseText: "a\nb\nc\n")],
                context: context()
            )[0]
            #expect(replay.replayed && replay.conflict == copy && replay.text == "a\nX\nc\n")
            #expect(try await everything(store, alice).count == 2)
        },
        Check(name: "one note twice in a batch is written once") { store in
            let alice = try await makeAccount(store, "alice")
            let results = try await store.push(
                accountID: alice,
                changes: [change(10, edit: 1, text: "v1\n"), change(10, edit: 2, text: "v2\n", baseVersion: 1), change(11, edit: 3, text: "x\n")],
                context: context()
            )
            #expect(results.map(\.status) == [.created, .reconciled, .created])
            let all = try await everything(store, alice)
            #expect(all.map(\.text) == ["v2\n", "x\n"])
            #expect(all.map(\.changeSeq) == [2, 3])
            #expect(try await store.currentChangeSequence(accountID: alice) == 3)
        },
        Check(name: "large batches load across IN-list chunks") { store in
            let alice = try await makeAccount(store, "alice")
            let limits = SyncLimits(maxBatchChanges: 2000)
            let count = 1234
            let created = try await store.push(
                accountID: alice, changes: (1...count).map { change(Int64($0), edit: Int64($0), text: "n\($0)\n") }, context: context(limits)
            )
            #expect(created.allSatisfy { $0.status == .created })
            // By client key, by server ID, and replays of every edit ID: all found.
            let byKey = try await store.push(
                accountID: alice, changes: (1...count).map { change(Int64($0), edit: Int64(10_000 + $0), text: "n\($0)\n", baseText: "n\($0)\n") },
                context: context(limits)
            )
            #expect(byKey.allSatisfy { $0.status == .reconciled })
            let byServer = try await store.push(
                accountID: alice,
                changes: (1...count).map { change(Int64($0), server: created[$0 - 1].serverID, edit: Int64(20_000 + $0), text: "m\($0)\n", baseVersion: 1) },
                context: context(limits)
            )
            #expect(byServer.allSatisfy { $0.status == .updated && $0.version == 2 })
            let replay = try await store.push(
                accountID: alice, changes: (1...count).map { change(Int64($0), edit: Int64($0), text: "n\($0)\n") }, context: context(limits)
            )
            // Each replay answers its original result (created, version 1, no text), not the note as it is now.
            #expect(replay.allSatisfy { $0.replayed && $0.status == .created && $0.version == 1 && $0.text == nil })
            #expect(try await everything(store, alice).count == count)
            #expect(try await store.currentChangeSequence(accountID: alice) == Int64(2 * count))
        },
        Check(name: "a failed push writes nothing") { store in
            let alice = try await makeAccount(store, "alice")
            _ = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: "kept\n")], context: context())
            let before = try await everything(store, alice)
            struct Boom: Error {}
            let calls = Mutex(0)
            let failing = PushContext(limits: SyncLimits(), now: testEpoch) {
                try calls.withLock { calls in
                    calls += 1
                    if calls == 3 { throw Boom() }
                }
                return minter.mint()
            }
            await #expect(throws: Boom.self) {
                _ = try await store.push(
                    accountID: alice, changes: (2...6).map { change(Int64($0), edit: Int64($0), text: "lost\n") }, context: failing
                )
            }
            #expect(try await everything(store, alice) == before)
            #expect(try await store.currentChangeSequence(accountID: alice) == 1)
            // The edit IDs were not recorded: a retry applies them.
            let retry = try await store.push(accountID: alice, changes: [change(2, edit: 2, text: "now\n")], context: context())
            #expect(retry[0].status == .created && !retry[0].replayed)
        },
        Check(name: "push to a missing account") { store in
            await #expect(throws: NoteStoreError.accountNotFound) {
                _ = try await store.push(accountID: id(987_654), changes: [change(1, edit: 1, text: "x\n")], context: context())
            }
            let page = try await store.pull(accountID: id(987_654), after: 0, limit: 10)
            #expect(page == PullPage(notes: [], currentSequence: 0))
        },
        Check(name: "largest issued ID") { store in
            #expect(try await store.largestIssuedID() == nil)
            let alice = try await makeAccount(store, "alice")
            #expect(try await store.largestIssuedID() == alice)
            let session = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "t", deviceName: nil, origin: nil, createdAt: 1)
            try await store.createSession(session)
            #expect(try await store.largestIssuedID() == session.id)
            let note = try await store.push(accountID: alice, changes: [change(1, edit: 1, text: "x\n")], context: context())[0]
            #expect(try await store.largestIssuedID() == note.serverID)
        },
        Check(name: "texts round-trip byte for byte") { store in
            let alice = try await makeAccount(store, "alice")
            let texts = ["", "no newline", "caf\u{E9}\n", "cafe\u{301}\n", "emoji 👩‍👩‍👧\n", "nul \u{0} inside\n", String(repeating: "long line ", count: 5000)]
            let results = try await store.push(
                accountID: alice, changes: texts.enumerated().map { change(Int64($0.offset + 1), edit: Int64($0.offset + 1), text: $0.element) },
                context: context()
            )
            #expect(results.allSatisfy { $0.status == .created })
            let stored = try await everything(store, alice).map(\.text)
            #expect(stored.count == texts.count)
            for (a, b) in zip(stored, texts) { #expect(Array(a.utf8) == Array(b.utf8)) }
            // NFD vs NFC are different texts to the server.
            let nfc = results[2].serverID!
            let update = try await store.push(
                accountID: alice, changes: [change(3, server: nfc, edit: 100, text: "cafe\u{301}\n", baseVersion: 1)], context: context()
            )
            #expect(update[0].status == .updated)
        },
        Check(name: "old applied edits are pruned, and a re-sent change stays safe") { store in
            let alice = try await makeAccount(store, "alice")
            let old = try await store.push(
                accountID: alice, changes: (1...3).map { change($0, edit: $0, text: "n\($0)\n") }, context: context(now: testEpoch)
            )
            let recent = try await store.push(
                accountID: alice, changes: [change(4, edit: 4, text: "n4\n")], context: context(now: testEpoch + 1000)
            )
            #expect(try await store.pruneAppliedEdits(createdBefore: testEpoch + 1000) == 3)
            #expect(try await store.pruneAppliedEdits(createdBefore: testEpoch + 1000) == 0)
            // The recent edit is still a replay; the pruned ones are planned afresh and find their notes.
            let again = try await store.push(
                accountID: alice, changes: (1...4).map { change($0, edit: $0, text: "n\($0)\n") }, context: context(now: testEpoch + 2000)
            )
            #expect(again[3].replayed && again[3].serverID == recent[0].serverID)
            #expect(again[0..<3].map(\.status) == [.reconciled, .reconciled, .reconciled])
            #expect(again[0..<3].map(\.serverID) == old.map(\.serverID))
            #expect(try await everything(store, alice).count == 4)
            #expect(try await store.currentChangeSequence(accountID: alice) == 4)
        },
        Check(name: "sessions of an account: list, last seen, revoke one, revoke the others") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            let phone = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "p", deviceName: "phone", origin: id(9), createdAt: 10)
            let laptop = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "l", deviceName: nil, origin: nil, createdAt: 20)
            let tablet = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "t", deviceName: "tablet", origin: id(8), createdAt: 30)
            let bobs = SessionRecord(id: minter.mint(), accountID: bob, tokenHash: "b", deviceName: "bob's", origin: nil, createdAt: 40)
            for session in [phone, laptop, tablet, bobs] { try await store.createSession(session) }
            // Most recently signed in first, only the account's own, limited.
            #expect(try await store.sessions(accountID: alice, limit: 10) == [tablet, laptop, phone])
            #expect(try await store.sessions(accountID: alice, limit: 2) == [tablet, laptop])
            #expect(try await store.sessions(accountID: bob, limit: 10) == [bobs])
            #expect(try await store.sessions(accountID: id(424242), limit: 10).isEmpty)

            // Last seen: written when unset or older than the threshold, never by another account.
            try await store.markSessionSeen(id: phone.id, accountID: alice, at: 1000, ifBefore: 0)
            #expect(try await store.session(byTokenHash: "p")?.lastSeenAt == 1000)
            try await store.markSessionSeen(id: phone.id, accountID: alice, at: 1500, ifBefore: 1000)  // not before 1000
            #expect(try await store.session(byTokenHash: "p")?.lastSeenAt == 1000)
            try await store.markSessionSeen(id: phone.id, accountID: alice, at: 70_000, ifBefore: 10_000)
            #expect(try await store.session(byTokenHash: "p")?.lastSeenAt == 70_000)
            try await store.markSessionSeen(id: phone.id, accountID: bob, at: 99_999_999, ifBefore: 99_999_999)
            #expect(try await store.session(byTokenHash: "p")?.lastSeenAt == 70_000)

            // Revoke one: scoped by account, reports whether it existed.
            #expect(try await store.deleteSession(id: laptop.id, accountID: bob) == false)
            #expect(try await store.deleteSession(id: laptop.id, accountID: alice) == true)
            #expect(try await store.deleteSession(id: laptop.id, accountID: alice) == false)
            #expect(try await store.session(byTokenHash: "l") == nil)

            // Revoke all but one; then all.
            #expect(try await store.deleteSessions(accountID: alice, except: phone.id) == 1)
            #expect(try await store.sessions(accountID: alice, limit: 10).map(\.id) == [phone.id])
            #expect(try await store.session(byTokenHash: "b") == bobs)
            #expect(try await store.deleteSessions(accountID: alice, except: nil) == 1)
            #expect(try await store.sessions(accountID: alice, limit: 10).isEmpty)
            #expect(try await store.sessions(accountID: bob, limit: 10) == [bobs])
        },
        Check(name: "changing a password revokes every other session in the same transaction") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            let keep = SessionRecord(id: minter.mint(), accountID: alice, tokenHash: "k", deviceName: nil, origin: nil, createdAt: 1)
            try await store.createSession(keep)
            for hash in ["o1", "o2"] {
                try await store.createSession(SessionRecord(id: minter.mint(), accountID: alice, tokenHash: hash, deviceName: nil, origin: nil, createdAt: 2))
            }
            try await store.createSession(SessionRecord(id: minter.mint(), accountID: bob, tokenHash: "b", deviceName: nil, origin: nil, createdAt: 3))
            #expect(try await store.changePassword(accountID: alice, passwordHash: "new-hash", keepingSession: keep.id) == 2)
            #expect(try await store.account(byID: alice)?.passwordHash == "new-hash")
            #expect(try await store.sessions(accountID: alice, limit: 10) == [keep])
            #expect(try await store.session(byTokenHash: "b") != nil)
            #expect(try await store.account(byID: bob)?.passwordHash == "$2b$04$hash")
            // An operator's reset keeps none.
            #expect(try await store.changePassword(accountID: alice, passwordHash: "reset", keepingSession: nil) == 1)
            #expect(try await store.sessions(accountID: alice, limit: 10).isEmpty)
            await #expect(throws: NoteStoreError.accountNotFound) {
                try await store.changePassword(accountID: id(424242), passwordHash: "x", keepingSession: nil)
            }
        },
        Check(name: "deleting an account removes its notes, edits and sessions, frees the username, and nothing else") { store in
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            for account in [alice, bob] {
                try await store.createSession(
                    SessionRecord(id: minter.mint(), accountID: account, tokenHash: "t\(account)", deviceName: nil, origin: nil, createdAt: 1))
                _ = try await store.push(accountID: account, changes: (1...3).map { change($0, edit: 10 + $0, text: "n\($0)\n") }, context: context())
            }
            let bobsNotes = try await everything(store, bob)
            #expect(try await store.deleteAccount(id: alice) == true)
            #expect(try await store.account(byID: alice) == nil)
            #expect(try await store.account(byUsername: "alice") == nil)
            #expect(try await store.usage(accountID: alice) == nil)
            #expect(try await store.session(byTokenHash: "t\(alice)") == nil)
            #expect(try await everything(store, alice).isEmpty)
            #expect(try await store.deleteAccount(id: alice) == false)
            // A push to the deleted account is refused; bob is untouched, his replays included.
            await #expect(throws: NoteStoreError.accountNotFound) {
                _ = try await store.push(accountID: alice, changes: [change(1, edit: 11, text: "n1\n")], context: context())
            }
            #expect(try await everything(store, bob) == bobsNotes)
            #expect(try await store.session(byTokenHash: "t\(bob)") != nil)
            let replay = try await store.push(accountID: bob, changes: [change(1, edit: 11, text: "n1\n")], context: context())
            #expect(replay[0].replayed)
            // The username is free: a new account of that name starts empty (the same edit IDs are new there).
            let again = try await makeAccount(store, "alice")
            #expect(try await everything(store, again).isEmpty)
            let fresh = try await store.push(accountID: again, changes: [change(1, edit: 11, text: "n1\n")], context: context())
            #expect(fresh[0].status == .created && !fresh[0].replayed)
        },
        Check(name: "usage is a running total kept by pushes, and the quota rejects what would exceed it") { store in
            let alice = try await makeAccount(store, "alice")
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 0, textBytes: 0, historyBytes: 0))
            #expect(try await store.usage(accountID: id(424242)) == nil)
            var created = try await store.push(
                accountID: alice, changes: [change(1, edit: 1, text: "12345"), change(2, edit: 2, text: "é")], context: context())
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 2, textBytes: 7, historyBytes: 7))
            // An edit changes the bytes (and keeps its text in the history); a delete keeps a tombstone (counted) with no
            // text, and a version with none.
            _ = try await store.push(
                accountID: alice, changes: [change(1, server: created[0].serverID, edit: 3, text: "123", baseVersion: 1)], context: context())
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 2, textBytes: 5, historyBytes: 10))
            _ = try await store.push(
                accountID: alice, changes: [change(2, server: created[1].serverID, edit: 4, text: "", deleted: true, baseVersion: 1)],
                context: context())
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 2, textBytes: 3, historyBytes: 10))

            // Over a limit: rejected with quota_exceeded, nothing stored; a change that does not grow is accepted.
            var quota = context()
            quota.quota = AccountQuota(maxNotes: 3, maxTextBytes: 20)
            created = try await store.push(
                accountID: alice,
                changes: [
                    change(3, edit: 5, text: "abc"),  // 3 notes, 6 bytes and 13 in the history: 19
                    change(4, edit: 6, text: "d"),  // a 4th note: refused
                    change(1, server: created[0].serverID, edit: 7, text: "123456789", baseVersion: 2),  // 34 bytes: refused
                    change(1, server: created[0].serverID, edit: 8, text: "1", baseVersion: 2),  // shrinks: accepted
                ],
                context: quota)
            #expect(created.map(\.status) == [.created, .rejected, .rejected, .updated])
            #expect(created[1].error?.code == .quotaExceeded && created[2].error?.code == .quotaExceeded)
            #expect(created[1].error?.field == "changes[1].text")
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 3, textBytes: 4, historyBytes: 14))
            #expect(try await everything(store, alice).count == 3)
            // A rejected change stored no applied edit: sent again under a larger quota, it is applied.
            quota.quota = AccountQuota(maxNotes: 4, maxTextBytes: 20)
            let retried = try await store.push(accountID: alice, changes: [change(4, edit: 6, text: "d")], context: quota)
            #expect(retried[0].status == .created && !retried[0].replayed)
            #expect(try await store.usage(accountID: alice) == AccountUsage(noteCount: 4, textBytes: 5, historyBytes: 15))
        },
        Check(name: "ping and close") { store in
            try await store.ping()
            try await store.close()
            await #expect(throws: (any Error).self) { try await store.ping() }
            try await store.close()  // twice is fine
        },
    ]
}

@Suite("NoteStore conformance")
struct NoteStoreConformanceTests {
    /// Each check on each SQLite flavour, reported separately.
    @Test(arguments: StoreKind.allCases, NoteStoreConformance.checks.map(\.name))
    func sqlite(_ kind: StoreKind, _ check: String) async throws {
        let store = try kind.make()
        let body = try #require(NoteStoreConformance.checks.first { $0.name == check }).body
        try await body(store)
        try? await store.close()
    }
}
