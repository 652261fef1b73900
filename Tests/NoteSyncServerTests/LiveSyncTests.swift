import Foundation
import HTTPTypes
import MiniFlake
import NoteSyncProtocol
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// Issue 19: waiting pulls (`wait=`), in process. Every wait here ends by a commit, by ``ChangeFeed/expire(now:)``
/// called by the test or by ``ChangeFeed/close()``: no test sleeps, and none depends on how fast the machine is.
@Suite("Live sync: waiting pulls")
struct LiveSyncTests {
    /// A feed whose registrations the test hears, and an in-process server over it.
    struct Fixture {
        let feed: ChangeFeed
        let server: InProcessServer
        let registrations: AsyncStream<FlakeID>

        init(limits: LiveLimits = .default, maxWaiters: Int = 750, store: (any NoteStore)? = nil) throws {
            let (registrations, registered) = AsyncStream.makeStream(of: FlakeID.self)
            feed = ChangeFeed(limits: limits, maxWaiters: maxWaiters, now: { 0 }, onRegister: { registered.yield($0) })
            server = try InProcessServer(store: store, changeFeed: feed)
            self.registrations = registrations
        }

        var api: APIClient { APIClient(api: server.api) }

        /// Two signed-in devices of a new account, alice.
        func phoneAndLaptop() async throws -> (phone: SignInResponse, laptop: SignInResponse) {
            _ = try await api.signUp("alice")
            return (try await api.signIn("alice", device: "phone"), try await api.signIn("alice", device: "laptop"))
        }
    }

    // MARK: - The feed alone

    @Test func aSignalBeforeTheWaitIsKeptAndOtherAccountsAreNotWoken() async throws {
        let feed = ChangeFeed(now: { 0 })
        let alice = try feed.register(account: id(1), deadline: 100)
        let bob = try feed.register(account: id(2), deadline: 100)
        #expect(feed.signal(account: id(1)) == 0)  // Alice registered, not waiting yet: the signal is kept.
        #expect(await feed.wait(alice) == .changed)
        #expect(feed.count == 1)
        #expect(feed.expire(now: 99) == 0)
        // Bob is not waiting yet either: the expiry is kept too.
        #expect(feed.expire(now: 100) == 0)
        #expect(await feed.wait(bob) == .expired)
        #expect(feed.count == 0)
    }

    /// A parked waiter (the HTTP server's, no task behind it) is called back once, with the wake that ended it: at
    /// once when it came before the park, else when it comes; a second wake finds nobody.
    @Test func aParkedWaiterIsCalledBackOnceWithItsWake() throws {
        let feed = ChangeFeed(now: { 0 })
        let wakes = Mutex<[String: [ChangeFeed.Wake]]>([:])
        @Sendable func record(_ name: String) -> @Sendable (ChangeFeed.Wake) -> Void {
            { wake in wakes.withLock { $0[name, default: []].append(wake) } }
        }
        let early = try feed.register(account: id(1), deadline: 100)
        feed.fire(early, .shutdown)
        feed.park(early, onWake: record("early"))
        let signalled = try feed.register(account: id(1), deadline: 100)
        let expiring = try feed.register(account: id(2), deadline: 50)
        feed.park(signalled, onWake: record("signalled"))
        feed.park(expiring, onWake: record("expiring"))
        #expect(wakes.withLock { $0 } == ["early": [.shutdown]])
        #expect(feed.count == 2)
        #expect(feed.signal(account: id(1)) == 1)
        #expect(feed.expire(now: 50) == 1)
        feed.fire(signalled, .expired)
        #expect(feed.signal(account: id(1)) == 0)
        #expect(wakes.withLock { $0 } == ["early": [.shutdown], "signalled": [.changed], "expiring": [.expired]])
        #expect(feed.count == 0)
    }

    /// What the HTTP server takes out of Hummingbird's hands (``WaitingPullHandler``): a GET of the pull path with a
    /// `wait` other than 0 and no body. Everything else goes through the router as before.
    @Test(arguments: [
        ("/v1/notes/changes?wait=20", nil, true),
        ("/v1/notes/changes?since=12&limit=1&wait=55", nil, true),
        ("/v1/notes/changes?wait=abc", nil, true),  // refused by the service: 400 invalid_wait, the same either way
        ("/v1/notes/changes?wait=0", nil, false),
        ("/v1/notes/changes", nil, false),
        ("/v1/notes/changes?since=12", nil, false),
        ("/v1/notes/changes/?wait=20", nil, false),
        ("/v1/notes/changesx?wait=20", nil, false),
        ("/v1/notes/changes?wait=20", "5", false),
        ("/v1/notes/changes?wait=20", "0", true),
    ] as [(String, String?, Bool)])
    func whichRequestsThePipelineAnswers(target: String, contentLength: String?, taken: Bool) {
        var fields = HTTPFields()
        fields[.contentLength] = contentLength
        let get = HTTPRequest(method: .get, scheme: nil, authority: "x", path: target, headerFields: fields)
        #expect(WaitingPullHandler.isWaitingPull(get) == taken)
        let post = HTTPRequest(method: .post, scheme: nil, authority: "x", path: target, headerFields: fields)
        #expect(!WaitingPullHandler.isWaitingPull(post))
    }

    /// The sweep skips while nothing can have expired, and a later registration with an earlier deadline is not
    /// skipped over.
    @Test func expiryFollowsTheEarliestDeadline() async throws {
        let feed = ChangeFeed(now: { 0 })
        let late = try feed.register(account: id(1), deadline: 100)
        #expect(feed.expire(now: 50) == 0)
        let early = try feed.register(account: id(2), deadline: 40)
        #expect(feed.expire(now: 45) == 0)  // neither waits yet: the expiry is kept, not counted
        #expect(await feed.wait(early) == .expired)
        #expect(feed.count == 1)
        async let waited = feed.wait(late)
        feed.expire(now: 100)  // waiting or not yet, it ends expired
        #expect(await waited == .expired)
        #expect(feed.count == 0)
    }

    @Test func limitsPerAccountAndPerDaemonAndClosing() async throws {
        let feed = ChangeFeed(limits: LiveLimits(maxWaitSeconds: 55, maxWaitersPerAccount: 2), maxWaiters: 3, now: { 0 })
        _ = try feed.register(account: id(1), deadline: 1)
        _ = try feed.register(account: id(1), deadline: 1)
        #expect(throws: ChangeFeed.Refusal.account(limit: 2)) { try feed.register(account: id(1), deadline: 1) }
        let third = try feed.register(account: id(2), deadline: 1)
        #expect(throws: ChangeFeed.Refusal.daemon(limit: 3)) { try feed.register(account: id(3), deadline: 1) }
        feed.cancel(third)
        #expect(feed.count == 2)
        feed.close()
        #expect(throws: ChangeFeed.Refusal.closed) { try feed.register(account: id(3), deadline: 1) }
    }

    @Test func waitSecondsAreParsedAndClamped() {
        let limits = LiveLimits(maxWaitSeconds: 55, maxWaitersPerAccount: 1)
        #expect(limits.waitSeconds("0") == 0)
        #expect(limits.waitSeconds("30") == 30)
        #expect(limits.waitSeconds("56") == 55)
        #expect(limits.waitSeconds("99999999999999999999999") == 55)
        for bad in ["", "-1", "+3", "1.5", " 3", "3s", "abc"] { #expect(limits.waitSeconds(bad) == nil, "\(bad)") }
    }

    // MARK: - Waiting pulls through the service

    @Test func aPullWithChangesAnswersAtOnceWithoutWaiting() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.api.account("alice")
        _ = try await fixture.api.push(alice.token, [change(1, edit: 10, text: "one")])
        let page = try await fixture.api.pull(alice.token, wait: 30)
        #expect(page.changes.map(\.text) == ["one"])
        #expect(fixture.feed.count == 0)
    }

    /// A waiter is woken by a push of its own account, and only by that: another account's push leaves it waiting.
    @Test func aPushWakesTheWaitersOfItsAccountOnly() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.api.account("alice")
        let bob = try await fixture.api.account("bob")
        let start = try await fixture.api.pull(alice.token)
        var registered = fixture.registrations.makeAsyncIterator()

        async let waited = fixture.api.pull(alice.token, since: start.cursor, wait: 30)
        #expect(await registered.next() == alice.accountID)
        _ = try await fixture.api.push(bob.token, [change(1, edit: 10, text: "bob's")])
        #expect(fixture.feed.count == 1, "bob's push woke alice's waiter")
        _ = try await fixture.api.push(alice.token, [change(2, edit: 20, text: "alice's")])
        let page = try await waited
        #expect(page.changes.map(\.text) == ["alice's"])
        #expect(page.cursor != start.cursor)
        #expect(fixture.feed.count == 0)
    }

    /// A push that changes nothing (a replay) does not wake anyone; the wait ends with an empty page at the same
    /// cursor when its deadline passes.
    @Test func aWaitEndsWithAnEmptyPageAtTheSameCursor() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.api.account("alice")
        _ = try await fixture.api.push(alice.token, [change(1, edit: 10, text: "one")])
        let start = try await fixture.api.pull(alice.token)
        var registered = fixture.registrations.makeAsyncIterator()

        async let waited = fixture.api.pull(alice.token, since: start.cursor, wait: 30)
        _ = await registered.next()
        let replay = try await fixture.api.push(alice.token, [change(1, edit: 10, text: "one")])
        #expect(replay.map(\.replayed) == [true])
        #expect(fixture.feed.count == 1)
        fixture.feed.expire(now: .max)
        let page = try await waited
        #expect(page.changes.isEmpty)
        #expect(page.cursor == start.cursor)
        #expect(page.hasMore == false)
    }

    /// The race the protocol closes: a change commits after the pull read the account and before the waiter was
    /// registered, so its signal reached nobody. The re-read after registering sees it and answers with it. Without
    /// the re-read the pull would wait, and the test's expiry (sent once the waiter registered) would answer an
    /// empty page: this test fails on a feed that registers and waits without re-reading.
    @Test func aCommitBetweenThePullAndTheWaitIsNotMissed() async throws {
        let inner = try SQLiteNoteStore.inMemory()
        let store = CommitAfterPullStore(inner)
        let fixture = try Fixture(store: store)
        let alice = try await fixture.api.account("alice")
        let start = try await fixture.api.pull(alice.token)
        store.arm(accountID: alice.accountID, change: change(1, origin: 77, edit: 10, text: "sneaked in"))
        var registered = fixture.registrations.makeAsyncIterator()

        async let waited = fixture.api.pull(alice.token, since: start.cursor, wait: 30)
        _ = await registered.next()
        fixture.feed.expire(now: .max)
        let page = try await waited
        #expect(store.fired)
        #expect(page.changes.map(\.text) == ["sneaked in"])
    }

    @Test func badWaitsAndTooManyWaiters() async throws {
        let fixture = try Fixture(limits: LiveLimits(maxWaitSeconds: 55, maxWaitersPerAccount: 1))
        let alice = try await fixture.api.account("alice")
        for bad in ["-1", "soon", "1.5", ""] {
            let answer = try await fixture.api.call(.pull, token: alice.token, query: [(PullQuery.wait, bad)])
            #expect(answer.status == 400)
            #expect(answer.errorCode == .invalidWait)
            #expect(answer.errorBody()?.field == "wait")
        }
        // wait=0 is a plain pull.
        #expect(try await fixture.api.pull(alice.token, wait: 0).changes.isEmpty)

        var registered = fixture.registrations.makeAsyncIterator()
        async let first = fixture.api.pull(alice.token, wait: 1_000_000)
        _ = await registered.next()
        let second = try await fixture.api.call(.pull, token: alice.token, query: [(PullQuery.wait, "5")])
        #expect(second.status == 429)
        #expect(second.errorCode == .tooManyWaiters)
        #expect(second.headers["Retry-After"] == "5")
        // Without wait the same account still pulls.
        #expect(try await fixture.api.pull(alice.token).changes.isEmpty)
        fixture.feed.expire(now: .max)
        #expect(try await first.changes.isEmpty)
    }

    /// Closing the feed (the daemon's shutdown) answers every waiter at once with an empty page, and later waits
    /// answer at once.
    @Test func closingAnswersEveryWaiterAtOnce() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.api.account("alice")
        let bob = try await fixture.api.account("bob")
        var registered = fixture.registrations.makeAsyncIterator()
        async let a = fixture.api.pull(alice.token, wait: 55)
        async let b = fixture.api.pull(bob.token, wait: 55)
        _ = await registered.next()
        _ = await registered.next()
        #expect(fixture.feed.count == 2)
        fixture.feed.close()
        #expect(try await a.changes.isEmpty)
        #expect(try await b.changes.isEmpty)
        #expect(try await fixture.api.pull(alice.token, wait: 55).changes.isEmpty)
    }

    @Test func infoServesTheLiveLimits() async throws {
        let fixture = try Fixture(limits: LiveLimits(maxWaitSeconds: 40, maxWaitersPerAccount: 9))
        let info = try fixture.api.decode(ServerInfo.self, try await fixture.api.call(.info))
        #expect(info.live == LiveLimits(maxWaitSeconds: 40, maxWaitersPerAccount: 9))
        let plain = try InProcessServer()
        #expect(try APIClient(api: plain.api).decode(ServerInfo.self, try await APIClient(api: plain.api).call(.info)).live == nil)
    }

    // MARK: - Sessions that end while a pull waits

    /// A device signed out by another one (revoked, every other device signed out, the password changed, the account
    /// deleted) while its pull waits learns it at once: 401 `unauthorized`, without the wait's deadline passing (the
    /// test never expires the feed, so a waiter the sign-out did not wake would hang the test). The device that did
    /// it keeps waiting.
    @Test(.timeLimit(.minutes(1)), arguments: ["revoke", "others", "password", "delete"])
    func aDeviceSignedOutWhileItsPullWaitsIsToldAtOnce(how: String) async throws {
        let fixture = try Fixture()
        let (phone, laptop) = try await fixture.phoneAndLaptop()
        var registered = fixture.registrations.makeAsyncIterator()

        async let phoneWait = fixture.api.call(.pull, token: phone.token, query: [(PullQuery.wait, "55")])
        _ = await registered.next()
        let answer: WireResponse
        switch how {
        case "revoke":
            answer = try await fixture.api.call(.revokeSession, token: laptop.token, json: RevokeSessionRequest(sessionID: phone.sessionID))
        case "others":
            answer = try await fixture.api.call(.revokeOtherSessions, token: laptop.token)
        case "password":
            answer = try await fixture.api.call(
                .changePassword, token: laptop.token, json: ChangePasswordRequest(currentPassword: "correct horse", newPassword: "new password 1"))
        default:
            answer = try await fixture.api.call(.deleteAccount, token: laptop.token, json: DeleteAccountRequest(password: "correct horse"))
        }
        #expect((200..<300).contains(answer.status), "\(answer.status)")
        let phoneAnswer = try await phoneWait
        #expect(phoneAnswer.status == 401)
        #expect(phoneAnswer.errorCode == .unauthorized)
        #expect(fixture.feed.count == 0)
    }

    /// A session that ended without waking anyone (as the operator's `sessions revoke` does on SQLite, from another
    /// process) gets nothing committed after it ended: the next wake-up, another device's push, answers 401, not the
    /// note. Without the session check on wake-up the revoked device would read the note.
    @Test(.timeLimit(.minutes(1))) func aSessionEndedWithoutAWakeUpGetsNoLaterChange() async throws {
        let fixture = try Fixture()
        let (phone, laptop) = try await fixture.phoneAndLaptop()
        var registered = fixture.registrations.makeAsyncIterator()

        async let phoneWait = fixture.api.call(.pull, token: phone.token, query: [(PullQuery.wait, "55")])
        _ = await registered.next()
        #expect(try await fixture.server.store.deleteSession(id: phone.sessionID, accountID: phone.accountID))
        #expect(fixture.feed.count == 1, "deleting the row straight in the store woke the waiter")
        _ = try await fixture.api.push(laptop.token, [change(1, edit: 10, text: "written after the phone was signed out")])
        let phoneAnswer = try await phoneWait
        #expect(phoneAnswer.status == 401, "\(phoneAnswer.status): \(String(decoding: phoneAnswer.body, as: UTF8.self))")
        #expect(!String(decoding: phoneAnswer.body, as: UTF8.self).contains("written after"))
    }
}

extension LiveSyncTests {
    /// Issue 28, item 1: a session that ended without waking anyone (the operator's commands on SQLite run in another
    /// process) is told at the wait's deadline: 401 `unauthorized`, not an empty page. Failed before: the deadline
    /// answered 200 with an empty page, and only the next request learnt of the sign-out. A session that still stands
    /// gets the empty page at the deadline, as before.
    @Test(.timeLimit(.minutes(1))) func aSessionEndedUnheardIsToldAtTheDeadline() async throws {
        let fixture = try Fixture()
        let (phone, laptop) = try await fixture.phoneAndLaptop()
        var registered = fixture.registrations.makeAsyncIterator()

        async let phoneWait = fixture.api.call(.pull, token: phone.token, query: [(PullQuery.wait, "55")])
        async let laptopWait = fixture.api.call(.pull, token: laptop.token, query: [(PullQuery.wait, "55")])
        _ = await registered.next()
        _ = await registered.next()
        #expect(try await fixture.server.store.deleteSession(id: phone.sessionID, accountID: phone.accountID))
        #expect(fixture.feed.count == 2, "deleting the row straight in the store woke a waiter")
        fixture.feed.expire(now: .max)
        let phoneAnswer = try await phoneWait
        #expect(phoneAnswer.status == 401, "\(phoneAnswer.status): \(String(decoding: phoneAnswer.body, as: UTF8.self))")
        #expect(phoneAnswer.errorCode == .unauthorized)
        let laptopAnswer = try await laptopWait
        #expect(laptopAnswer.status == 200)
        #expect(try fixture.api.decode(PullResponse.self, laptopAnswer).changes.isEmpty)
        #expect(fixture.feed.count == 0)
    }
}

extension LiveSyncTests {
    /// Issue 28, item 1: on SQLite the daemon hears another process's commits (the operator's commands) on its feed's
    /// sweep. Its own commits do not count; another connection's do, once each; then every waiter is woken to re-check
    /// its session. (The live daemon with the real commands is `OperatorSignOutEndToEndTests`.)
    @Test func anotherProcesssCommitWakesTheWaitersOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-watch-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try SQLiteNoteStore(dataDirectory: directory)
        let feed = ChangeFeed(now: { 0 })
        let watch = ExternalCommitWatch(store: daemon, feed: feed, logger: testLogger)
        let minter = CountingMinter()
        let alice = AccountRecord(id: minter.mint(), username: "alice", passwordHash: "h", createdAt: 1)
        try await daemon.createAccount(alice)
        func session(_ hash: String) -> SessionRecord {
            SessionRecord(id: minter.mint(), accountID: alice.id, tokenHash: hash, deviceName: nil, origin: nil, createdAt: 1)
        }
        func anotherProcess(_ body: (SQLiteNoteStore) async throws -> Void) async throws {
            let store = try SQLiteNoteStore(dataDirectory: directory)
            try await body(store)
            try await store.close()
        }
        let wakes = Mutex<[ChangeFeed.Wake]>([])
        func park() throws -> ChangeFeed.Ticket {
            let ticket = try feed.register(account: alice.id, deadline: 100)
            feed.park(ticket) { wake in wakes.withLock { $0.append(wake) } }
            return ticket
        }
        #expect(await watch.check() == 0)  // nobody waits: nothing is read
        _ = try park()
        #expect(await watch.check() == 1)  // the first read has nothing to compare with: the waiter re-checks
        _ = try park()
        try await daemon.createSession(session("own"))
        #expect(await watch.check() == 0, "the daemon's own commit woke its waiters")

        let phone = session("phone")
        try await daemon.createSession(phone)
        try await anotherProcess { store in
            let deleted = try await store.deleteSession(id: phone.id, accountID: alice.id)
            #expect(deleted)
        }
        #expect(await watch.check() == 1)
        #expect(wakes.withLock { $0 } == [.changed, .changed])
        let waiting = try park()
        #expect(await watch.check() == 0, "one commit woke the waiters twice")

        // A commit while nobody waits is heard by the next waiters, once.
        feed.fire(waiting, .gone)
        try await anotherProcess { try await $0.createSession(session("tablet")) }
        #expect(await watch.check() == 0)
        _ = try park()
        #expect(await watch.check() == 1)
        #expect(await watch.check() == 0)
        #expect(try await SQLiteNoteStore.inMemory().externalCommitVersion() == nil)
        try await daemon.close()
    }
}

/// A store that, once armed, commits one change of an account right after the next pull of that account read its
/// page, straight into the store (no feed signal): a commit landing between a pull and its wait.
final class CommitAfterPullStore: ForwardingNoteStore, Sendable {
    let inner: any NoteStore
    private struct Armed {
        var accountID: FlakeID
        var change: NoteChange
    }
    private let armed = Mutex<Armed?>(nil)
    private let didFire = Mutex(false)

    init(_ inner: any NoteStore) { self.inner = inner }

    func arm(accountID: FlakeID, change: NoteChange) { armed.withLock { $0 = Armed(accountID: accountID, change: change) } }
    var fired: Bool { didFire.withLock { $0 } }

    func pull(accountID: FlakeID, after sequence: Int64, limit: Int, maxBytes: Int) async throws -> PullPage {
        let page = try await inner.pull(accountID: accountID, after: sequence, limit: limit, maxBytes: maxBytes)
        if let armed = armed.withLock({ value -> Armed? in
            defer { value = nil }
            return value?.accountID == accountID ? value : nil
        }) {
            let minter = CountingMinter()
            let context = PushContext(limits: .default, now: testEpoch, pusher: id(77), mintID: { minter.mint() })
            _ = try await inner.push(accountID: armed.accountID, changes: [armed.change], context: context)
            didFire.withLock { $0 = true }
        }
        return page
    }
}
