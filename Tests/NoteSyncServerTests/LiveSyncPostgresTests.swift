import Foundation
import MiniFlake
import NoteSyncProtocol
import PostgresNIO
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// Issue 19 on PostgreSQL: two "daemons" (each its own pool, feed and `LISTEN` connection) on one database. A push
/// through one wakes a pull waiting on the other only through `NOTIFY` (its own feed is never signalled directly),
/// and the listener comes back after its connection is killed.
@Suite("Live sync: PostgreSQL across daemons", .enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
struct LiveSyncPostgresTests {
    /// One daemon's parts: its store, feed, listener task and in-process server.
    final class Daemon: Sendable {
        let store: PostgresNoteStore
        let feed: ChangeFeed
        let server: InProcessServer
        let registrations: AsyncStream<FlakeID>
        /// Each backend process ID the listener reported when `LISTEN` took effect.
        let listening: AsyncStream<Int32>
        let service: Task<Void, any Error>

        init(schema: String, instance: Int) async throws {
            store = try await TestPostgres.store(schema: schema)
            let (registrations, registered) = AsyncStream.makeStream(of: FlakeID.self)
            let (listening, listened) = AsyncStream.makeStream(of: Int32.self)
            feed = ChangeFeed(onRegister: { registered.yield($0) })
            server = try InProcessServer(store: store, instance: instance, tokenSeed: UInt64(instance), changeFeed: feed)
            self.registrations = registrations
            self.listening = listening
            let listener = PostgresChangeListener(
                database: store.database, feed: feed, logger: TestPostgres.logger, onListening: { listened.yield($0) }
            )
            let feedService = ChangeFeedService(feed: feed, listener: listener, logger: TestPostgres.logger)
            service = Task { try await feedService.run() }
        }

        var api: APIClient { APIClient(api: server.api) }

        func stop() async {
            service.cancel()
            _ = try? await service.value
            try? await store.close()
        }
    }

    @Test func aPushOnOneDaemonWakesAPullWaitingOnTheOtherAndTheListenerReconnects() async throws {
        let schema = try await TestPostgres.freshSchema()
        let a = try await Daemon(schema: schema, instance: 11)
        let b = try await Daemon(schema: schema, instance: 12)
        var listeningB = b.listening.makeAsyncIterator()
        let firstBackend = try #require(await listeningB.next())

        let alice = try await a.api.account("alice")
        let onB = try await b.api.signIn("alice")
        var registeredB = b.registrations.makeAsyncIterator()

        // 1. Waiting on B, pushed through A.
        async let first = b.api.pull(onB.token, wait: 30)
        #expect(await registeredB.next() == alice.accountID)
        _ = try await a.api.push(alice.token, [change(1, edit: 10, text: "from A")])
        let page = try await first
        #expect(page.changes.map(\.text) == ["from A"])

        // 2. B's LISTEN connection is killed: it reconnects (a new backend) and wake-ups go on.
        try await a.store.database.client.execute(
            PostgresQuery(unsafeSQL: "SELECT pg_terminate_backend(\(firstBackend))"), logger: TestPostgres.logger
        )
        let secondBackend = try #require(await listeningB.next())
        #expect(secondBackend != firstBackend)
        async let second = b.api.pull(onB.token, since: page.cursor, wait: 30)
        #expect(await registeredB.next() == alice.accountID)
        _ = try await a.api.push(alice.token, [change(2, edit: 20, text: "after the reconnection")])
        #expect(try await second.changes.map(\.text) == ["after the reconnection"])

        // 3. Another account's commit does not wake alice's waiter on B.
        let bob = try await a.api.account("bob")
        let cursor = try await b.api.pull(onB.token, since: page.cursor).cursor
        async let third = b.api.pull(onB.token, since: cursor, wait: 30)
        #expect(await registeredB.next() == alice.accountID)
        _ = try await a.api.push(bob.token, [change(3, edit: 30, text: "bob's")])
        // Bob's commit may reach B's listener, but it signals bob's account only; alice's waiter answers with her
        // own next change, never early with an empty page.
        _ = try await a.api.push(alice.token, [change(4, edit: 40, text: "alice again")])
        #expect(try await third.changes.map(\.text) == ["alice again"])

        await a.stop()
        await b.stop()
    }

    /// A device waiting on daemon B is signed out through daemon A, and another by the operator's store call alone
    /// (as `notesyncd sessions revoke` and `users disable` do, from their own process: no feed is signalled): both
    /// learn it at once through the store's NOTIFY (401 before their 55 s wait ends; the test never expires a feed).
    @Test(.timeLimit(.minutes(1))) func aDeviceSignedOutOnOneDaemonOrByTheOperatorStopsWaitingOnTheOther() async throws {
        let schema = try await TestPostgres.freshSchema()
        let a = try await Daemon(schema: schema, instance: 13)
        let b = try await Daemon(schema: schema, instance: 14)
        var listeningB = b.listening.makeAsyncIterator()
        _ = try #require(await listeningB.next())

        let laptop = try await a.api.account("alice")
        let phone = try await b.api.signIn("alice", device: "phone")
        let tablet = try await b.api.signIn("alice", device: "tablet")
        var registeredB = b.registrations.makeAsyncIterator()

        async let phoneWait = b.api.call(.pull, token: phone.token, query: [(PullQuery.wait, "55")])
        #expect(await registeredB.next() == laptop.accountID)
        let revoked = try await a.api.call(.revokeSession, token: laptop.token, json: RevokeSessionRequest(sessionID: phone.sessionID))
        #expect(revoked.status == 204)
        #expect(try await phoneWait.status == 401)

        async let tabletWait = b.api.call(.pull, token: tablet.token, query: [(PullQuery.wait, "55")])
        #expect(await registeredB.next() == laptop.accountID)
        #expect(try await a.store.setDisabled(accountID: laptop.accountID, disabledAt: 1))
        #expect(try await tabletWait.status == 401)
        #expect(b.feed.count == 0)

        await a.stop()
        await b.stop()
    }
}
