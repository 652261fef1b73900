import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Converting a plaintext account to end-to-end encryption (issue 32), checked on every store by the conformance
/// suite: the set-up of an account that holds notes, the encrypted pushes that convert them, and what the last one
/// deletes.
extension NoteStoreConformance {
    /// A plaintext account of `user`'s ID holding: a note edited twice ("canary one" → "canary two", tagged), a conflict
    /// copy of it ("canary three"), and a tombstone that kept its tag; a session "aa" to keep and one "bb" to end.
    static func plaintextAccountWithNotes(_ store: any NoteStore, _ user: EncryptedUser) async throws -> (note: FlakeID, copy: FlakeID, tombstone: FlakeID, keep: SessionRecord) {
        var plain = user.record
        (plain.encryption, plain.keyGeneration, plain.keys) = (.plaintext, 0, nil)
        try await store.createAccount(plain)
        let account = user.accountID
        let keep = SessionRecord(id: minter.mint(), accountID: account, tokenHash: "aa", deviceName: nil, origin: nil, createdAt: 7)
        try await store.createSession(keep)
        try await store.createSession(SessionRecord(id: minter.mint(), accountID: account, tokenHash: "bb", deviceName: nil, origin: nil, createdAt: 8))
        var first = change(1, edit: 1, text: "canary one")
        first.tags = ["canary-tag"]
        let created = try await store.push(accountID: account, changes: [first, change(2, edit: 2, text: "canary gone")], context: context())
        let note = try #require(created[0].serverID)
        let gone = try #require(created[1].serverID)
        var deleted = change(2, server: gone, edit: 3, text: "", deleted: true, baseVersion: 1)
        deleted.tags = ["canary-tag"]
        _ = try await store.push(accountID: account, changes: [deleted], context: context())
        _ = try await store.push(
            accountID: account, changes: [change(1, server: note, edit: 4, text: "canary two", baseVersion: 1)], context: context())
        let conflict = try await store.push(
            accountID: account, changes: [change(1, server: note, edit: 5, text: "canary three", baseVersion: 1, baseText: "canary one")],
            context: context())
        #expect(conflict[0].status == .conflict)
        return (note, try #require(conflict[0].conflict?.serverID), gone, keep)
    }

    static let conversionChecks: [Check] = [
        Check(name: "conversion: setting up an account that holds notes starts converting, ends the other sessions") { store in
            let user = EncryptedUser("bob")
            let (_, _, tombstone, keep) = try await plaintextAccountWithNotes(store, user)
            let keys = try encryptionStore(store)
            let stored = try #require(user.record.keys)
            let outcome = try await keys.setUpEncryption(accountID: user.accountID, passwordHash: "h2", keys: stored, keepingSession: keep.id)
            #expect(outcome == .done(revokedSessions: 1, plaintextNotes: 2))
            let account = try await store.account(byID: user.accountID)
            #expect(account?.encryption == .converting && account?.keyGeneration == 1 && account?.passwordHash == "h2")
            #expect(try await keys.encryptionKeys(accountID: user.accountID) == stored)
            #expect(try await keys.plaintextNoteCount(accountID: user.accountID) == 2)
            #expect(try await store.session(byTokenHash: "bb") == nil)
            // The tombstone was converted by the set-up: it keeps no tag in the clear.
            let notes = try await everything(store, user.accountID)
            #expect(notes.first { $0.serverID == tombstone }?.tags == [])
            // Set up twice: refused, nothing changed.
            #expect(try await keys.setUpEncryption(accountID: user.accountID, passwordHash: "h3", keys: stored, keepingSession: keep.id) == .notPlaintext)
            #expect(try await store.account(byID: user.accountID)?.passwordHash == "h2")
        },
        Check(name: "conversion: pushes must be envelopes; each replaced note is converted, the last one finishes it") { store in
            let user = EncryptedUser("bob")
            let account = user.accountID
            let (note, copy, _, keep) = try await plaintextAccountWithNotes(store, user)
            let keys = try encryptionStore(store)
            _ = try await keys.setUpEncryption(accountID: account, passwordHash: "h2", keys: try #require(user.record.keys), keepingSession: keep.id)
            let plain = try await store.push(
                accountID: account, changes: [change(1, server: note, edit: 10, text: "canary four", baseVersion: 2)], context: context())
            #expect(plain[0].status == .rejected && plain[0].error?.code == .notEncrypted)
            #expect(try await keys.plaintextNoteCount(accountID: account) == 2)
            // A stale base converts nothing.
            let stale = try await store.push(
                accountID: account, changes: [user.change(1, server: note, edit: 11, plaintext: "canary two", baseVersion: 1)], context: context())
            #expect(stale[0].status == .stale)
            #expect(try await keys.plaintextNoteCount(accountID: account) == 2)
            let first = try await store.push(
                accountID: account, changes: [user.change(1, server: note, edit: 12, plaintext: "canary two", baseVersion: 2)], context: context())
            #expect(first[0].status == .updated && first[0].version == 3)
            #expect(try await keys.plaintextNoteCount(accountID: account) == 1)
            #expect(try await store.account(byID: account)?.encryption == .converting)
            // What the operator sees: the state, the notes left, no fault.
            let operators = try operatorStore(store)
            let statistics = try await operators.statistics()
            #expect(statistics.encryption?["converting"] == 1 && statistics.plaintextNotes == 1)
            #expect(try await operators.checkInvariants() == [])
            // The converted note keeps no tag in the clear; the history before the conversion is still there.
            #expect(try await everything(store, account).first { $0.serverID == note }?.tags == [])
            let before = try #require(try await store.versions(accountID: account, query: .init(serverID: note, pageSize: 100, maxBytes: 1 << 20)))
            #expect(before.versions.count == 3)
            // The conflict copy is the last: converting it finishes the conversion in the same push.
            let copyNote = try #require(try await everything(store, account).first { $0.serverID == copy })
            let last = try await store.push(
                accountID: account,
                changes: [user.change(copyNote.clientID.rawValue, server: copy, edit: 13, plaintext: "canary three", baseVersion: 1)],
                context: context())
            #expect(last[0].status == .updated)
            #expect(try await keys.plaintextNoteCount(accountID: account) == 0)
            #expect(try await store.account(byID: account)?.encryption == .encrypted)
            #expect(try await operators.statistics().plaintextNotes == 0)
            #expect(try await operators.checkInvariants() == [])
            // A plaintext mark left in an encrypted account is a fault the check reports.
            try await corrupt(store, "UPDATE notes SET plaintext = (1 = 1) WHERE server_id = \(note.rawValue)")
            #expect(try await operators.checkInvariants().contains { $0.contains("conversion state") && $0.contains("encrypted with 1 notes") })
            try await corrupt(store, "UPDATE notes SET plaintext = (1 = 0) WHERE server_id = \(note.rawValue)")
            // Nothing in the clear is left: every note and kept version is an envelope or a tombstone's "", no tag.
            for stored in try await everything(store, account) {
                #expect(stored.deleted ? stored.text.isEmpty : (try? NoteEnvelope(text: stored.text)) != nil)
                #expect(stored.tags.isEmpty)
                let page = try await store.versions(accountID: account, query: .init(serverID: stored.serverID, pageSize: 100, maxBytes: 1 << 20))
                for version in page?.versions ?? [] {
                    #expect(!version.text.contains("canary"))
                    #expect(version.tags.isEmpty)
                }
            }
            let after = try #require(try await store.versions(accountID: account, query: .init(serverID: note, pageSize: 100, maxBytes: 1 << 20)))
            #expect(after.versions.map(\.version) == [3])
            // The totals lost what was deleted: the history is the two envelopes' bytes, no replay text is kept.
            let usage = try #require(try await store.usage(accountID: account))
            let envelopes = try await everything(store, account).filter { !$0.deleted }.map { Int64($0.text.utf8.count) }.reduce(0, +)
            #expect(usage.historyBytes == envelopes && usage.replayTextBytes == 0)
            // The conflict's applied edit keeps its outcome, without the text it answered.
            let replay = try await store.push(
                accountID: account, changes: [user.change(1, server: note, edit: 5, plaintext: "again", baseVersion: 1)], context: context())
            #expect(replay[0].replayed == true && replay[0].status == .conflict && replay[0].text == nil)
        },
    ]
}
