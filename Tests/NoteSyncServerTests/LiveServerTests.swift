import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// The daemon's application over a real loopback socket (HummingbirdTesting `.live`).
@Suite("Live server")
struct LiveServerTests {
    static func temporaryDirectory() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-live-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    @Test func signOutSignInReconcilesAndAccountsStayApart() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ServerConfiguration(dataDirectory: directory, port: 0, bcryptCost: 4, logLevel: .error)
        configuration.signUp = .open
        try await LiveDaemon.serve(configuration) { port, _ in try await LiveDaemon.withHTTPClient(port: port) { api in
            let origin = id(4242)
            try await api.signUp("alice")
            let first = try await api.signIn("alice", device: "laptop", origin: origin)

            // Push, then pull.
            let texts = (1...20).map { "note \($0)\nsecond line\n" }
            let created = try await api.push(first.token, texts.enumerated().map {
                change(Int64(100 + $0.offset), origin: origin.rawValue, edit: Int64(1000 + $0.offset), text: $0.element)
            })
            #expect(created.allSatisfy { $0.status == .created })
            let pulled = try await api.pullAll(first.token, pageSize: 7)
            #expect(pulled.map(\.text) == texts)
            #expect(pulled.map(\.serverID) == created.map(\.serverID!))

            // Sign out: the token is dead.
            #expect(try await api.call(.signOut, token: first.token).status == 204)
            let dead = try await api.call(.pull, token: first.token)
            #expect(dead.status == 401)
            #expect(dead.errorCode == .unauthorized)

            // Sign in again: same account; re-push every note by client ID with base text = last synced text.
            let second = try await api.signIn("alice", device: "laptop", origin: origin)
            #expect(second.accountID == first.accountID)
            #expect(second.token != first.token)
            let rePush = pulled.enumerated().map { index, note in
                change(note.clientID.rawValue, origin: note.origin.rawValue, edit: Int64(5000 + index), text: note.text, baseText: note.text)
            }
            let reconciled = try await api.push(second.token, rePush)
            #expect(reconciled.allSatisfy { $0.status == .reconciled })
            #expect(reconciled.map(\.serverID) == created.map(\.serverID))
            let afterReconcile = try await api.pullAll(second.token)
            #expect(afterReconcile.count == texts.count)
            #expect(byServerID(afterReconcile) == byServerID(pulled))

            // A second account: the same re-push creates its own notes; the first account is untouched.
            try await api.signUp("bob")
            let bob = try await api.signIn("bob", origin: origin)
            let bobsResults = try await api.push(bob.token, rePush.enumerated().map { index, change in
                var change = change
                change.editID = id(Int64(9000 + index))
                return change
            })
            #expect(bobsResults.allSatisfy { $0.status == .created })
            #expect(Set(bobsResults.compactMap(\.serverID)).isDisjoint(with: created.compactMap(\.serverID)))
            #expect(try await api.pullAll(bob.token).map(\.text) == texts)
            #expect(byServerID(try await api.pullAll(second.token)) == byServerID(pulled))

            // Requests carry a request id.
            let health = try await api.call(.health)
            #expect(health.headers["x-request-id"]?.isEmpty == false)
        } }
    }

    /// A daemon that stops before it listens (here its metrics port is taken) fails the test with its error. The
    /// tests' launcher waited forever for such a daemon's listening line (and HummingbirdTesting's `.live` for its
    /// port), which hung whole CI runs when a loaded machine made a PostgreSQL start miss its deadline.
    @Test func aDaemonThatStopsBeforeListeningFailsItsTestRatherThanHangingIt() async throws {
        try await LiveDaemon.run { port, _ in
            await #expect(throws: ListenerError.self) {
                try await LiveDaemon.run({ $0.metricsAddress = MetricsAddress(host: "127.0.0.1", port: port) }) { _, _ in
                    Issue.record("a daemon listened with its metrics port taken")
                }
            }
        }
    }

    @Test func generatorStartsAfterTheLargestStoredID() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // An ID from a day in the future, as if the clock had been set back since it was minted.
        let future = try FlakeID(
            milliseconds: SystemFlakeClock.precise.unixMilliseconds() - FlakeID.epochUnixMilliseconds + 86_400_000, sequence: 5,
            instance: 0
        )
        let store = try SQLiteNoteStore(dataDirectory: directory)
        try await store.createAccount(AccountRecord(id: future, username: "old", passwordHash: "x", createdAt: 0))
        try await store.close()

        var configuration = ServerConfiguration(dataDirectory: directory, port: 0, bcryptCost: 4, logLevel: .error)
        configuration.signUp = .open
        let app = try await buildApplication(configuration: configuration, logger: testLogger, onListening: { _ in })
        try await app.test(.router) { client in
            let account = try await APIClient(http: client).signUp("new")
            #expect(account.accountID > future)
        }
    }

    @Test func postgresURLIsShownWithoutItsPassword() {
        let configuration = ServerConfiguration(database: .postgres(url: "postgres://u:secret@db/notes"))
        #expect(configuration.database.description == "postgres://u:***@db/notes")
    }
}
