import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// End-to-end encrypted accounts (issue 32), checked on every store by the conformance suite.
extension NoteStoreConformance {
    static func encryptionStore(_ store: any NoteStore) throws -> any EncryptionStore {
        try #require(store as? any EncryptionStore)
    }

    static let encryptionChecks: [Check] = [
        Check(name: "encryption: an account's state, generation and keys are stored with it") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            var expected = user.record
            expected.keys = nil
            #expect(try await store.account(byUsername: "alice") == expected)
            #expect(try await store.account(byID: user.accountID) == expected)
            #expect(try await encryptionStore(store).encryptionKeys(accountID: user.accountID) == user.record.keys)
            // A plaintext account has none.
            let bob = try await makeAccount(store, "bob")
            #expect(try await store.account(byID: bob)?.encryption == .plaintext)
            #expect(try await store.account(byID: bob)?.keyGeneration == 0)
            #expect(try await encryptionStore(store).encryptionKeys(accountID: bob) == nil)
            // The username is taken for an encrypted account too, and nothing of the refused one is kept.
            var clash = EncryptedUser("alice", sequence: 1).record
            clash.username = "alice"
            await #expect(throws: NoteStoreError.usernameTaken) { try await store.createAccount(clash) }
            #expect(try await encryptionStore(store).encryptionKeys(accountID: clash.id) == nil)
            // Deleting the account deletes its keys.
            #expect(try await store.deleteAccount(id: user.accountID))
            #expect(try await encryptionStore(store).encryptionKeys(accountID: user.accountID) == nil)
        },
        Check(name: "encryption: a server secret is made once and kept") { store in
            let keys = try encryptionStore(store)
            let first = try await keys.serverSecret(named: "test") { Array(repeating: 1, count: 32) }
            let second = try await keys.serverSecret(named: "test") { Array(repeating: 2, count: 32) }
            #expect(first == Array(repeating: 1, count: 32) && second == first)
            #expect(try await keys.serverSecret(named: "other") { [3] } == [3])
        },
        Check(name: "encryption: sessions keep their device public key") { store in
            let alice = try await makeAccount(store, "alice")
            let key = DeviceKeyPair.generate().publicKey
            let session = SessionRecord(
                id: minter.mint(), accountID: alice, tokenHash: "aa", deviceName: "phone", origin: id(9), createdAt: 7, devicePublicKey: key)
            try await store.createSession(session)
            #expect(try await store.session(byTokenHash: "aa")?.devicePublicKey == key)
            #expect(try await store.sessions(accountID: alice, limit: 10).map(\.devicePublicKey) == [key])
        },
        Check(name: "encryption: notes and versions keep the edit that wrote them") { store in
            let alice = try await makeAccount(store, "alice")
            let created = try await store.push(accountID: alice, changes: [change(1, edit: 10, text: "a\n")], context: context())
            let note = try #require(created[0].serverID)
            _ = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 11, text: "b\n", baseVersion: 1)], context: context())
            _ = try await store.push(
                accountID: alice, changes: [change(1, server: note, edit: 12, text: "", deleted: true, baseVersion: 2)], context: context())
            let stored = try #require(try await everything(store, alice).first)
            #expect(stored.editID == id(12) && stored.record.editID == id(12))
            #expect(try await page(store, alice, note)?.versions.map(\.editID) == [id(10), id(11), id(12)])
        },
        Check(name: "encryption: a rotation is stored whole or not at all, once per generation") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let keys = try encryptionStore(store)
            let session = SessionRecord(
                id: minter.mint(), accountID: user.accountID, tokenHash: "aa", deviceName: nil, origin: nil, createdAt: 7,
                devicePublicKey: user.device.publicKey)
            try await store.createSession(session)
            let bob = try await makeAccount(store, "bob")
            let bobSession = SessionRecord(id: minter.mint(), accountID: bob, tokenHash: "bb", deviceName: nil, origin: nil, createdAt: 7)
            try await store.createSession(bobSession)
            let next = try user.accountKey.rotated()
            let older = try user.accountKey.wrapped(by: next)
            let sealed = try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: user.device.publicKey)
            let toRecovery = try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: user.recovery.publicKey)
            // A hand-over to another account's session: nothing is kept.
            #expect(
                try await keys.rotateKeys(accountID: user.accountID, generation: 2, older: older, handovers: [(.session(bobSession.id), sealed)])
                    == .unknownSession(bobSession.id))
            #expect(try await store.account(byID: user.accountID)?.keyGeneration == 1)
            #expect(try await keys.keyChain(accountID: user.accountID, sessionID: session.id, generations: 1...10) == KeyChain())
            // The rotation itself, then again: stale.
            let handovers: [(HandoverRecipient, KeyHandover)] = [(.session(session.id), sealed), (.recoveryKey, toRecovery), (.password, sealed)]
            #expect(try await keys.rotateKeys(accountID: user.accountID, generation: 2, older: older, handovers: handovers) == .rotated)
            #expect(try await keys.rotateKeys(accountID: user.accountID, generation: 2, older: older, handovers: []) == .stale(current: 2))
            #expect(try await keys.rotateKeys(accountID: bob, generation: 1, older: older, handovers: []) == .stale(current: 0))
            #expect(try await store.account(byID: user.accountID)?.keyGeneration == 2)
            let chain = try await keys.keyChain(accountID: user.accountID, sessionID: session.id, generations: 1...2)
            #expect(chain.older == [older])
            #expect(chain.handovers.map(\.handover) == [sealed] && chain.passwordHandovers.map(\.handover) == [sealed])
            #expect(chain.recoveryHandovers.map(\.handover) == [toRecovery] && chain.handovers.map(\.generation) == [2])
            // Another session sees only the password's and the recovery key's.
            let other = try await keys.keyChain(accountID: user.accountID, sessionID: bobSession.id, generations: 1...2)
            #expect(other.handovers.isEmpty && other.passwordHandovers.count == 1)
        },
        Check(name: "encryption: a password change re-wraps and rotates in one transaction") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let keys = try encryptionStore(store)
            let kept = SessionRecord(id: minter.mint(), accountID: user.accountID, tokenHash: "aa", deviceName: nil, origin: nil, createdAt: 7)
            let other = SessionRecord(id: minter.mint(), accountID: user.accountID, tokenHash: "bb", deviceName: nil, origin: nil, createdAt: 8)
            try await store.createSession(kept)
            try await store.createSession(other)
            let next = try user.accountKey.rotated()
            let newPassword = EncryptedUser("alice", password: "another one")
            let newKeys = AccountKeys(
                kdf: newPassword.kdf, wrappedKey: next.wrapped(by: newPassword.derived.wrapKey), recoveryWrappedKey: user.recoveryWrappedKey,
                recoveryPublicKey: user.recovery.publicKey, passwordPublicKey: newPassword.passwordKeyPair.publicKey)
            // A wrapped key of a generation the account is not at: nothing changes.
            let refused = try await keys.changeEncryptedPassword(
                accountID: user.accountID, passwordHash: "h2", keys: newKeys, keepingSession: kept.id, rotation: nil)
            #expect(refused.0 == .stale(current: 1) && refused.revokedSessions == 0)
            #expect(try await store.account(byID: user.accountID)?.passwordHash == "$2b$04$hash")
            let handover = try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: newPassword.passwordKeyPair.publicKey)
            let outcome = try await keys.changeEncryptedPassword(
                accountID: user.accountID, passwordHash: "h2", keys: newKeys, keepingSession: kept.id,
                rotation: KeyRotation(generation: 2, older: try user.accountKey.wrapped(by: next), handovers: [(.password, handover)]))
            #expect(outcome.0 == .rotated && outcome.revokedSessions == 1)
            let account = try await store.account(byID: user.accountID)
            #expect(account?.passwordHash == "h2" && account?.keyGeneration == 2)
            #expect(try await keys.encryptionKeys(accountID: user.accountID) == newKeys)
            #expect(try await store.session(byTokenHash: "aa") != nil)
            #expect(try await store.session(byTokenHash: "bb") == nil)
        },
        Check(name: "encryption: an empty plaintext account is set up as encrypted, once") { store in
            let user = EncryptedUser("alice")
            var plain = user.record
            plain.encryption = .plaintext
            plain.keyGeneration = 0
            plain.keys = nil
            try await store.createAccount(plain)
            let keep = SessionRecord(id: minter.mint(), accountID: user.accountID, tokenHash: "aa", deviceName: nil, origin: nil, createdAt: 7)
            let other = SessionRecord(id: minter.mint(), accountID: user.accountID, tokenHash: "bb", deviceName: nil, origin: nil, createdAt: 8)
            try await store.createSession(keep)
            try await store.createSession(other)
            let keys = try encryptionStore(store)
            let stored = try #require(user.record.keys)
            #expect(try await keys.setUpEncryption(accountID: user.accountID, passwordHash: "h2", keys: stored, keepingSession: keep.id) == .done(revokedSessions: 1, plaintextNotes: 0))
            let account = try await store.account(byID: user.accountID)
            #expect(account?.encryption == .encrypted && account?.keyGeneration == 1 && account?.passwordHash == "h2")
            #expect(try await keys.encryptionKeys(accountID: user.accountID) == stored)
            #expect(try await store.session(byTokenHash: "bb") == nil)
            #expect(try await keys.setUpEncryption(accountID: user.accountID, passwordHash: "h3", keys: stored, keepingSession: keep.id) == .notPlaintext)
            // An account with notes starts converting: NoteStoreConformance+Conversion.swift.
        },
        Check(name: "encryption: the operator's reset marks the account and ends its sessions") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            try await store.createSession(
                SessionRecord(id: minter.mint(), accountID: user.accountID, tokenHash: "aa", deviceName: nil, origin: nil, createdAt: 7))
            #expect(try await encryptionStore(store).resetEncryptedPassword(accountID: user.accountID, passwordHash: "new"))
            let account = try await store.account(byID: user.accountID)
            #expect(account?.encryption == .reset && account?.passwordHash == "new")
            #expect(try await store.session(byTokenHash: "aa") == nil)
            let bob = try await makeAccount(store, "bob")
            #expect(try await encryptionStore(store).resetEncryptedPassword(accountID: bob, passwordHash: "new") == false)
            #expect(try await store.account(byID: bob)?.passwordHash == "$2b$04$hash")
        },
        Check(name: "encryption: a rotation may replace the recovery key, dropping what was sealed to the old one") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let keys = try encryptionStore(store)
            let second = try user.accountKey.rotated()
            let toOldRecovery = try KeyHandover.seal(second, authenticatedBy: user.accountKey, to: user.recovery.publicKey)
            #expect(
                try await keys.rotateKeys(
                    accountID: user.accountID, generation: 2, older: try user.accountKey.wrapped(by: second),
                    handovers: [(.recoveryKey, toOldRecovery), (.password, toOldRecovery)]) == .rotated)
            let third = try second.rotated()
            let renewed = RecoveryKey.generate()
            let toNewRecovery = try KeyHandover.seal(third, authenticatedBy: second, to: renewed.publicKey)
            let recovery = AccountRecovery(wrappedKey: third.wrapped(by: renewed), publicKey: renewed.publicKey)
            // Refused whole when stale: the old recovery material stays.
            #expect(
                try await keys.rotateKeys(
                    accountID: user.accountID, generation: 2, older: try second.wrapped(by: third), handovers: [], recovery: recovery)
                    == .stale(current: 2))
            #expect(try await keys.encryptionKeys(accountID: user.accountID)?.recoveryWrappedKey == user.recoveryWrappedKey)
            #expect(
                try await keys.rotateKeys(
                    accountID: user.accountID, generation: 3, older: try second.wrapped(by: third),
                    handovers: [(.recoveryKey, toNewRecovery), (.password, toNewRecovery)], recovery: recovery) == .rotated)
            let stored = try await keys.encryptionKeys(accountID: user.accountID)
            #expect(stored?.recoveryWrappedKey == recovery.wrappedKey && stored?.recoveryPublicKey == renewed.publicKey)
            #expect(stored?.wrappedKey == user.wrappedKey && stored?.passwordPublicKey == user.record.keys?.passwordPublicKey)
            // The hand-over sealed to the old recovery key is gone; the new one's and the password's stay.
            let chain = try await keys.keyChain(accountID: user.accountID, sessionID: minter.mint(), generations: 1...3)
            #expect(chain.recoveryHandovers.map(\.handover) == [toNewRecovery])
            #expect(chain.passwordHandovers.map(\.generation) == [2, 3])
        },
        Check(name: "encryption: a password change recovers an account the operator reset") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let keys = try encryptionStore(store)
            let session = SessionRecord(id: minter.mint(), accountID: user.accountID, tokenHash: "aa", deviceName: nil, origin: nil, createdAt: 7)
            #expect(try await keys.resetEncryptedPassword(accountID: user.accountID, passwordHash: "temporary"))
            try await store.createSession(session)
            let newPassword = EncryptedUser("alice", password: "after the reset")
            let newKeys = AccountKeys(
                kdf: newPassword.kdf, wrappedKey: user.accountKey.wrapped(by: newPassword.derived.wrapKey),
                recoveryWrappedKey: user.recoveryWrappedKey, recoveryPublicKey: user.recovery.publicKey,
                passwordPublicKey: newPassword.passwordKeyPair.publicKey)
            let outcome = try await keys.changeEncryptedPassword(
                accountID: user.accountID, passwordHash: "h2", keys: newKeys, keepingSession: session.id, rotation: nil)
            #expect(outcome.0 == .rotated)
            let account = try await store.account(byID: user.accountID)
            #expect(account?.encryption == .encrypted && account?.passwordHash == "h2" && account?.keyGeneration == 1)
            #expect(try await keys.encryptionKeys(accountID: user.accountID) == newKeys)
        },
        Check(name: "encryption: pushes of an encrypted account are envelopes on a current base") { store in
            let user = EncryptedUser("alice")
            try await store.createAccount(user.record)
            let account = user.accountID
            let created = try await store.push(accountID: account, changes: [user.change(1, edit: 10, plaintext: "one")], context: context())
            let note = try #require(created[0].serverID)
            let plain = try await store.push(accountID: account, changes: [change(2, edit: 20, text: "in the clear")], context: context())
            #expect(plain[0].status == .rejected && plain[0].error?.code == .notEncrypted)
            _ = try await store.push(
                accountID: account, changes: [user.change(1, server: note, edit: 11, plaintext: "two", baseVersion: 1)], context: context())
            let stale = try await store.push(
                accountID: account, changes: [user.change(1, server: note, edit: 12, plaintext: "old base", baseVersion: 1)], context: context())
            #expect(stale[0].status == .stale && stale[0].version == 2)
            #expect(try await store.currentChangeSequence(accountID: account) == 2)
            let notes = try await everything(store, account)
            #expect(notes.count == 1 && notes[0].editID == id(11) && notes[0].version == 2)
            #expect((try? NoteEnvelope(text: notes[0].text)) != nil)
        },
    ]
}
