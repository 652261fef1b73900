import Foundation
import MiniFlake
import NoteSyncProtocol
import PostgresNIO
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// The PostgreSQL store against a real server (`FLAKENOTES_POSTGRES_URL`): the shared conformance suite, and what
/// only several daemons sharing one database can break (migrations at once, one account pushed through two pools,
/// leased instance numbers). Each test works in its own fresh schema.
@Suite("PostgreSQL store", .enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
struct PostgresNoteStoreTests {
    /// Each conformance check on a fresh PostgreSQL store.
    @Test(arguments: NoteStoreConformance.checks.map(\.name))
    func conformance(_ check: String) async throws {
        let store = try await TestPostgres.store()
        let body = try #require(NoteStoreConformance.checks.first { $0.name == check }).body
        try await body(store)
        try? await store.close()
    }

    @Test func concurrentMigrationsAgree() async throws {
        let schema = try await TestPostgres.freshSchema()
        let stores = try await withThrowingTaskGroup(of: PostgresNoteStore.self) { group in
            for _ in 0..<4 { group.addTask { try await TestPostgres.store(schema: schema) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(stores.count == 4)
        for store in stores {
            #expect(try await store.database.appliedSchemaVersion() == PostgresDatabase.schemaVersion)
            try await store.close()
        }
    }

    @Test func refusesASchemaFromANewerRelease() async throws {
        let schema = try await TestPostgres.freshSchema()
        let store = try await TestPostgres.store(schema: schema)
        try await store.database.client.execute("INSERT INTO notesyncd_migrations (version) VALUES (999)", logger: TestPostgres.logger)
        await #expect(throws: ConfigurationError.self) { try await store.database.migrate() }
        try await store.close()
        await #expect(throws: ConfigurationError.self) { _ = try await TestPostgres.store(schema: schema) }
    }

    /// Two daemons (two pools on one schema) receive the same notes for one account at once: one note per client
    /// ID, whatever the interleaving, whether the pushes carry the same edit IDs (a retry landing on the other
    /// daemon) or new ones (the device re-pushing after signing in again).
    @Test(arguments: [true, false])
    func samePushThroughTwoDaemonsMakesNoDuplicate(sameEditIDs: Bool) async throws {
        let schema = try await TestPostgres.freshSchema()
        let a = try await TestPostgres.store(schema: schema)
        let b = try await TestPostgres.store(schema: schema)
        let alice = try await NoteStoreConformance.makeAccount(a, "alice")
        let count = 200
        func batch(_ editBase: Int64) -> [NoteChange] {
            (1...count).map { change(Int64($0), edit: editBase + Int64($0), text: "note \($0)\n", baseText: "note \($0)\n") }
        }
        for round in 0..<5 {
            let editBase = Int64(round * 10_000)
            async let first = a.push(accountID: alice, changes: batch(editBase), context: NoteStoreConformance.context())
            async let second = b.push(
                accountID: alice, changes: batch(sameEditIDs ? editBase : editBase + 5_000), context: NoteStoreConformance.context()
            )
            let (x, y) = try await (first, second)
            // Both answers name the same server note for each client ID.
            #expect(x.map(\.serverID) == y.map(\.serverID))
            #expect(x.allSatisfy { $0.status == .created || $0.status == .reconciled })
            if sameEditIDs && round == 0 {
                // Exactly one of the two applied the batch; the other replayed it.
                #expect(x.allSatisfy(\.replayed) != y.allSatisfy(\.replayed))
            }
            let all = try await NoteStoreConformance.everything(b, alice)
            #expect(all.count == count)
            #expect(Set(all.map(\.clientID)).count == count)
        }
        try await a.close()
        try await b.close()
    }

    /// Issue 15, item 7: two daemons on one database share the sign-in throttle. Failed before: each daemon counted
    /// in memory, so five failures spread over two daemons locked out neither.
    @Test func twoDaemonsShareOneSignInThrottle() async throws {
        let schema = try await TestPostgres.freshSchema()
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        var daemons: [ServerServices] = []
        var stores: [PostgresNoteStore] = []
        for instance in 0..<2 {
            let store = try await TestPostgres.store(schema: schema)
            stores.append(store)
            let generator = try FlakeGenerator(instance: instance, clock: clock)
            daemons.append(
                ServerServices(
                    ServiceContext(store: store, clock: clock, mintID: { try generator.next() }, logger: testLogger),
                    configuration: ServiceConfiguration(passwords: .bcrypt(cost: 4), throttle: PostgresSignInThrottle(database: store.database))))
        }
        _ = try await daemons[0].accounts.signUp(SignUpRequest(username: "alice", password: "correct horse"))
        let wrong = SignInRequest(username: "alice", password: "wrong password")
        for attempt in 0..<5 {
            await #expect(throws: SyncError.self) { _ = try await daemons[attempt % 2].sessions.signIn(wrong) }
        }
        for daemon in daemons {
            do {
                _ = try await daemon.sessions.signIn(SignInRequest(username: "alice", password: "correct horse"))
                Issue.record("the sixth attempt must be refused on every daemon")
            } catch let error as SyncError {
                #expect(error.code == .tooManyAttempts)
                #expect(Int(error.extraHeaders[SyncError.retryAfterHeader] ?? "") == 900)
            }
        }
        // Fifteen minutes later the failures have aged out everywhere, and a success clears them.
        clock.advance(milliseconds: 15 * 60 * 1000 + 1)
        _ = try await daemons[1].sessions.signIn(SignInRequest(username: "alice", password: "correct horse"))
        for attempt in 0..<4 {
            await #expect(throws: SyncError.self) { _ = try await daemons[attempt % 2].sessions.signIn(wrong) }
        }
        _ = try await daemons[0].sessions.signIn(SignInRequest(username: "alice", password: "correct horse"))
        // Another username is counted apart.
        _ = try await daemons[0].accounts.signUp(SignUpRequest(username: "bob", password: "correct horse"))
        _ = try await daemons[1].sessions.signIn(SignInRequest(username: "bob", password: "correct horse"))
        for store in stores { try await store.close() }
    }

    /// The shared throttle keeps an address's failures through a success that keeps them (an invite sign-up), and
    /// does not count that success.
    @Test func theSharedThrottleKeepsFailuresThroughAnInviteSuccess() async throws {
        let store = try await TestPostgres.store()
        let throttle = PostgresSignInThrottle(database: store.database, maxFailures: 3, windowMilliseconds: 60_000)
        for time in [0, 1] as [Int64] {
            #expect(try await throttle.begin(username: "invite@a", now: time) == nil)
            try await throttle.finish(username: "invite@a", outcome: .failure, now: time)
        }
        #expect(try await throttle.begin(username: "invite@a", now: 2) == nil)
        try await throttle.finish(username: "invite@a", outcome: .successKeepingFailures, now: 2)
        #expect(try await throttle.begin(username: "invite@a", now: 3) == nil)
        try await throttle.finish(username: "invite@a", outcome: .failure, now: 3)
        #expect(try await throttle.begin(username: "invite@a", now: 4) == 60)
        try await store.close()
    }

    /// Pushes through two daemons while a reader follows the change cursor: the reader never skips a change (a
    /// change committed later never carries a smaller number than one the reader already passed), and its cursor
    /// never moves back.
    @Test func changeSequenceIsMonotonicInCommitOrderAcrossDaemons() async throws {
        let schema = try await TestPostgres.freshSchema()
        let stores = [try await TestPostgres.store(schema: schema), try await TestPostgres.store(schema: schema)]
        let alice = try await NoteStoreConformance.makeAccount(stores[0], "alice")
        let writers = 4
        let batches = 15
        let done = Locked(0)
        let seen = try await withThrowingTaskGroup(of: [FlakeID: Int64].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    defer { done.withLock { $0 += 1 } }
                    for batch in 0..<batches {
                        let base = Int64(writer * 1_000_000 + batch * 100)
                        let changes = (1...5).map { change(base + Int64($0), edit: base + Int64($0), text: "w\(writer) b\(batch) n\($0)\n") }
                        _ = try await stores[writer % 2].push(accountID: alice, changes: changes, context: NoteStoreConformance.context())
                    }
                    return [:]
                }
            }
            group.addTask {
                // The reader: pull pages of 3 from its cursor until the writers are done and it has caught up.
                var cursor: Int64 = 0
                var seen: [FlakeID: Int64] = [:]
                var reader = 0
                while true {
                    let finished = done.withLock { $0 } == writers
                    let page = try await stores[reader % 2].pull(accountID: alice, after: cursor, limit: 3)
                    reader += 1
                    for note in page.notes {
                        #expect(note.changeSeq > cursor)
                        cursor = note.changeSeq
                        seen[note.serverID] = note.changeSeq
                    }
                    if finished && page.notes.isEmpty && cursor == page.currentSequence { return seen }
                    if page.notes.isEmpty { await Task.yield() }
                }
            }
            return try await group.reduce(into: [:]) { $0.merge($1) { a, _ in a } }
        }
        let all = try await NoteStoreConformance.everything(stores[0], alice)
        #expect(all.count == writers * batches * 5)
        #expect(Set(seen.keys) == Set(all.map(\.serverID)), "the reader skipped a change")
        #expect(all.map(\.changeSeq) == Array(1...Int64(all.count)), "no gaps when every push commits")
        for store in stores { try await store.close() }
    }

    // MARK: - Instance leases

    @Test func leasesHandOutDistinctNumbersAndReleaseFreesThem() async throws {
        let store = try await TestPostgres.store()
        let leases = (0..<3).map { _ in InstanceLease(database: store.database, ttl: .seconds(30), logger: TestPostgres.logger) }
        var numbers: [Int] = []
        for lease in leases { numbers.append(try await lease.acquire()) }
        #expect(numbers == [0, 1, 2])
        // IDs minted under each lease carry its number.
        for (lease, number) in zip(leases, numbers) { #expect(try lease.next().instance == number) }
        await leases[1].release()
        await leases[1].release()  // twice is fine
        #expect(leases[1].instance == nil)
        #expect(throws: NoteStoreError.self) { try leases[1].next() }
        let next = InstanceLease(database: store.database, ttl: .seconds(30), logger: TestPostgres.logger)
        #expect(try await next.acquire() == 1)
        try await store.close()
    }

    @Test func acquireAtOnceNeverSharesANumber() async throws {
        let store = try await TestPostgres.store()
        let numbers = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try await InstanceLease(database: store.database, ttl: .seconds(30), logger: TestPostgres.logger).acquire() }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(numbers).count == 8)
        try await store.close()
    }

    /// A holder that stops renewing (a crashed daemon) keeps its number until the lease expires; it stops minting
    /// before then, another daemon takes the number after, and the old holder, back again, leases a new one.
    @Test func anUnrenewedLeaseExpiresFencedAndIsTakenOver() async throws {
        let store = try await TestPostgres.store()
        // Five seconds: long enough that a loaded machine still mints before the fence (two were not, at a load
        // average of 13 on 2 cores), short enough to wait out.
        let crashed = InstanceLease(database: store.database, ttl: .seconds(5), logger: TestPostgres.logger)
        #expect(try await crashed.acquire() == 0)
        let minted = try crashed.next()
        let other = InstanceLease(database: store.database, ttl: .seconds(30), logger: TestPostgres.logger)
        #expect(try await other.acquire() == 1, "a live lease is not taken")
        await other.release()

        // Wait (bounded) until the number is free again: a new lease gets 0.
        let deadline = ContinuousClock.now + .seconds(20)
        var taken: Int?
        while ContinuousClock.now < deadline {
            let candidate = InstanceLease(database: store.database, ttl: .seconds(30), logger: TestPostgres.logger)
            let number = try await candidate.acquire()
            if number == 0 {
                taken = number
                // The new holder never repeats an ID stored under the number; here: it mints above the old one.
                #expect(try candidate.next() > minted)
                break
            }
            await candidate.release()
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(taken == 0, "the expired lease was never taken over")
        #expect(throws: NoteStoreError.self, "the old holder stopped minting") { try crashed.next() }
        // The old holder renews, finds its number taken, and leases another.
        try await crashed.renew()
        let renewedNumber = try #require(crashed.instance)
        #expect(renewedNumber != 0)
        #expect(try crashed.next().instance == renewedNumber)
        try await store.close()
    }

    @Test func renewalKeepsTheNumber() async throws {
        let store = try await TestPostgres.store()
        // A lease of 6 s renewed every 2.4 s: 3.6 s of slack for a renewal on a loaded machine (with 2 s and 0.8 s, a
        // renewal delayed 1.2 s by a CI run beside three builds let the lease expire).
        let lease = InstanceLease(database: store.database, ttl: .seconds(6), logger: TestPostgres.logger)
        let number = try await lease.acquire()
        // Renewed three times over longer than the lease itself lasts.
        for _ in 0..<3 {
            try await Task.sleep(for: .milliseconds(2400))
            try await lease.renew()
        }
        #expect(lease.instance == number)
        #expect(try lease.next().instance == number)
        try await store.close()
    }
}

/// PostgreSQL must not be skipped where the run asked for it (CI sets `FLAKENOTES_REQUIRE_POSTGRES=1`).
@Test func postgresIsConfiguredWhereRequired() {
    if TestPostgres.required {
        #expect(TestPostgres.isAvailable, "FLAKENOTES_REQUIRE_POSTGRES=1 but FLAKENOTES_POSTGRES_URL is not set")
    }
}

@Suite struct PostgresConfigurationTests {
    @Test func parsesURLs() throws {
        let full = try PostgresDatabase.configuration(url: "postgresql://us%40er:p%3Ass@db.example:6543/notes?sslmode=disable&search_path=s1")
        #expect(full.host == "db.example")
        #expect(full.port == 6543)
        #expect(full.username == "us@er")
        #expect(full.password == "p:ss")
        #expect(full.database == "notes")
        #expect(full.options.additionalStartupParameters.contains { $0 == ("search_path", "s1") })
        let bare = try PostgresDatabase.configuration(url: "postgres://me@localhost")
        #expect(bare.port == 5432)
        #expect(bare.database == nil)
        #expect(bare.password == nil)
    }

    @Test(arguments: [
        "mysql://me@host/db", "postgres://host/db", "postgres://me@/db", "postgres://me@host/db?sslmode=sometimes",
        "postgres://me@host/db?frobnicate=1", "postgres://me@host:0/db",
    ])
    func rejectsBadURLs(_ url: String) {
        #expect(throws: ConfigurationError.self) { try PostgresDatabase.configuration(url: url) }
    }

    @Test func errorsNeverShowThePassword() {
        do {
            _ = try PostgresDatabase.configuration(url: "postgres://me:hunter2@/db")
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains("hunter2"))
        }
    }
}
