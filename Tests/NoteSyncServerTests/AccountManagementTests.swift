import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// The routes for the people who sync (issue 18): devices, password change, account deletion, usage and quotas,
/// through the API dispatcher the daemon's router calls.
@Suite("Devices, password, account deletion, quotas")
struct AccountManagementTests {
    let server: InProcessServer
    let client: APIClient

    init() throws {
        server = try InProcessServer(quota: AccountQuota(maxNotes: 5, maxTextBytes: 100), logger: testLogger)
        client = APIClient(api: server.api)
    }

    func sessions(_ token: String) async throws -> [SessionInfo] {
        try client.decode(SessionListResponse.self, try await client.call(.sessions, token: token)).sessions
    }

    @Test func devicesAreListedWithTheAskingOneMarkedAndLastSeenKeptToTheMinute() async throws {
        try await client.signUp("alice")
        let phone = try await client.signIn("alice", device: "phone", origin: id(9))
        server.clock.advance(milliseconds: 1000)
        let laptop = try await client.signIn("alice", device: "laptop")
        let bob = try await client.account("bob")

        var listed = try await sessions(phone.token)
        #expect(listed.map(\.sessionID) == [laptop.sessionID, phone.sessionID])
        #expect(listed.map(\.current) == [false, true])
        #expect(listed.map(\.deviceName) == ["laptop", "phone"])
        #expect(listed[1].origin == id(9) && listed[0].origin == nil)
        #expect(listed[1].signedInAt == WireTime.format(unixMilliseconds: testEpoch))
        // The phone's requests were seen (this one included); the laptop has made none yet.
        #expect(listed[1].lastSeenAt == WireTime.format(unixMilliseconds: testEpoch + 1000))
        #expect(listed[0].lastSeenAt == nil)
        #expect(!listed.contains { $0.sessionID == bob.sessionID })

        // Within the minute nothing is rewritten; after it, the new time is.
        server.clock.advance(milliseconds: 30_000)
        listed = try await sessions(phone.token)
        #expect(listed[1].lastSeenAt == WireTime.format(unixMilliseconds: testEpoch + 1000))
        server.clock.advance(milliseconds: 31_000)
        listed = try await sessions(laptop.token)
        #expect(listed.map(\.current) == [true, false])
        #expect(listed[0].lastSeenAt == WireTime.format(unixMilliseconds: testEpoch + 62_000))
    }

    @Test func aSessionUnusedForLongerThanTheIdleLimitExpiresAndEveryRequestExtendsIt() async throws {
        let day: Int64 = 86_400_000
        let server = try InProcessServer(logger: testLogger, sessionIdleDays: 2)
        let client = APIClient(api: server.api)
        try await client.signUp("alice")
        let phone = try await client.signIn("alice", device: "phone")
        let laptop = try await client.signIn("alice", device: "laptop")
        let tablet = try await client.signIn("alice", device: "tablet")

        // A second short of two days unused: nothing has expired; the phone's request is its last-seen time.
        server.clock.advance(milliseconds: 2 * day - 1000)
        #expect(try await sessions(phone.token, on: client).count == 3)
        #expect(try await client.call(.sessions, token: tablet.token).status == 200)

        // Two seconds later the laptop has gone unused for longer than two days: it is no longer listed, and its token
        // answers 401 (the client's sign-out path) and is deleted. The phone and the tablet were seen a second ago.
        server.clock.advance(milliseconds: 2000)
        #expect(try await sessions(phone.token, on: client).map(\.sessionID) == [tablet.sessionID, phone.sessionID])
        let expired = try await client.call(.sessions, token: laptop.token)
        #expect(expired.status == 401)
        #expect(expired.errorCode == .unauthorized)
        let account = try #require(try await server.store.account(byUsername: "alice"))
        #expect(try await server.store.sessions(accountID: account.id, limit: 10).map(\.id).sorted() == [phone.sessionID, tablet.sessionID].sorted())

        // Signing in again works at once; a server whose clock went back expires nothing.
        let again = try await client.signIn("alice", device: "laptop")
        #expect(try await client.call(.sessions, token: again.token).status == 200)
        server.clock.advance(milliseconds: -10 * day)
        #expect(try await client.call(.sessions, token: tablet.token).status == 200)
    }

    func sessions(_ token: String, on client: APIClient) async throws -> [SessionInfo] {
        try client.decode(SessionListResponse.self, try await client.call(.sessions, token: token)).sessions
    }

    @Test func revokingOneDeviceSignsItOutAtItsNextRequest() async throws {
        try await client.signUp("alice")
        let phone = try await client.signIn("alice", device: "phone")
        let laptop = try await client.signIn("alice", device: "laptop")
        let bob = try await client.account("bob")

        let revoke = try await client.call(.revokeSession, token: laptop.token, json: RevokeSessionRequest(sessionID: phone.sessionID))
        #expect(revoke.status == 204)
        #expect(try await client.call(.pull, token: phone.token).errorCode == .unauthorized)
        #expect(try await client.call(.pull, token: laptop.token).status == 200)
        // Again, or another account's session: the same 404, nothing revoked.
        for target in [phone.sessionID, bob.sessionID] {
            let again = try await client.call(.revokeSession, token: laptop.token, json: RevokeSessionRequest(sessionID: target))
            #expect(again.status == 404 && again.errorCode == .unknownSession)
        }
        #expect(try await client.call(.pull, token: bob.token).status == 200)
        // A malformed ID is invalid_id; an unknown field is refused.
        let malformed = try await client.call(.revokeSession, token: laptop.token, rawJSON: #"{"sessionID": "0"}"#)
        #expect(malformed.errorCode == .invalidID)
        let unknown = try await client.call(.revokeSession, token: laptop.token, rawJSON: #"{"sessionID": "5", "all": true}"#)
        #expect(unknown.errorCode == .unknownField)
    }

    @Test func signingOutEverywhereElseKeepsOnlyTheAskingDevice() async throws {
        try await client.signUp("alice")
        let tokens = try await (0..<3).asyncMap { try await client.signIn("alice", device: "d\($0)").token }
        let bob = try await client.account("bob")
        let answer = try client.decode(RevokedSessionsResponse.self, try await client.call(.revokeOtherSessions, token: tokens[1]))
        #expect(answer.revokedSessions == 2)
        #expect(try await client.call(.pull, token: tokens[0]).errorCode == .unauthorized)
        #expect(try await client.call(.pull, token: tokens[2]).errorCode == .unauthorized)
        #expect(try await client.call(.pull, token: tokens[1]).status == 200)
        #expect(try await client.call(.pull, token: bob.token).status == 200)
    }

    @Test func changingThePasswordNeedsTheCurrentOneAndSignsOtherDevicesOut() async throws {
        try await client.signUp("alice")
        let phone = try await client.signIn("alice", device: "phone")
        let laptop = try await client.signIn("alice", device: "laptop")

        let wrong = try await client.call(
            .changePassword, token: laptop.token, json: ChangePasswordRequest(currentPassword: "not it at all", newPassword: "new password 1"))
        #expect(wrong.status == 403 && wrong.errorCode == .wrongPassword)
        #expect(wrong.errorBody()?.field == "currentPassword")
        let short = try await client.call(
            .changePassword, token: laptop.token, json: ChangePasswordRequest(currentPassword: "correct horse", newPassword: "short"))
        #expect(short.errorCode == .invalidField && short.errorBody()?.field == "newPassword")
        // Neither changed anything.
        #expect(try await client.call(.pull, token: phone.token).status == 200)

        let changed = try client.decode(
            RevokedSessionsResponse.self,
            try await client.call(
                .changePassword, token: laptop.token, json: ChangePasswordRequest(currentPassword: "correct horse", newPassword: "new password 1")))
        #expect(changed.revokedSessions == 1)
        #expect(try await client.call(.pull, token: phone.token).errorCode == .unauthorized)
        #expect(try await client.call(.pull, token: laptop.token).status == 200)
        let old = try await client.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse"))
        #expect(old.errorCode == .invalidCredentials)
        _ = try await client.signIn("alice", "new password 1")
    }

    @Test func wrongPasswordsAreThrottledLikeSignIns() async throws {
        let alice = try await client.account("alice")
        for _ in 0..<5 {
            let wrong = try await client.call(.deleteAccount, token: alice.token, json: DeleteAccountRequest(password: "guess guess"))
            #expect(wrong.errorCode == .wrongPassword)
        }
        let refused = try await client.call(.deleteAccount, token: alice.token, json: DeleteAccountRequest(password: "correct horse"))
        #expect(refused.status == 429 && refused.errorCode == .tooManyAttempts)
        #expect(refused.headers["Retry-After"] != nil)
        // The same count as sign-ins: a sign-in is refused too, and the account still exists.
        let signIn = try await client.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse"))
        #expect(signIn.errorCode == .tooManyAttempts)
        #expect(try await client.call(.account, token: alice.token).status == 200)
    }

    @Test func deletingTheAccountRemovesEverythingAndFreesTheUsername() async throws {
        let alice = try await client.account("alice")
        let other = try await client.signIn("alice", device: "other")
        let bob = try await client.account("bob")
        _ = try await client.push(alice.token, [change(1, edit: 1, text: "a\n"), change(2, edit: 2, text: "b\n")])
        _ = try await client.push(bob.token, [change(1, edit: 1, text: "bob\n")])

        let wrong = try await client.call(.deleteAccount, token: alice.token, json: DeleteAccountRequest(password: "wrong password"))
        #expect(wrong.errorCode == .wrongPassword)
        #expect(try await client.pullAll(alice.token).count == 2)

        let deleted = try await client.call(.deleteAccount, token: alice.token, json: DeleteAccountRequest(password: "correct horse"))
        #expect(deleted.status == 204)
        for token in [alice.token, other.token] {
            #expect(try await client.call(.pull, token: token).errorCode == .unauthorized)
            #expect(try await client.call(.push, token: token, json: PushRequest(changes: [change(3, edit: 3, text: "c")])).errorCode == .unauthorized)
        }
        #expect(try await client.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse")).errorCode == .invalidCredentials)
        #expect(try await client.pullAll(bob.token).map(\.text) == ["bob\n"])
        // The username is free; the new account is empty.
        let again = try await client.account("alice")
        #expect(again.accountID != alice.accountID)
        #expect(try await client.pullAll(again.token).isEmpty)
    }

    @Test func theAccountReportsUsageAndLimitsAndPushesOverThemAreRejected() async throws {
        let alice = try await client.account("alice")
        var account = try client.decode(AccountResponse.self, try await client.call(.account, token: alice.token))
        #expect(account.usage == StorageUsage(notes: 0, textBytes: 0, replayTextBytes: 0, historyBytes: 0, chunkBytes: 0, maxNotes: 5, maxTextBytes: 100))

        // Each 9-byte note counts twice: its text and its first version in the history.
        let results = try await client.push(
            alice.token, (1...6).map { change(Int64($0), edit: Int64($0), text: String(repeating: "x", count: 9)) })
        #expect(results.map(\.status) == Array(repeating: .created, count: 5) + [.rejected])
        #expect(results[5].error?.code == .quotaExceeded)
        let big = try await client.push(
            alice.token, [change(1, server: results[0].serverID, edit: 7, text: String(repeating: "y", count: 70), baseVersion: 1)])
        #expect(big[0].status == .rejected && big[0].error?.code == .quotaExceeded)
        account = try client.decode(AccountResponse.self, try await client.call(.account, token: alice.token))
        #expect(account.usage == StorageUsage(notes: 5, textBytes: 45, replayTextBytes: 0, historyBytes: 45, chunkBytes: 0, maxNotes: 5, maxTextBytes: 100))
        // A conflict copy is a new note: over the note limit, the conflicting change is rejected and nothing is lost
        // on the server (the stored text stays).
        let conflict = try await client.push(
            alice.token, [change(2, server: results[1].serverID, edit: 8, text: "other\n", baseText: "base\n")])
        #expect(conflict[0].status == .rejected && conflict[0].error?.code == .quotaExceeded)
        #expect(try await client.pullAll(alice.token).count == 5)
        // A merge's answer is kept for replays: reported, and counted in the byte limit.
        let merged = try await client.push(
            alice.token, [change(1, server: results[0].serverID, edit: 9, text: "base\n", baseText: "base\n")])
        #expect(merged[0].status == .merged && merged[0].text == String(repeating: "x", count: 9))
        account = try client.decode(AccountResponse.self, try await client.call(.account, token: alice.token))
        #expect(account.usage == StorageUsage(notes: 5, textBytes: 45, replayTextBytes: 9, historyBytes: 45, chunkBytes: 0, maxNotes: 5, maxTextBytes: 100))
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var values: [T] = []
        for element in self { values.append(try await transform(element)) }
        return values
    }
}
