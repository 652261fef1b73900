import Foundation
import GRDB
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NoteSyncServer
@testable import NotesClient
import Synchronization
import SyncHarness
import Testing
import TestSupport

/// The account key's generations on the device (issue 32): revoking a device, signing out everywhere and changing the
/// password rotate it; kept devices get the new generation through their hand-overs, a device signing in with the
/// password reaches every generation, the revoked one none written after; syncs re-seal a bounded number of older
/// notes. Over the in-process server on an SQLite file.
@Suite struct KeyRotationTests {
    typealias Files = EncryptionSyncTests.FileServer
    static let password = EncryptionSyncTests.password

    static func device(_ files: Files, seed: UInt64, transport: (any SyncTransport)? = nil) throws -> NotesClient {
        try EncryptionSyncTests.device(files.server, seed: seed, transport: transport)
    }

    static func signIn(_ device: NotesClient, password: String = password) async throws {
        _ = try await device.signIn(server: TestServer.url, username: "alice", password: password, unowned: .carry).sync.get()
    }

    /// The generations `device` holds of its (last) account.
    static func generations(_ device: NotesClient, of account: FlakeID) throws -> [UInt32] {
        try device.store.read { tx in try tx.keyRing(of: account)?.generations ?? [] }
    }

    /// The key generation the server's copy of `note` (of `device`) is sealed under.
    static func serverGeneration(_ files: Files, _ device: NotesClient, _ note: Int64) throws -> UInt32 {
        let serverID = try #require(try device.note(note).serverID).rawValue
        var text: Data?
        try files.tamper { db in text = try Data.fetchOne(db, sql: "SELECT text FROM notes WHERE server_id = ?", arguments: [serverID]) }
        return try NoteEnvelope(text: String(decoding: try #require(text), as: UTF8.self)).keyGeneration
    }

    /// The ID of `device`'s session, as `notes devices revoke` takes it.
    static func sessionID(of device: NotesClient) async throws -> String {
        let own = try await device.devices().first { $0.isThisDevice }
        return String(try #require(own).sessionID.rawValue)
    }

    @Test func revokingADeviceRotatesTheKeyAndOnlyTheKeptDevicesReadWhatIsWrittenAfter() async throws {
        let files = try Files()
        let (a, b, _) = try await EncryptionSyncTests.twoDevices(files)
        let c = try Self.device(files, seed: 3)
        try await Self.signIn(c)
        let account = try #require(try a.account()).accountID

        let revoked = try await a.revokeDevice(try await Self.sessionID(of: c))
        #expect(revoked.keyGeneration == 2)
        #expect(try Self.generations(a, of: account) == [1, 2])
        let note = try a.add("canarysecret written after the revocation")
        try await a.syncOK()
        #expect(try Self.serverGeneration(files, a, note.id) == 2)

        // The kept device opens its hand-over (no password asked) and reads the note.
        try await b.syncOK()
        #expect(try Self.generations(b, of: account) == [1, 2])
        #expect(try b.notes().map(\.text) == ["canarysecret written after the revocation"])
        // The revoked device holds generation 1 only: with the server's copy it cannot open the note.
        await #expect(throws: NotesError.self) { _ = try await c.sync() }
        let ring = try #require(try c.store.read { tx in try tx.keyRing(of: account) })
        #expect(ring.generations == [1])
        let serverID = try #require(try a.note(note.id).serverID).rawValue
        var record: (text: Data, editID: Int64)?
        try files.tamper { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT text, edit_id FROM notes WHERE server_id = ?", arguments: [serverID]))
            record = (row[0], row[1])
        }
        let stored = try #require(record)
        let identity = try a.note(note.id)
        #expect(throws: NoteCryptoError.self) {
            _ = try NoteSealing.payload(
                of: String(decoding: stored.text, as: UTF8.self), editID: try FlakeID(validating: stored.editID), clientID: identity.clientID,
                origin: identity.origin, keys: ring)
        }
        // b's own edits are sealed under generation 2 too.
        let fromB = try b.add("canaryfromb")
        try await b.syncOK()
        #expect(try Self.serverGeneration(files, b, fromB.id) == 2)
        #expect(try files.occurrences(of: "canary") == 0)
    }

    @Test func aDeviceSigningInAfterTwoRotationsReadsEveryNoteAndEveryVersion() async throws {
        let files = try Files()
        let (a, b, _) = try await EncryptionSyncTests.twoDevices(files)
        let account = try #require(try a.account()).accountID
        let first = try a.add("first, generation 1")
        try await a.syncOK()
        _ = try await a.revokeDevice(try await Self.sessionID(of: b))
        _ = try a.edit(first.id, text: "first, edited under generation 2")
        let second = try a.add("second, generation 2")
        try await a.syncOK()
        let c = try Self.device(files, seed: 3)
        try await Self.signIn(c)
        let signedOut = try await a.signOutOtherDevices()
        #expect(signedOut.count == 1 && signedOut.keyGeneration == 3)
        let third = try a.add("third, generation 3")
        try await a.syncOK()
        #expect(try Self.serverGeneration(files, a, third.id) == 3)
        _ = second

        // A new device with the password: generation 1 from the password's wrapped key, 2 and 3 from the hand-overs
        // sealed to the password, every older one through the chain.
        let d = try Self.device(files, seed: 4)
        try await Self.signIn(d)
        #expect(try Self.generations(d, of: account) == [1, 2, 3])
        #expect(Set(try d.notes().map(\.text)) == ["first, edited under generation 2", "second, generation 2", "third, generation 3"])
        // Version 1 of the first note is still sealed under generation 1.
        let firstOnD = try #require(try d.notes().first { $0.text.hasPrefix("first") })
        let history = try await d.history(firstOnD.id)
        #expect(history.versions.map(\.text).contains("first, generation 1"))
        // The device revoked at generation 1, signing in again with the password, reaches every generation too.
        try await Self.signIn(b)
        #expect(try Self.generations(b, of: account) == [1, 2, 3])
    }

    @Test func aPasswordChangeRotatesAndAnotherDeviceReadsWithTheNewPassword() async throws {
        let files = try Files()
        let (a, b, _) = try await EncryptionSyncTests.twoDevices(files)
        let account = try #require(try a.account()).accountID
        _ = try a.add("before the change")
        try await a.syncOK()
        #expect(try await a.changePassword(current: Self.password, new: "a new password 42") == 1)
        #expect(try Self.generations(a, of: account) == [1, 2])
        let after = try a.add("after the change")
        try await a.syncOK()
        #expect(try Self.serverGeneration(files, a, after.id) == 2)
        await #expect(throws: NotesError.self) { _ = try await b.sync() }
        try await Self.signIn(b, password: "a new password 42")
        #expect(try Self.generations(b, of: account) == [1, 2])
        #expect(Set(try b.notes().map(\.text)) == ["before the change", "after the change"])
        // A second change rotates again; the device that made it keeps syncing.
        #expect(try await a.changePassword(current: "a new password 42", new: "a third password 7") == 1)
        #expect(try Self.generations(a, of: account) == [1, 2, 3])
        try await a.syncOK()
    }

    /// Runs `before` once, just before the first rotation request passes (another device rotating first).
    final class RotationRace: SyncTransport {
        private let base: any SyncTransport
        private let before: @Sendable () async throws -> Void
        private let fired = Mutex(false)
        init(_ base: any SyncTransport, before: @escaping @Sendable () async throws -> Void) {
            self.base = base
            self.before = before
        }

        func send(_ request: WireRequest) async throws -> WireResponse {
            if request.path == Endpoint.rotateKeys.path, !fired.withLock({ fired in defer { fired = true }; return fired }) {
                try await before()
            }
            return try await base.send(request)
        }
    }

    @Test func aRotationAnsweredStaleFetchesTheKeysAndRetriesOnce() async throws {
        let files = try Files()
        let (_, b, _) = try await EncryptionSyncTests.twoDevices(files)
        let account = try #require(try b.account()).accountID
        let c = try Self.device(files, seed: 3)
        try await Self.signIn(c)
        let d = try Self.device(files, seed: 4)
        try await Self.signIn(d)
        let dID = try await Self.sessionID(of: d)
        let cID = try await Self.sessionID(of: c)
        // A fifth device, over a transport where b revokes d (rotating to 2) just before a' rotates.
        let racing = try Self.device(
            files, seed: 5,
            transport: RotationRace(files.server.transport) { _ = try await b.revokeDevice(dID) })
        try await Self.signIn(racing)
        let revoked = try await racing.revokeDevice(cID)
        #expect(revoked.keyGeneration == 3)
        #expect(try Self.generations(racing, of: account) == [1, 2, 3])
        try await b.syncOK()
        #expect(try Self.generations(b, of: account) == [1, 2, 3])
    }

    @Test func syncsResealABoundedNumberOfOlderNotesUnderTheNewestGeneration() async throws {
        let files = try Files()
        let (a, b, _) = try await EncryptionSyncTests.twoDevices(files)
        let count = SyncEngine.resealPerSync + 5
        let ids = try (0..<count).map { index in try a.add("note \(index)").id }
        try await a.syncOK()
        _ = try await a.revokeDevice(try await Self.sessionID(of: b))
        let first = try await a.syncOK()
        #expect(first.resealed == SyncEngine.resealPerSync)
        let generations = try ids.map { id in try Self.serverGeneration(files, a, id) }
        #expect(generations.filter { $0 == 2 }.count == SyncEngine.resealPerSync)
        let second = try await a.syncOK()
        #expect(second.resealed == 5)
        #expect(try ids.allSatisfy { id in try Self.serverGeneration(files, a, id) == 2 })
        #expect(try await a.syncOK().resealed == 0)
        // Nothing changed in the notes.
        #expect(try a.notes().count == count && a.status().pending == 0)
    }

    @Test func aHandoverThatDoesNotOpenIsAnErrorNamingItAndNothingIsStored() async throws {
        let files = try Files()
        let (a, b, _) = try await EncryptionSyncTests.twoDevices(files)
        let account = try #require(try a.account()).accountID
        let bSession = try #require(Int64(try await Self.sessionID(of: b)))
        let c = try Self.device(files, seed: 3)
        try await Self.signIn(c)
        _ = try await a.revokeDevice(try await Self.sessionID(of: c))
        // The server (or an attacker with its store) replaces b's hand-over by one sealed to another key pair.
        let stranger = AccountKey.generate(account: account)
        let forged = try KeyHandover.seal(try stranger.rotated(), authenticatedBy: stranger, to: DeviceKeyPair.generate().publicKey)
        try files.tamper { db in
            try db.execute(
                sql: "UPDATE key_handovers SET handover = ? WHERE session_id = ? AND generation = 2", arguments: [Data(forged.bytes), bSession])
        }
        let failure = await #expect(throws: NotesError.self) { _ = try await b.sync() }
        #expect(failure?.code == .encryption)
        #expect(failure?.message.contains("hand-over of generation 2 sealed to this device") == true, "\(String(describing: failure))")
        #expect(try Self.generations(b, of: account) == [1])
    }

    // MARK: - Recovery

    /// What `notesyncd users reset-password alice` does: the temporary password's AuthKey under the account's salt
    /// becomes the credential, the account `reset`, every session ended.
    static func operatorReset(_ files: Files, to temporary: String) async throws {
        let store = files.server.store
        let account = try #require(try await store.account(byUsername: "alice"))
        let keys = try #require(try await (store as? any EncryptionStore)?.encryptionKeys(accountID: account.id))
        let authKey = try PasswordKDF.deriveKeys(password: temporary, parameters: keys.kdf, policy: .allowInsecureForTesting).authKey
        let hash = PasswordHashing.bcrypt(cost: 4).hash(authKey.serverPassword)
        #expect(try await (store as? any EncryptionStore)?.resetEncryptedPassword(accountID: account.id, passwordHash: hash) == true)
    }

    @Test func afterAResetTheRecoveryKeyOpensEveryGenerationAndANewPasswordWrapsThem() async throws {
        let files = try Files()
        let (a, b, recoveryKey) = try await EncryptionSyncTests.twoDevices(files)
        let account = try #require(try a.account()).accountID
        _ = try a.add("canaryone, generation 1")
        try await a.syncOK()
        _ = try await a.revokeDevice(try await Self.sessionID(of: b))
        _ = try a.add("canarytwo, generation 2")
        try await a.syncOK()
        try await Self.operatorReset(files, to: "temporary 123")

        // Signing in with the temporary password says what happened; nothing is stored.
        let c = try Self.device(files, seed: 3)
        let refused = await #expect(throws: NotesError.self) {
            _ = try await c.signIn(server: TestServer.url, username: "alice", password: "temporary 123")
        }
        #expect(refused?.code == .accountReset && refused?.message.contains("recovery key") == true)
        #expect(try c.account() == nil && Self.generations(c, of: account).isEmpty)
        // A wrong recovery key opens nothing and changes nothing.
        let wrong = await #expect(throws: NotesError.self) {
            _ = try await c.recoverAccount(
                server: TestServer.url, username: "alice", temporaryPassword: "temporary 123",
                recoveryKey: RecoveryKey.generate().humanForm, newPassword: "recovered 456")
        }
        #expect(wrong?.code == .encryption, "\(String(describing: wrong))")
        #expect(try await files.server.store.account(byUsername: "alice")?.encryption == .reset)
        // The right one: generation 1 from the recovery-wrapped key, 2 through the hand-over sealed to it.
        let report = try await c.recoverAccount(
            server: TestServer.url, username: "alice", temporaryPassword: "temporary 123", recoveryKey: try #require(recoveryKey),
            newPassword: "recovered 456")
        _ = try report.sync.get()
        #expect(try Self.generations(c, of: account) == [1, 2])
        #expect(Set(try c.notes().map(\.text)) == ["canaryone, generation 1", "canarytwo, generation 2"])
        #expect(try await files.server.store.account(byUsername: "alice")?.encryption == .encrypted)
        // The other devices sign in with the new password; the temporary one no longer works.
        try await Self.signIn(b, password: "recovered 456")
        #expect(Set(try b.notes().map(\.text)) == ["canaryone, generation 1", "canarytwo, generation 2"])
        let d = try Self.device(files, seed: 4)
        await #expect(throws: NotesError.self) { _ = try await d.signIn(server: TestServer.url, username: "alice", password: "temporary 123") }
        #expect(try await c.devices().count == 2, "the temporary session was signed out")
        #expect(try files.occurrences(of: "canary") == 0)
    }

    @Test func aNewRecoveryKeyReplacesTheOldOneWhichNoLongerRecovers() async throws {
        let files = try Files()
        let (a, _, old) = try await EncryptionSyncTests.twoDevices(files)
        let account = try #require(try a.account()).accountID
        _ = try a.add("before the new key")
        try await a.syncOK()
        let renewed = try await a.renewRecoveryKey()
        #expect(renewed.keyGeneration == 2 && renewed.recoveryKey != old)
        _ = try a.add("after the new key")
        try await a.syncOK()
        try await Self.operatorReset(files, to: "temporary 123")
        let c = try Self.device(files, seed: 3)
        let refused = await #expect(throws: NotesError.self) {
            _ = try await c.recoverAccount(
                server: TestServer.url, username: "alice", temporaryPassword: "temporary 123", recoveryKey: try #require(old),
                newPassword: "recovered 456")
        }
        #expect(refused?.code == .encryption)
        _ = try await c.recoverAccount(
            server: TestServer.url, username: "alice", temporaryPassword: "temporary 123", recoveryKey: renewed.recoveryKey,
            newPassword: "recovered 456"
        ).sync.get()
        #expect(try Self.generations(c, of: account) == [1, 2])
        #expect(Set(try c.notes().map(\.text)) == ["before the new key", "after the new key"])
    }
}
