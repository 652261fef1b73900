import Foundation
import Logging
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Converting a plaintext account that holds notes to end-to-end encryption (`POST /v1/account/encryption`, then
/// encrypted pushes): in process on a SQLite file (whose file and WAL are then scanned for the notes' words), and
/// through the daemon's real application over a socket on SQLite and, when `FLAKENOTES_POSTGRES_URL` is set,
/// PostgreSQL. The store-level rules are in NoteStoreConformance+Conversion.swift.
@Suite("converting an account")
struct ConversionTests {
    static let canary = "quokkacanary"

    /// Signs `username` up as a plaintext account with the operator's password, writes notes of canary words (one edited
    /// twice, a conflict copy of it, a tagged tombstone), converts it and checks every answer on the way.
    static func exercise(_ api: APIClient, _ username: String) async throws {
        let password = "operator's pw"
        _ = try await api.signUp(username, password)
        let laptop = try await api.signIn(username, password, device: "laptop")
        let phone = try await api.signIn(username, password, device: "phone")
        let created = try await api.push(laptop.token, [change(1, edit: 1, text: "\(canary) one"), change(2, edit: 2, text: "\(canary) gone")])
        let note = try #require(created[0].serverID)
        _ = try await api.push(laptop.token, [change(2, server: created[1].serverID, edit: 3, text: "", deleted: true, baseVersion: 1)])
        _ = try await api.push(phone.token, [change(1, server: note, edit: 4, text: "\(canary) two", baseVersion: 1)])
        let conflict = try await api.push(
            laptop.token, [change(1, server: note, edit: 5, text: "\(canary) three", baseVersion: 1, baseText: "\(canary) one")])
        let copy = try #require(conflict[0].conflict)

        let user = EncryptedUser(username, now: SystemFlakeClock.precise.unixMilliseconds(), password: password)
        var setup = user.setup
        setup.accountID = laptop.accountID
        let request = AccountEncryptionRequest(currentPassword: password, newPassword: user.password, encryption: setup)
        // Hostile or mistaken requests store nothing: malformed JSON, a password that is not an AuthKey, a wrong password.
        let malformed = try await api.call(.setUpEncryption, token: laptop.token, rawJSON: #"{"currentPassword": 5}"#)
        #expect(malformed.status == 400 && malformed.errorCode == .invalidJSON)
        var notAuthKey = request
        notAuthKey.newPassword = "a person's password"
        #expect(try await api.call(.setUpEncryption, token: laptop.token, json: notAuthKey).errorBody()?.field == "newPassword")
        var wrong = request
        wrong.currentPassword = "not the one"
        #expect(try await api.call(.setUpEncryption, token: laptop.token, json: wrong).errorCode == .wrongPassword)
        #expect(try api.decode(AccountResponse.self, try await api.call(.account, token: laptop.token)).encryption == .plaintext)

        let started = try api.decode(AccountEncryptionResponse.self, try await api.call(.setUpEncryption, token: laptop.token, json: request))
        #expect(started == AccountEncryptionResponse(revokedSessions: 1, encryption: .converting, plaintextNotes: 2))
        #expect(try await api.call(.account, token: phone.token).status == 401)
        let converting = try api.decode(AccountResponse.self, try await api.call(.account, token: laptop.token))
        #expect(converting.encryption == .converting && converting.plaintextNotes == 2)
        // The AuthKey is the credential now; the prelogin says encrypted; a second set-up is refused.
        #expect(try await api.call(.signIn, json: SignInRequest(username: username, password: password)).errorCode == .invalidCredentials)
        let signedIn = try api.decode(SignInResponse.self, try await api.call(.signIn, json: user.signInRequest(device: "desk")))
        #expect(signedIn.encryption?.state == .converting)
        var again = request
        again.currentPassword = user.password
        let twice = try await api.call(.setUpEncryption, token: laptop.token, json: again)
        #expect(twice.status == 409 && twice.errorCode == .alreadyEncrypted)
        // Pushes must be envelopes now.
        let plain = try await api.push(laptop.token, [change(1, server: note, edit: 6, text: "\(canary) four", baseVersion: 2)])
        #expect(plain[0].error?.code == .notEncrypted)

        let first = try await api.push(laptop.token, [user.change(1, server: note, edit: 7, plaintext: "\(canary) two", baseVersion: 2)])
        #expect(first[0].status == .updated)
        #expect(try api.decode(AccountResponse.self, try await api.call(.account, token: laptop.token)).plaintextNotes == 1)
        let last = try await api.push(
            laptop.token, [user.change(copy.clientID.rawValue, server: copy.serverID, edit: 8, plaintext: "\(canary) three", baseVersion: 1)])
        #expect(last[0].status == .updated)
        let done = try api.decode(AccountResponse.self, try await api.call(.account, token: laptop.token))
        #expect(done.encryption == .encrypted && done.plaintextNotes == nil && done.usage?.replayTextBytes == 0)
        // What a device pulls and the history it reads hold no word in the clear.
        let pulled = try await api.pullAll(laptop.token)
        #expect(pulled.count == 3 && pulled.allSatisfy { !$0.text.contains(canary) && ($0.tags ?? []).isEmpty })
        let history = try await api.allVersions(laptop.token, note)
        #expect(history.map(\.version) == [3] && history.allSatisfy { !$0.text.contains(canary) && $0.tags.isEmpty })
    }

    @Test func aConvertedAccountLeavesNoWordInTheDatabaseFileOrItsWAL() async throws {
        let store = try SQLiteNoteStore.temporary()
        let fixture = try EncryptedAccountTests.Fixture(store: store)
        try await Self.exercise(fixture.api, "carl")
        // A plaintext account beside it is still readable (the scan would see a word).
        let plain = try await fixture.api.account("plainuser")
        _ = try await fixture.api.push(plain.token, [change(1, edit: 1, text: "wombatcontrol is readable")])
        let path = try #require(store.databasePath)
        #expect(Self.hits(Self.canary, in: [path, path + "-wal"]) == 0)
        #expect(Self.hits("wombatcontrol", in: [path, path + "-wal"]) > 0)
        try await store.close()
    }

    /// How many times `word` occurs in the files.
    static func hits(_ word: String, in files: [String]) -> Int {
        files.reduce(0) { total, file in
            guard let data = FileManager.default.contents(atPath: file) else { return total }
            var count = 0
            var range = data.startIndex..<data.endIndex
            while let found = data.range(of: Data(word.utf8), in: range) {
                count += 1
                range = found.upperBound..<data.endIndex
            }
            return total + count
        }
    }

    @Test func overHTTPOnSQLite() async throws {
        try await LiveDaemon.test { _, api in try await Self.exercise(api, "carl") }
    }

    @Test(.enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
    func overHTTPOnPostgreSQL() async throws {
        try await LiveDaemon.serve(try await LiveDaemon.postgresConfiguration()) { port, _ in
            try await LiveDaemon.withHTTPClient(port: port) { api in try await Self.exercise(api, "carl") }
        }
    }
}
