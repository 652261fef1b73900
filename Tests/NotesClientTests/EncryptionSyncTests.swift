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

/// End-to-end encrypted accounts on the device (issue 32): the keys in the local store, sign-up and sign-in through
/// prelogin, sealed pushes, opened pulls, `stale` answered by a merge on the device, and records that do not open
/// refused. Over the in-process server on an SQLite file, which is scanned for the canary words every note holds.
@Suite struct EncryptionSyncTests {
    /// A server whose store is a file this test can read and tamper with.
    struct FileServer {
        let server: InProcessServer
        let directory: URL
        var path: String { directory.appendingPathComponent(SQLiteNoteStore.fileName).path }

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("e2ee-\(UUID().uuidString)", isDirectory: true)
            server = try InProcessServer(
                store: try SQLiteNoteStore(dataDirectory: directory.path), instance: 1000, limits: SyncLimits(), tokenSeed: 7,
                logger: quietLogger)
        }

        /// How many times `word` occurs in the database file and its WAL.
        func occurrences(of word: String) throws -> Int {
            let needle = Array(word.utf8)
            var hits = 0
            for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
                var index = 0
                while index + needle.count <= bytes.count {
                    if bytes[index] == needle[0] && Array(bytes[index..<index + needle.count]) == needle { hits += 1 }
                    index += 1
                }
            }
            return hits
        }

        /// Runs `sql` on the server's file behind its back (an attacker with the database).
        func tamper(_ body: (Database) throws -> Void) throws {
            let queue = try DatabaseQueue(path: path)
            try queue.write(body)
        }
    }

    /// A device whose encrypted accounts hash passwords at the testing cost, which it explicitly accepts.
    static func device(
        _ server: InProcessServer, seed: UInt64, home: URL? = nil, policy: KDFPolicy = .allowInsecureForTesting,
        transport: (any SyncTransport)? = nil
    ) throws -> NotesClient {
        var environment = NotesEnvironment(
            clock: ManualFlakeClock(unixMilliseconds: testEpoch + Int64(seed % 1000) * 7), random: SplitMix64(seed: seed),
            transport: NotesEnvironment.fixed(transport ?? server.transport), sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3),
            deviceName: "device-\(seed)")
        environment.kdfCost = .insecureForTesting
        environment.kdfPolicy = policy
        if let home { return try NotesClient.open(home: home, environment: environment) }
        return try NotesClient.inMemory(environment: environment)
    }

    static let password = "correct horse battery"

    /// Alice's encrypted account on two devices: `a` signed up, `b` signed in.
    static func twoDevices(_ files: FileServer) async throws -> (a: NotesClient, b: NotesClient, recoveryKey: String?) {
        let a = try device(files.server, seed: 1)
        let b = try device(files.server, seed: 2)
        let report = try await a.signUp(server: TestServer.url, username: "alice", password: password, encrypted: true, unowned: .carry)
        _ = try report.sync.get()
        _ = try await b.signIn(server: TestServer.url, username: "alice", password: password, unowned: .carry).sync.get()
        return (a, b, report.recoveryKey)
    }

    /// Two devices of one encrypted account (``twoDevices(_:)``, on a server of its own) that both hold a note `a` added with `text` and synced.
    static func twoDevicesSharing(_ text: String) async throws -> (a: NotesClient, b: NotesClient, note: LocalNote, onB: LocalNote) {
        let files = try FileServer()
        let (a, b, _) = try await twoDevices(files)
        let note = try a.add(text)
        try await a.syncOK()
        try await b.syncOK()
        let onB = try #require(try b.notes().first)
        return (a, b, note, onB)
    }

    @Test func signUpStoresTheKeysOnTheDeviceAndShowsARecoveryKey() async throws {
        let files = try FileServer()
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("e2ee-home-\(UUID().uuidString)", isDirectory: true)
        var a: NotesClient? = try Self.device(files.server, seed: 1, home: home)
        let report = try await a!.signUp(server: TestServer.url, username: "alice", password: Self.password, encrypted: true)
        _ = try report.sync.get()
        let recovery = try #require(report.recoveryKey)
        #expect(throws: Never.self) { try RecoveryKey(parsing: recovery) }
        #expect(try a!.status().encrypted)
        // A plaintext sign-up stores no key and is not encrypted.
        let plain = try Self.device(files.server, seed: 5)
        let plainReport = try await plain.signUp(server: TestServer.url, username: "bob", password: Self.password)
        _ = try plainReport.sync.get()
        #expect(plainReport.recoveryKey == nil)
        #expect(try !plain.status().encrypted)
        let account = try #require(try a!.account()).accountID
        _ = try await a!.signOut()
        a = nil
        // Reopened and signed out, the device still holds the key ring and its key pair (the notes stay readable).
        let reopened = try Self.device(files.server, seed: 1, home: home)
        #expect(try !reopened.status().encrypted, "signed out")
        let (ring, pair) = try reopened.store.read { tx in (try tx.keyRing(of: account), try tx.deviceKeyPair()) }
        #expect(ring?.generations == [1])
        let again = try reopened.store.read { tx in try tx.deviceKeyPair() }
        #expect(pair.publicKey == again.publicKey)
        // One ring, alice's.
        let rows = try reopened.store.read { tx in try Row.fetchAll(tx.db, sql: "SELECT account_id FROM account_keys") }
        #expect(rows.map { $0[0] as Int64 } == [account.rawValue])
    }

    @Test func twoDevicesConvergeAndTheServerHoldsNoCanary() async throws {
        let files = try FileServer()
        let (a, b, _) = try await Self.twoDevices(files)
        let first = try a.add("canaryalpha canarybravo\nsecond line", tags: ["canarytag"])
        _ = try a.pin(first.id)
        try await a.syncOK()
        try await b.syncOK()
        #expect(try a.status().encrypted && b.status().encrypted)
        let seen = try #require(try b.notes().first)
        #expect(seen.text == "canaryalpha canarybravo\nsecond line")
        #expect(seen.tags == ["canarytag"])
        #expect(seen.isPinned)
        let edited = try b.edit(seen.id, text: "canaryalpha canarycharlie\nsecond line")
        _ = try b.tag(edited.id, adding: ["canaryother"])
        try await b.syncOK()
        try await a.syncOK()
        let back = try a.note(first.id)
        #expect(back.text == "canaryalpha canarycharlie\nsecond line")
        #expect(back.tags == ["canaryother", "canarytag"])
        _ = try a.delete(first.id)
        try await a.syncOK()
        try await b.syncOK()
        #expect(try b.notes().isEmpty)
        #expect(try files.occurrences(of: "canary") == 0)
    }

    /// A push stored but whose answer was lost is sealed again when it is sent again; when a sign-in's pull brought
    /// the stored version first, the resend carries a newer seq the server never stores (it answers `replayed`). That
    /// seq must not count as seen, or the server's own version reads as a rollback (notes-sim's long seed 841).
    @Test func aPushReplayedAfterASignInsPullIsNotARollback() async throws {
        let files = try FileServer()
        let lossy = FaultInjectingTransport(files.server.transport)
        let b = try Self.device(files.server, seed: 2, transport: lossy)
        _ = try await b.signUp(server: TestServer.url, username: "alice", password: Self.password, encrypted: true).sync.get()
        let note = try b.add("one\n")
        try await b.syncOK()
        _ = try b.edit(note.id, text: "one\ntwo\n")
        lossy.setPlan { request, _ in request.path == Endpoint.push.path ? .dropAnswer : nil }
        await #expect(throws: NotesError.self) { try await b.sync() }
        lossy.setPlan { _, _ in nil }
        _ = try await b.signOut()
        let report = try await b.signIn(server: TestServer.url, username: "alice", password: Self.password).sync.get()
        #expect(report.tampered.isEmpty, "\(report.tampered)")
        #expect(try b.texts() == ["one\ntwo\n"])
        #expect(try await b.syncOK().tampered.isEmpty)
    }

    @Test func aStaleChangeIsMergedOnTheDeviceAndPushedAgain() async throws {
        let (a, b, note, onB) = try await Self.twoDevicesSharing("one\ntwo\nthree\n")
        _ = try a.edit(note.id, text: "ONE\ntwo\nthree\n")
        _ = try b.edit(onB.id, text: "one\ntwo\nTHREE\n")
        _ = try b.tag(onB.id, adding: ["b"])
        try await a.syncOK()
        let report = try await b.syncOK()
        #expect(report.stale == 1)
        #expect(report.deviceMerged == 1)
        #expect(report.pending == 0)
        try await a.syncOK()
        #expect(try a.texts() == ["ONE\ntwo\nTHREE\n"])
        #expect(try b.texts() == ["ONE\ntwo\nTHREE\n"])
        #expect(try a.note(note.id).tags == ["b"])
    }

    @Test func overlappingEditsBecomeAConflictCopyMadeByTheDevice() async throws {
        let (a, b, note, onB) = try await Self.twoDevicesSharing("the same line\n")
        _ = try a.edit(note.id, text: "a's line\n")
        _ = try b.edit(onB.id, text: "b's line\n")
        try await a.syncOK()
        let report = try await b.syncOK()
        #expect(report.deviceConflicts == [onB.id])
        try await a.syncOK()
        #expect(try a.texts() == ["a's line\n", "b's line\n"])
        #expect(try b.texts() == ["a's line\n", "b's line\n"])
        #expect(try b.note(onB.id).text == "a's line\n")
    }

    /// A note deleted on one device and edited on another comes back (an edit wins over a delete) with the `seq` that
    /// follows the last payload both saw, which the deleting device must not take for a rollback: a delete's own
    /// `seq` travels nowhere (a tombstone has no payload). Found by notes-sim.
    @Test func aNoteDeletedHereAndEditedThereComesBackWithoutARollback() async throws {
        let (a, b, note, onB) = try await Self.twoDevicesSharing("kept\n")
        _ = try b.delete(onB.id)
        try await b.syncOK()
        _ = try a.tag(note.id, adding: ["back"])
        try await a.syncOK()
        let report = try await b.syncOK()
        #expect(report.tampered.isEmpty, "\(report.tampered)")
        #expect(try b.notes().map(\.text) == ["kept\n"])
        #expect(try b.notes().first?.tags == ["back"])
    }

    /// A device takes a tag off a note and unpins it, then deletes it, while another device edits it: the edit wins over
    /// the delete, and the note comes back on both devices without that tag and unpinned, as the server keeps a plaintext
    /// account's `kept` delete. notes-sim's long seed 5232 (no-lost-tag-change): before, the deleting device took the
    /// other version whole after its delete's `stale` answer, and the tag it took off came back.
    @Test func aDeleteThatLosesToAnEditKeepsTheTagsAndFlagsItChanged() async throws {
        let (a, b, note, onB) = try await Self.twoDevicesSharing("kept\n")
        _ = try a.tag(note.id, adding: ["off", "stays"])
        _ = try a.pin(note.id)
        try await a.syncOK()
        try await b.syncOK()
        _ = try b.tag(onB.id, adding: [], removing: ["off"])
        _ = try b.pin(onB.id, false)
        _ = try b.delete(onB.id)
        _ = try a.edit(note.id, text: "kept\nedited on a\n")
        try await a.syncOK()
        let report = try await b.syncOK()
        #expect(report.stale == 1)
        #expect(report.deviceMerged == 1)
        #expect(report.pending == 0)
        try await a.syncOK()
        for device in [a, b] {
            let back = try #require(try device.notes().first)
            #expect(back.text == "kept\nedited on a\n")
            #expect(back.tags == ["stays"])
            #expect(!back.isPinned)
        }
    }

    /// The edit that brings back a note deleted elsewhere follows the tombstone's `seq`: the device that deleted it
    /// (and had written an edit the restoring device never saw) does not take it for a rollback. notes-sim seeds 10,
    /// 57 and 61: before, a tombstone had no payload, and the restoring edit took the `seq` of that unseen edit.
    @Test func aNoteRestoredAfterAnEditItsDeviceNeverSawIsNotARollback() async throws {
        let (a, b, note, onB) = try await Self.twoDevicesSharing("one\n")
        _ = try a.edit(note.id, text: "one\ntwo\n")
        try await a.syncOK()  // seq 2, which b never pulls before the delete
        _ = try a.delete(note.id)
        try await a.syncOK()
        _ = try b.edit(onB.id, text: "one\nfrom b\n")
        let restoring = try await b.syncOK()
        #expect(restoring.tampered.isEmpty && restoring.pending == 0)
        let report = try await a.syncOK()
        #expect(report.tampered.isEmpty, "\(report.tampered)")
        #expect(try a.notes().map(\.text) == ["one\nfrom b\n"])
    }

    /// The note that keeps the other device's text after a conflict made on the device takes the merged tags, as the
    /// server's conflict does for a plaintext account: a tag either device added stays on it (found by notes-sim).
    @Test func aConflictMadeByTheDeviceKeepsBothDevicesTagsOnTheNote() async throws {
        let (a, b, note, onB) = try await Self.twoDevicesSharing("the same line\n")
        _ = try a.edit(note.id, text: "a's line\n")
        _ = try a.tag(note.id, adding: ["from-a"])
        _ = try b.edit(onB.id, text: "b's line\n")
        _ = try b.tag(onB.id, adding: ["from-b"])
        try await a.syncOK()
        let report = try await b.syncOK()
        #expect(report.deviceConflicts == [onB.id])
        #expect(report.pending == 0)
        try await a.syncOK()
        #expect(try a.note(note.id).tags == ["from-a", "from-b"])
        #expect(try b.note(onB.id).tags == ["from-a", "from-b"])
        #expect(try b.note(onB.id).text == "a's line\n")
        let copy = try #require(try b.notes().first { $0.id != onB.id })
        #expect(copy.text == "b's line\n" && copy.tags == ["from-b"])
    }

    /// Moves notes' rows to the end of their account's change sequence, so that a device's next pull brings them.
    /// A device whose push was lost (its change still in flight) signs in again after another device edited or deleted
    /// the note: the sign-in's first pull meets that version while the change is in flight and cannot merge it yet,
    /// so the stored cursor stays before it; the push is answered `stale`, and the pull that follows brings the version
    /// again and merges it. Also when the sign-in's own push is lost too: the next sync pulls it again. notes-sim seed
    /// 1190 (1,000 steps; seeds 154 and 160 before the keys request moved a sync's requests): before, the cursor passed
    /// the version, every push was answered `stale` and the device never converged.
    @Test(arguments: [false, true], [false, true])
    func aChangeInFlightWhenASignInPullsANewerVersionIsMergedAfterItsStaleAnswer(deleted: Bool, signInPushLost: Bool) async throws {
        let files = try FileServer()
        let a = try Self.device(files.server, seed: 1)
        let lossy = FaultInjectingTransport(files.server.transport)
        let b = try Self.device(files.server, seed: 2, transport: lossy)
        _ = try await a.signUp(server: TestServer.url, username: "alice", password: Self.password, encrypted: true).sync.get()
        _ = try await b.signIn(server: TestServer.url, username: "alice", password: Self.password).sync.get()
        let note = try a.add("one\ntwo\nthree\n")
        try await a.syncOK()
        try await b.syncOK()
        let onB = try #require(try b.notes().first)
        _ = try b.edit(onB.id, text: "one\ntwo\nTHREE\n")
        let losePushes = { lossy.setPlan { request, _ in request.path == Endpoint.push.path ? .refuse : nil } }
        losePushes()
        await #expect(throws: NotesError.self) { try await b.sync() }
        lossy.setPlan { _, _ in nil }
        if deleted { _ = try a.delete(note.id) } else { _ = try a.edit(note.id, text: "ONE\ntwo\nthree\n") }
        try await a.syncOK()
        _ = try await b.signOut()
        if signInPushLost { losePushes() }
        let signIn = try await b.signIn(server: TestServer.url, username: "alice", password: Self.password).sync
        if signInPushLost {
            #expect(throws: NotesError.self) { try signIn.get() }
            lossy.setPlan { _, _ in nil }
            #expect(try await b.syncOK().pending == 0)
        } else {
            #expect(try signIn.get().pending == 0)
        }
        try await a.syncOK()
        let expected = deleted ? ["one\ntwo\nTHREE\n"] : ["ONE\ntwo\nTHREE\n"]
        #expect(try a.texts() == expected)
        #expect(try b.texts() == expected)
        #expect(try files.occurrences(of: "THREE") == 0)
    }

    static func republish(_ db: Database, _ serverIDs: [Int64]) throws {
        for id in serverIDs {
            try db.execute(
                sql: "UPDATE notes SET change_seq = (SELECT MAX(change_seq) + 1 FROM notes) WHERE server_id = ?", arguments: [id])
            try db.execute(
                sql: """
                    UPDATE accounts SET change_seq = (SELECT MAX(change_seq) FROM notes)
                    WHERE id = (SELECT account_id FROM notes WHERE server_id = ?)
                    """,
                arguments: [id])
        }
    }

    @Test func swappedCiphertextsAreRefusedAndTheDeviceKeepsItsNotes() async throws {
        let files = try FileServer()
        let (a, _, _) = try await Self.twoDevices(files)
        let first = try a.add("first")
        let second = try a.add("second")
        try await a.syncOK()
        let ids = try [a.note(first.id), a.note(second.id)].map { try #require($0.serverID).rawValue }
        try files.tamper { db in
            let texts = try ids.map { id in try Data.fetchOne(db, sql: "SELECT text FROM notes WHERE server_id = ?", arguments: [id])! }
            let edits = try ids.map { id in try Int64.fetchOne(db, sql: "SELECT edit_id FROM notes WHERE server_id = ?", arguments: [id])! }
            try db.execute(sql: "UPDATE notes SET text = ?, edit_id = ? WHERE server_id = ?", arguments: [texts[1], edits[1], ids[0]])
            try db.execute(sql: "UPDATE notes SET text = ?, edit_id = ? WHERE server_id = ?", arguments: [texts[0], edits[0], ids[1]])
            try Self.republish(db, ids)
        }
        let report = try await a.syncOK()
        #expect(Set(report.tampered.map(\.serverID.rawValue)) == Set(ids))
        #expect(try a.note(first.id).text == "first")
        #expect(try a.note(second.id).text == "second")
        // A new device refuses them too, and holds neither.
        let c = try Self.device(files.server, seed: 3)
        let signIn = try await c.signIn(server: TestServer.url, username: "alice", password: Self.password)
        #expect(try signIn.sync.get().tampered.count == 2)
        #expect(try c.notes().isEmpty)
    }

    @Test func aRolledBackVersionIsRefused() async throws {
        let files = try FileServer()
        let (a, b, _) = try await Self.twoDevices(files)
        let note = try a.add("version one")
        try await a.syncOK()
        try await b.syncOK()
        let serverID = try #require(try a.note(note.id).serverID).rawValue
        var old: (Data, Int64)?
        try files.tamper { db in
            old = (
                try Data.fetchOne(db, sql: "SELECT text FROM notes WHERE server_id = ?", arguments: [serverID])!,
                try Int64.fetchOne(db, sql: "SELECT edit_id FROM notes WHERE server_id = ?", arguments: [serverID])!
            )
        }
        _ = try a.edit(note.id, text: "version two")
        try await a.syncOK()
        try await b.syncOK()
        #expect(try b.texts() == ["version two"])
        let (text, editID) = try #require(old)
        try files.tamper { db in
            try db.execute(sql: "UPDATE notes SET text = ?, edit_id = ? WHERE server_id = ?", arguments: [text, editID, serverID])
            try Self.republish(db, [serverID])
        }
        let report = try await b.syncOK()
        #expect(report.tampered.map(\.serverID.rawValue) == [serverID])
        #expect(try b.texts() == ["version two"])
    }

    @Test func aNoteMovedFromAnotherAccountDoesNotOpen() async throws {
        let files = try FileServer()
        let (a, _, _) = try await Self.twoDevices(files)
        let mallory = try Self.device(files.server, seed: 9)
        _ = try await mallory.signUp(server: TestServer.url, username: "mallory", password: Self.password, encrypted: true).sync.get()
        let planted = try mallory.add("from mallory")
        try await mallory.syncOK()
        let mine = try a.add("alice's")
        try await a.syncOK()
        let target = try #require(try a.note(mine.id).serverID).rawValue
        let source = try #require(try mallory.note(planted.id).serverID).rawValue
        try files.tamper { db in
            try db.execute(
                sql: "UPDATE notes SET text = (SELECT text FROM notes WHERE server_id = ?), edit_id = (SELECT edit_id FROM notes WHERE server_id = ?) WHERE server_id = ?",
                arguments: [source, source, target])
            try Self.republish(db, [target])
        }
        let report = try await a.syncOK()
        #expect(report.tampered.map(\.serverID.rawValue) == [target])
        #expect(try a.texts() == ["alice's"])
    }

    @Test func historyVersionsAreOpenedOnTheDeviceAndRestoreTheirText() async throws {
        let files = try FileServer()
        let (a, b, _) = try await Self.twoDevices(files)
        let note = try a.add("canary first", tags: ["canarytag"])
        try await a.syncOK()
        _ = try a.edit(note.id, text: "canary second")
        try await a.syncOK()
        try await b.syncOK()
        let onB = try #require(try b.notes().first)
        let history = try await b.history(onB.id)
        #expect(history.versions.map(\.text) == ["canary first", "canary second"])
        #expect(history.versions.map(\.tags) == [["canarytag"], ["canarytag"]])
        _ = try await b.restore(onB.id, version: 1)
        try await b.syncOK()
        try await a.syncOK()
        #expect(try a.texts() == ["canary first"])
        #expect(try files.occurrences(of: "canary") == 0)
    }

    @Test func aSignInRefusesAServersDowngradedPasswordCost() async throws {
        let files = try FileServer()
        let a = try Self.device(files.server, seed: 1)
        _ = try await a.signUp(server: TestServer.url, username: "alice", password: Self.password, encrypted: true).sync.get()
        // The account was made at the testing cost; a device that enforces the minimum refuses to derive with it.
        let strict = try Self.device(files.server, seed: 2, policy: .enforceMinimum)
        await #expect(throws: NotesError.self) {
            _ = try await strict.signIn(server: TestServer.url, username: "alice", password: Self.password)
        }
        #expect(try strict.account() == nil)
        // A wrong password is the server's `invalid_credentials`, as for a plaintext account.
        let other = try Self.device(files.server, seed: 3)
        do {
            _ = try await other.signIn(server: TestServer.url, username: "alice", password: "not the password")
            Issue.record("signed in with a wrong password")
        } catch {
            #expect(error.code == .invalidCredentials)
        }
    }

    /// Records the paths a device sends and the passwords its credential requests carry; when told, answers every
    /// prelogin that the account is plaintext (a server that tries to make a device send the password itself).
    final class WatchedTransport: SyncTransport {
        private let base: any SyncTransport
        private let state = Mutex<(paths: [String], passwords: [String], downgrade: Bool)>(([], [], false))

        init(_ base: any SyncTransport) { self.base = base }

        var paths: [String] { state.withLock { $0.paths } }
        /// The `password` and `currentPassword` fields of sign-ins, password changes and account deletions.
        var passwords: [String] { state.withLock { $0.passwords } }
        func prelogins() -> Int { paths.filter { $0 == Endpoint.prelogin.path }.count }
        func downgrade(_ on: Bool) { state.withLock { $0.downgrade = on } }
        func forget() { state.withLock { $0.paths = []; $0.passwords = [] } }

        func send(_ request: WireRequest) async throws -> WireResponse {
            var fields: [String] = []
            if [Endpoint.signIn, .changePassword, .deleteAccount].map(\.path).contains(request.path), let body = request.body,
                let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
            {
                fields = ["password", "currentPassword"].compactMap { object[$0] as? String }
            }
            let downgrade = state.withLock { state in
                state.paths.append(request.path)
                state.passwords += fields
                return state.downgrade
            }
            if downgrade && request.path == Endpoint.prelogin.path {
                return WireResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(#"{"encrypted":false}"#.utf8))
            }
            return try await base.send(request)
        }
    }

    @Test func aPlaintextAccountSignedInOnceSkipsPreloginAndAnEncryptedOneAlwaysAsks() async throws {
        let files = try FileServer()
        let watch = WatchedTransport(files.server.transport)
        let bob = try Self.device(files.server, seed: 5, transport: watch)
        _ = try await bob.signUp(server: TestServer.url, username: "bob", password: Self.password).sync.get()
        #expect(watch.prelogins() == 1, "the first sign-in asks: \(watch.paths)")
        _ = try await bob.signOut()
        watch.forget()
        _ = try await bob.signIn(server: TestServer.url, username: "BOB", password: Self.password).sync.get()
        _ = try await bob.changePassword(current: Self.password, new: "another password")
        #expect(watch.prelogins() == 0, "\(watch.paths)")
        #expect(watch.passwords == [Self.password, Self.password])

        let alice = try Self.device(files.server, seed: 1, transport: watch)
        _ = try await alice.signUp(server: TestServer.url, username: "alice", password: Self.password, encrypted: true).sync.get()
        _ = try await alice.signOut()
        watch.forget()
        _ = try await alice.signIn(server: TestServer.url, username: "alice", password: Self.password).sync.get()
        _ = try await alice.changePassword(current: Self.password, new: "another password")
        #expect(watch.prelogins() == 2, "\(watch.paths)")
        #expect(watch.passwords.count == 2 && watch.passwords.allSatisfy { $0.count == 64 && $0 != Self.password })
        // The new password opens the account's key on another device; the old one no longer signs in.
        let other = try Self.device(files.server, seed: 3)
        await #expect(throws: NotesError.self) {
            _ = try await other.signIn(server: TestServer.url, username: "alice", password: Self.password)
        }
        _ = try await other.signIn(server: TestServer.url, username: "alice", password: "another password").sync.get()
        #expect(try other.status().encrypted)
    }

    @Test func aDeviceThatHoldsAnAccountsKeysRefusesAPreloginThatCallsItPlaintext() async throws {
        let files = try FileServer()
        let watch = WatchedTransport(files.server.transport)
        let a = try Self.device(files.server, seed: 1, transport: watch)
        _ = try await a.signUp(server: TestServer.url, username: "alice", password: Self.password, encrypted: true).sync.get()
        watch.downgrade(true)
        watch.forget()
        // Signed in: the password change and the deletion refuse before sending anything that proves the password.
        do {
            _ = try await a.changePassword(current: Self.password, new: "another password")
            Issue.record("changed the password after a downgraded prelogin")
        } catch {
            #expect(error.code == .encryption, "\(error)")
        }
        do {
            _ = try await a.deleteAccount(password: Self.password)
            Issue.record("deleted the account after a downgraded prelogin")
        } catch {
            #expect(error.code == .encryption, "\(error)")
        }
        // Signed out: the sign-in refuses too, and sends no sign-in.
        _ = try await a.signOut()
        do {
            _ = try await a.signIn(server: TestServer.url, username: "alice", password: Self.password)
            Issue.record("signed in after a downgraded prelogin")
        } catch {
            #expect(error.code == .encryption, "\(error)")
        }
        #expect(watch.passwords.isEmpty, "\(watch.passwords)")
        #expect(!watch.paths.contains(Endpoint.signIn.path), "\(watch.paths)")
        watch.downgrade(false)
        _ = try await a.signIn(server: TestServer.url, username: "alice", password: Self.password).sync.get()
        #expect(try a.status().encrypted)
    }

    @Test func aDeviceThatKnewAUsernamePlaintextSignsInToItsEncryptedSuccessor() async throws {
        let files = try FileServer()
        let p = try Self.device(files.server, seed: 5)
        _ = try await p.signUp(server: TestServer.url, username: "bob", password: Self.password).sync.get()
        let watch = WatchedTransport(files.server.transport)
        let d = try Self.device(files.server, seed: 6, transport: watch)
        _ = try await d.signIn(server: TestServer.url, username: "bob", password: Self.password).sync.get()
        let plaintextID = try #require(try d.account()).accountID
        _ = try await d.signOut()
        // bob is deleted and signed up again, encrypted: the device's memory of a plaintext account is out of date.
        _ = try await p.deleteAccount(password: Self.password)
        let e = try Self.device(files.server, seed: 7)
        _ = try await e.signUp(server: TestServer.url, username: "bob", password: Self.password, encrypted: true).sync.get()
        watch.forget()
        _ = try await d.signIn(server: TestServer.url, username: "bob", password: Self.password).sync.get()
        #expect(try d.status().encrypted)
        #expect(try d.account()?.accountID != plaintextID)
        // The password went once, as at the plaintext sign-in, then the AuthKey after the prelogin.
        #expect(watch.prelogins() == 1, "\(watch.paths)")
        #expect(watch.passwords.count == 2 && watch.passwords[0] == Self.password && watch.passwords[1].count == 64)
    }
}
