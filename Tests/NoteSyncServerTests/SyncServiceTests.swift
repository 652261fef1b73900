import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

@Suite("Service pieces")
struct SyncServiceTests {
    @Test func tokensAreBase64URLWithPrefixAndStoredHashed() {
        let random = RandomBytes.using(SplitMix64(seed: 1))
        var seen = Set<String>()
        for _ in 0..<200 {
            let token = SessionToken.make(randomBytes: random)
            #expect(SessionToken.isWellFormed(token))
            #expect(token.count == 46)
            #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
            #expect(seen.insert(token).inserted)
            let hash = SessionToken.hash(token)
            #expect(hash.count == 64)
            #expect(hash.allSatisfy { "0123456789abcdef".contains($0) })
        }
        #expect(SessionToken.base64URL([0xFB, 0xFF]) == "-_8")
        #expect(SessionToken.base64URL(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(SessionToken.base64URL(Array("fo".utf8)) == "Zm8")
        // SHA-256 of "abc".
        #expect(SessionToken.hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(!SessionToken.isWellFormed("fn_" + String(repeating: "a", count: 42) + "="))
        #expect(!SessionToken.isWellFormed("xx_" + String(repeating: "a", count: 43)))
    }

    @Test func throttleCountsFailuresInTheWindow() {
        let throttle = SignInThrottle(maxFailures: 5, windowMilliseconds: 60_000)
        var now: Int64 = 1_000_000
        for _ in 0..<5 {
            #expect(throttle.begin(username: "a", now: now) == nil)
            throttle.finish(username: "a", succeeded: false, now: now)
            now += 10_000
        }
        // Oldest failure at 1_000_000 ages out at 1_060_000; now is 1_050_000.
        #expect(throttle.begin(username: "a", now: now) == 10)
        #expect(throttle.begin(username: "a", now: now + 9_999) == 1)
        #expect(throttle.begin(username: "a", now: now + 10_000) == nil)
        throttle.finish(username: "a", succeeded: true, now: now + 10_000)
        #expect(throttle.trackedCount == 0)
    }

    /// A success that keeps the failures (an invite sign-up) ends its attempt without counting it and without
    /// clearing the failures before it.
    @Test func aSuccessKeepingFailuresLeavesThemCounting() {
        let throttle = SignInThrottle(maxFailures: 3, windowMilliseconds: 60_000)
        for time in [0, 1] as [Int64] {
            #expect(throttle.begin(username: "invite@a", now: time) == nil)
            throttle.finish(username: "invite@a", outcome: .failure, now: time)
        }
        #expect(throttle.begin(username: "invite@a", now: 2) == nil)
        throttle.finish(username: "invite@a", outcome: .successKeepingFailures, now: 2)
        #expect(throttle.begin(username: "invite@a", now: 3) == nil)
        throttle.finish(username: "invite@a", outcome: .failure, now: 3)
        #expect(throttle.begin(username: "invite@a", now: 4) == 60)
    }

    @Test func concurrentAttemptsCountWhileInFlight() {
        let throttle = SignInThrottle(maxFailures: 5, windowMilliseconds: 60_000)
        for _ in 0..<5 { #expect(throttle.begin(username: "burst", now: 0) == nil) }
        #expect(throttle.begin(username: "burst", now: 0) == 1)
        for _ in 0..<5 { throttle.finish(username: "burst", succeeded: false, now: 0) }
        #expect(throttle.begin(username: "burst", now: 1) == 60)
    }

    @Test func throttleForgetsOldUsernames() {
        let throttle = SignInThrottle(maxFailures: 5, windowMilliseconds: 1000)
        for index in 0..<3000 {
            _ = throttle.begin(username: "user\(index)", now: Int64(index))
            throttle.finish(username: "user\(index)", succeeded: false, now: Int64(index))
        }
        #expect(throttle.trackedCount < 2100)
    }

    @Test func signUpAndSignInRules() async throws {
        let server = try TestServer.make()
        let account = try await server.services.accounts.signUp(SignUpRequest(username: "Mixed.Case_1", password: "12345678"))
        #expect(account.username == "mixed.case_1")
        let signedIn = try await server.services.sessions.signIn(SignInRequest(username: "MIXED.case_1", password: "12345678"))
        #expect(signedIn.accountID == account.accountID)
        let stored = try #require(try await server.store.account(byID: account.accountID))
        #expect(stored.passwordHash.hasPrefix("$2"))
        #expect(!stored.passwordHash.contains("12345678"))
        // A password over 72 bytes is refused at sign-up, never truncated.
        await #expect(throws: SyncError.self) {
            _ = try await server.services.accounts.signUp(SignUpRequest(username: "long", password: String(repeating: "p", count: 73)))
        }
    }

    @Test func pullCursorAndPaging() async throws {
        let server = try TestServer.make(limits: SyncLimits(maxPageSize: 3, defaultPageSize: 2))
        let api = server.client
        let token = try await api.account("alice").token
        _ = try await api.push(token, (1...7).map { change($0, edit: $0, text: "n\($0)\n") })
        var cursor = SyncCursor.start
        var pages: [[String]] = []
        while true {
            let page = try await api.pull(token, since: cursor, limit: 3)
            pages.append(page.changes.map(\.text))
            cursor = page.cursor
            if !page.hasMore { break }
        }
        #expect(pages == [["n1\n", "n2\n", "n3\n"], ["n4\n", "n5\n", "n6\n"], ["n7\n"]])
        #expect(cursor == SyncCursor(sequence: 7))
        // A page that ends exactly at the last change says there is no more.
        let exact = try await api.pull(token, since: SyncCursor(sequence: 4), limit: 3)
        #expect(exact.changes.count == 3 && exact.hasMore == false)
        // Times on the wire are server times.
        let first = try await api.pull(token, limit: 1).changes[0]
        #expect(first.updatedAt == WireTime.format(unixMilliseconds: testEpoch))
    }
}

@Suite("Pull pages")
struct PullPageTests {
    @Test func largePagesAreWrittenAsJSONEncoderWritesThem() throws {
        let notes = (1...600).map { index in
            StoredNote(
                accountID: id(1), serverID: id(Int64(index) << 22), clientID: id(Int64(index) << 23), origin: id(99),
                version: Int64(index), text: String(repeating: "line \(index) \"quoted\"\n", count: index % 40),
                deleted: index % 7 == 0, conflictOf: index % 5 == 0 ? id(3) : nil, changeSeq: Int64(index), createdAt: 0,
                updatedAt: testEpoch + Int64(index / 100))
        }
        let page = try PullPlanner.page(PullPage(notes: notes, currentSequence: 600), after: .start, pageSize: 1000)
        #expect(page.changes == notes.map(\.record))
        let written = page.encodedJSON()
        #expect(try JSONDecoder().decode(PullResponse.self, from: written) == page)
        #expect(written.count == (try WireJSON.encoder().encode(page)).count, "the same escapes")
    }
}
