import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Attachments on notes (issue 33 phase 2), checked on every store with the chunk conformance suite (a note's
/// attachments refer to chunks the same store keeps).
extension ChunkStoreConformance {
    /// A manifest of a one-chunk file `name` whose chunk is `bytes`.
    static func manifest(_ name: String, _ bytes: [UInt8]) -> AttachmentManifest {
        AttachmentManifest(
            name: name, size: Int64(bytes.count), mediaType: "image/png", chunks: [address(bytes)], sha256: address(bytes))
    }

    /// A change of the note with client ID 1 carrying attachments.
    static func attaching(
        server: FlakeID? = nil, edit: Int64, text: String = "note\n", baseVersion: Int64? = nil, _ attachments: [AttachmentManifest]?,
        base: [AttachmentManifest]? = nil, chunkRefs: [ContentHash]? = nil, deleted: Bool = false
    ) -> NoteChange {
        var change = change(1, server: server, edit: edit, text: text, deleted: deleted, baseVersion: baseVersion)
        change.attachments = attachments
        change.baseAttachments = base
        change.chunkRefs = chunkRefs
        return change
    }

    static func context(now: Int64 = testEpoch) -> PushContext { NoteStoreConformance.context(now: now) }

    static let attachmentChecks: [Check] = [
        Check(name: "attachments: stored, merged three-way, pulled and kept in the history") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let (one, two) = (bytes(100, seed: 1), bytes(200, seed: 2))
            _ = try await put(store, alice, one)
            _ = try await put(store, alice, two)
            let photo = manifest("photo.png", one)
            let created = try await store.push(accountID: alice, changes: [attaching(edit: 1, [photo])], context: context())
            #expect(created[0].status == .created && created[0].attachments == nil, "the note holds the pushed set")
            let note = try #require(created[0].serverID)
            var stored = try #require(try await NoteStoreConformance.everything(store, alice).first)
            #expect(stored.attachments == [photo] && stored.chunkRefs == [address(one)])
            #expect(stored.record.attachments == [photo])
            // Two devices based on version 1: one adds a file, the other replaces the photo; both take effect.
            let doc = manifest("doc.pdf", two)
            let added = try await store.push(
                accountID: alice, changes: [attaching(server: note, edit: 2, baseVersion: 1, [photo, doc], base: [photo])], context: context())
            #expect(added[0].status == .updated && added[0].version == 2 && added[0].attachments == nil)
            let newPhoto = manifest("photo.png", two)
            let replaced = try await store.push(
                accountID: alice, changes: [attaching(server: note, edit: 3, baseVersion: 1, [newPhoto], base: [photo])], context: context())
            #expect(replaced[0].status == .updated && replaced[0].version == 3)
            #expect(replaced[0].attachments == [doc, newPhoto], "the answer carries the merged set, differing from the pushed one")
            stored = try #require(try await NoteStoreConformance.everything(store, alice).first)
            #expect(stored.attachments == [doc, newPhoto] && stored.chunkRefs == [address(two)])
            // A change that leaves `attachments` out leaves them as they are.
            let text = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 4, text: "edited\n", baseVersion: 3)], context: context())
            #expect(text[0].status == .updated)
            stored = try #require(try await NoteStoreConformance.everything(store, alice).first)
            #expect(stored.attachments == [doc, newPhoto])
            // The history keeps each version's set.
            let page = try #require(try await NoteStoreConformance.page(store, alice, note))
            #expect(page.versions.map(\.attachments) == [[photo], [doc, photo], [doc, newPhoto], [doc, newPhoto]])
            var times = WireTime.Cache()
            #expect(page.versions.map { $0.record(times: &times).attachments } == [[photo], [doc, photo], [doc, newPhoto], [doc, newPhoto]])
            if let operators = store as? any OperatorStore { #expect(try await operators.checkInvariants() == []) }
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "attachments: a change naming a chunk the account does not store is rejected unknown_chunk, nothing stored") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let bob = try await NoteStoreConformance.makeAccount(store, "bob")
            let (one, absent) = (bytes(100, seed: 1), bytes(50, seed: 3))
            _ = try await put(store, alice, one)
            let sequence = try await store.currentChangeSequence(accountID: bob)
            // Bob names Alice's chunk, then one nobody has: each rejected alone, the valid change beside them applied.
            let results = try await store.push(
                accountID: bob,
                changes: [
                    attaching(edit: 1, [manifest("a.png", one)]), change(2, edit: 2, text: "fine\n"),
                    attaching(edit: 3, [manifest("b.png", absent)]),
                ],
                context: context())
            #expect(results.map(\.status) == [.rejected, .created, .rejected])
            #expect(results[0].error?.code == .unknownChunk && results[0].error?.field == "changes[0].attachments")
            #expect(results[0].error?.message.contains(address(one).hex) == true)
            #expect(results[2].error?.code == .unknownChunk && results[2].error?.message.contains(address(absent).hex) == true)
            #expect(try await store.currentChangeSequence(accountID: bob) == sequence + 1)
            #expect(try await NoteStoreConformance.everything(store, bob).map(\.clientID) == [id(2)])
            // An edit naming an absent chunk leaves the note as it was.
            let created = try await store.push(accountID: alice, changes: [attaching(edit: 4, [manifest("a.png", one)])], context: context())
            let note = try #require(created[0].serverID)
            let refused = try await store.push(
                accountID: alice, changes: [attaching(server: note, edit: 5, text: "changed\n", baseVersion: 1, [manifest("b.png", absent)])],
                context: context())
            #expect(refused[0].status == .rejected && refused[0].error?.code == .unknownChunk)
            let stored = try #require(try await NoteStoreConformance.everything(store, alice).first)
            #expect(stored.version == 1 && stored.text == "note\n" && stored.attachments == [manifest("a.png", one)])
            // A base naming a chunk no longer stored is only a base: the change is applied.
            let based = try await store.push(
                accountID: alice, changes: [attaching(server: note, edit: 6, baseVersion: 1, [], base: [manifest("a.png", one), manifest("b.png", absent)])],
                context: context())
            #expect(based[0].status == .updated)
            // A plaintext account's change carries no chunkRefs.
            let refs = try await store.push(accountID: alice, changes: [attaching(edit: 7, nil, chunkRefs: [address(one)])], context: context())
            #expect(refs[0].status == .rejected && refs[0].error?.code == .invalidField && refs[0].error?.field == "changes[0].chunkRefs")
        },
        Check(name: "attachments: an encrypted account's chunkRefs are checked and kept, manifests in the clear refused") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let (one, absent) = (bytes(100, seed: 1), bytes(50, seed: 3))
            _ = try await put(store, user.accountID, one)
            var sealed = user.change(1, edit: 1, plaintext: "with a photo")
            sealed.chunkRefs = [address(one), address(one)]
            let created = try await store.push(accountID: user.accountID, changes: [sealed], context: context())
            #expect(created[0].status == .created)
            let stored = try #require(try await NoteStoreConformance.everything(store, user.accountID).first)
            #expect(stored.chunkRefs == [address(one)] && stored.attachments == [])
            #expect(stored.record.attachments == [])
            var missing = user.change(1, server: created[0].serverID, edit: 2, plaintext: "another", baseVersion: 1)
            missing.chunkRefs = [address(absent)]
            let refused = try await store.push(accountID: user.accountID, changes: [missing], context: context())
            #expect(refused[0].status == .rejected && refused[0].error?.code == .unknownChunk && refused[0].error?.field == "changes[0].chunkRefs")
            var clear = user.change(2, edit: 3, plaintext: "x")
            clear.attachments = [manifest("photo.png", one)]
            let inTheClear = try await store.push(accountID: user.accountID, changes: [clear], context: context())
            #expect(inTheClear[0].status == .rejected && inTheClear[0].error?.code == .invalidField)
            #expect(inTheClear[0].error?.field == "changes[0].attachments")
            // An edit without chunkRefs keeps the note's; the collector sees them.
            let edited = try await store.push(
                accountID: user.accountID, changes: [user.change(1, server: created[0].serverID, edit: 4, plaintext: "edited", baseVersion: 1)],
                context: context())
            #expect(edited[0].status == .updated)
            #expect(try await store.referencedChunks(accountID: user.accountID, among: [address(one), address(absent)]) == [address(one)])
            #expect(try await NoteStoreConformance.everything(store, user.accountID).first?.chunkRefs == [address(one)])
        },
        Check(name: "attachments: an encrypted delete of a tombstone with other chunkRefs writes nothing") { store in
            // notes-sim's long seed 2499: two devices delete the same note, the second with an attachment the first never
            // saw. The second delete's chunkRefs made a write of the tombstone, which kept the first delete's envelope and
            // took the second's edit ID: an envelope no device (nor the auditor) could open as the edit the server named.
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let one = bytes(100, seed: 1)
            _ = try await put(store, user.accountID, one)
            let keys = AccountKeyRing(user.accountKey)
            func opens(_ text: String, as editID: FlakeID?) -> Bool {
                guard let editID else { return false }
                let context = NoteEnvelope.Context(account: user.accountID, clientID: id(1), origin: id(77), editID: editID)
                return (try? NoteEnvelope.open(NoteEnvelope(text: text), expecting: context, keys: keys)) != nil
            }
            let created = try await store.push(accountID: user.accountID, changes: [user.change(1, edit: 1, plaintext: "note")], context: context())
            let note = try #require(created[0].serverID)
            let phone = TestSupport.change(1, server: note, edit: 2, text: user.seal("", clientID: 1, editID: 2), deleted: true, baseVersion: 1)
            #expect(try await store.push(accountID: user.accountID, changes: [phone], context: context())[0].status == .deleted)
            var laptop = TestSupport.change(1, server: note, edit: 3, text: user.seal("", clientID: 1, editID: 3), deleted: true, baseVersion: 1)
            laptop.chunkRefs = [address(one)]
            let result = try await store.push(accountID: user.accountID, changes: [laptop], context: context())[0]
            #expect(result.status == .unchanged && result.version == 2, "\(result)")
            let tombstone = try #require(try await NoteStoreConformance.everything(store, user.accountID).first)
            #expect(tombstone.deleted && tombstone.version == 2 && tombstone.editID == id(2) && tombstone.chunkRefs == [])
            #expect(opens(tombstone.text, as: tombstone.editID), "the tombstone opens as the edit the server names")
            let history = try #require(try await NoteStoreConformance.page(store, user.accountID, note)).versions
            #expect(history.map(\.version) == [1, 2])
            for version in history {
                #expect(opens(version.text, as: version.editID), "version \(version.version)")
            }
            // The note's own envelope sent again under another edit ID with other chunkRefs writes nothing either (the
            // envelope is sealed for the note's edit).
            let two = user.change(2, edit: 4, plaintext: "two")
            let second = try #require(try await store.push(accountID: user.accountID, changes: [two], context: context())[0].serverID)
            var resent = two
            (resent.editID, resent.serverID, resent.baseVersion, resent.chunkRefs) = (id(7), second, 1, [address(one)])
            #expect(try await store.push(accountID: user.accountID, changes: [resent], context: context())[0].status == .unchanged)
            // A tombstone whose delete carried chunkRefs keeps them against a delete that carries none.
            var withFile = TestSupport.change(2, server: second, edit: 5, text: user.seal("", clientID: 2, editID: 5), deleted: true, baseVersion: 1)
            withFile.chunkRefs = [address(one)]
            #expect(try await store.push(accountID: user.accountID, changes: [withFile], context: context())[0].status == .deleted)
            var without = TestSupport.change(2, server: second, edit: 6, text: user.seal("", clientID: 2, editID: 6), deleted: true, baseVersion: 1)
            without.chunkRefs = []
            #expect(try await store.push(accountID: user.accountID, changes: [without], context: context())[0].status == .unchanged)
            let kept = try #require(try await NoteStoreConformance.everything(store, user.accountID).first { $0.serverID == second })
            #expect(kept.version == 2 && kept.editID == id(5) && kept.chunkRefs == [address(one)])
        },
        Check(name: "attachments: the collector keeps chunks of notes, tombstones and kept versions, and collects detached ones") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let (kept, detached, buried) = (bytes(100, seed: 1), bytes(200, seed: 2), bytes(300, seed: 3))
            for chunk in [kept, detached, buried] { _ = try await put(store, alice, chunk, now: 1000) }
            let first = try await store.push(
                accountID: alice, changes: [attaching(edit: 1, [manifest("kept.png", kept), manifest("gone.png", detached)])],
                context: context(now: testEpoch))
            let note = try #require(first[0].serverID)
            var other = attaching(edit: 2, [manifest("buried.png", buried)])
            other.clientID = id(2)
            let second = try await store.push(accountID: alice, changes: [other], context: context(now: testEpoch))
            // Detach one file; delete the other note (its tombstone keeps its attachments: a restore brings them back).
            _ = try await store.push(
                accountID: alice,
                changes: [
                    attaching(
                        server: note, edit: 3, baseVersion: 1, [manifest("kept.png", kept)],
                        base: [manifest("kept.png", kept), manifest("gone.png", detached)])
                ],
                context: context(now: testEpoch + 10))
            var delete = change(2, server: second[0].serverID, edit: 4, text: "", deleted: true, baseVersion: 1)
            delete.clientID = id(2)
            #expect(try await store.push(accountID: alice, changes: [delete], context: context(now: testEpoch + 10))[0].status == .deleted)
            let all = [address(kept), address(detached), address(buried)]
            // The detached file's chunk is still in a kept version: nothing goes.
            #expect(try await store.referencedChunks(accountID: alice, among: all) == Set(all))
            var collected = try await store.collectChunks(references: store, unreferencedSince: testEpoch + 100, now: testEpoch + 200, batch: 2)
            #expect(collected == CollectedChunks())
            // Once that version is pruned, the detached chunk goes after its grace period; the others stay.
            #expect(try await store.pruneHistory(savedBefore: testEpoch + 5) > 0)
            #expect(try await store.referencedChunks(accountID: alice, among: all) == [address(kept), address(buried)])
            // (The first round referenced every chunk again at its time: the grace period counts from there.)
            collected = try await store.collectChunks(references: store, unreferencedSince: testEpoch + 300, now: testEpoch + 400, batch: 2)
            #expect(collected == CollectedChunks(chunks: 1, bytes: 200))
            #expect(try await read(store, alice, address(detached)) == nil)
            #expect(try await read(store, alice, address(kept)) == kept)
            #expect(try await read(store, alice, address(buried)) == buried)
            #expect(try await store.checkChunks(.all) == [])
        },
        Check(name: "attachments: check reports a note referring to a chunk its account does not store") { store in
            let alice = try await NoteStoreConformance.makeAccount(store, "alice")
            let one = bytes(100, seed: 1)
            _ = try await put(store, alice, one, now: 1000)
            let created = try await store.push(accountID: alice, changes: [attaching(edit: 1, [manifest("a.png", one)])], context: context())
            let note = try #require(created[0].serverID)
            #expect(try await store.checkChunks(.all) == [])
            // A collector that ignores the notes (a bug, or a hand-edited database) loses the chunk under the note.
            _ = try await store.collectChunks(references: NoChunkReferences(), unreferencedSince: .max, now: .max, batch: 10)
            let problems = try await store.checkChunks(.all)
            #expect(problems.contains { $0.contains("note \(note.rawValue) of account \(alice.rawValue)") && $0.contains(address(one).hex) }, "\(problems)")
            #expect(problems.contains { $0.contains("version 1 of note \(note.rawValue)") }, "\(problems)")
        },
    ]
}
