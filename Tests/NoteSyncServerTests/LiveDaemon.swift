import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NoteSyncProtocol
import ServiceLifecycle
import Testing
import TestSupport

@testable import NoteSyncServer

/// The daemon's application (``buildApplication(configuration:logger:changeFeed:onListening:)``) on a fresh data
/// directory and a free loopback port: the one launcher of the server tests that need a real socket. (The tests that
/// start the real binary use `TestSupport`'s `DaemonProcess`.)
enum LiveDaemon {
    /// A fresh data directory and the configuration the tests start from (port 0, bcrypt cost 4, errors only, open
    /// sign-up), changed by `configure`; the directory is removed once `body` returns.
    static func withConfiguration<T>(
        _ configure: (inout ServerConfiguration) -> Void, _ body: (ServerConfiguration) async throws -> T
    ) async throws -> T {
        try await withTemporaryDirectory("notesyncd-live") { directory in
            var configuration = ServerConfiguration(dataDirectory: directory.path, port: 0, bcryptCost: 4, logLevel: .error)
            configuration.signUp = .open
            configure(&configuration)
            return try await body(configuration)
        }
    }

    /// The configuration the tests start from (as ``withConfiguration(_:_:)``'s) on a fresh schema of the test
    /// PostgreSQL server (`FLAKENOTES_POSTGRES_URL`) instead of a data directory.
    static func postgresConfiguration() async throws -> ServerConfiguration {
        let url = try TestPostgres.url(schema: try await TestPostgres.freshSchema())
        var configuration = ServerConfiguration(port: 0, bcryptCost: 4, logLevel: .error, database: .postgres(url: url))
        // Started beside the whole suite's other PostgreSQL tests: 30 s was missed once on two loaded cores.
        configuration.postgresStartupDeadline = .seconds(300)
        configuration.signUp = .open
        return configuration
    }

    /// Runs the application as `notesyncd` does (its whole service group, on the configured listeners) in a service
    /// group of the test's own. `body` gets the port of the listening line and the group (to trigger a graceful
    /// shutdown); afterwards the daemon is shut down gracefully and waited for.
    ///
    /// - Parameter feed: The feed of waiting pulls (a test observes it); nil for the daemon's own.
    static func run(
        feed: ChangeFeed? = nil, _ configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (_ port: Int, _ group: ServiceGroup) async throws -> Void
    ) async throws {
        try await withConfiguration(configure) { configuration in
            try await serve(configuration, feed: feed, body)
        }
    }

    /// Runs the application on a real socket (a free loopback port) with the test's configuration, its connection cap
    /// included; `body` gets the port and a typed client over HTTP.
    static func test(
        _ configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: @Sendable (_ port: Int, _ api: APIClient) async throws -> Void
    ) async throws {
        try await withConfiguration(configure) { configuration in
            try await serve(configuration) { port, _ in
                try await withHTTPClient(port: port) { api in try await body(port, api) }
            }
        }
    }

    /// Runs the application built from `configuration` in a service group of the test's own until `body` returns,
    /// then shuts it down gracefully and waits for it.
    ///
    /// A daemon that stops before it listens (a PostgreSQL start past its deadline on a loaded machine, say) fails the
    /// test with its error. (HummingbirdTesting's `.live` waited forever for the port of such an application, and
    /// so did this launcher's first version for its listening line: each hung a whole CI run.)
    static func serve(
        _ configuration: ServerConfiguration, feed: ChangeFeed? = nil,
        _ body: @Sendable (_ port: Int, _ group: ServiceGroup) async throws -> Void
    ) async throws {
        let (lines, listening) = AsyncStream.makeStream(of: String.self)
        let app = try await buildApplication(
            configuration: configuration, logger: testLogger, changeFeed: feed, onListening: { listening.yield($0) })
        let group = ServiceGroup(configuration: .init(services: [app], logger: testLogger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                // However the daemon ends, the wait for its listening line below ends too.
                defer { listening.finish() }
                try await group.run()
            }
            var iterator = lines.makeAsyncIterator()
            guard let line = await iterator.next() else {
                try await tasks.waitForAll()  // the daemon's own error, when it failed
                throw LiveDaemonError("the daemon stopped before it listened")
            }
            guard let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
                await group.triggerGracefulShutdown()
                throw LiveDaemonError("no port in the listening line \(line)")
            }
            do {
                try await body(port, group)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// A typed client over HTTP to the loopback `port` (one kept-alive connection) for the duration of `body`. A
    /// request waits a minute for its answer (`.live` gave 20 s, which a daemon on a machine running the whole
    /// suite missed).
    static func withHTTPClient<T: Sendable>(port: Int, _ body: (APIClient) async throws -> T) async throws -> T {
        let client = TestClient(host: "localhost", port: port, configuration: .init(timeout: .seconds(60)))
        client.connect()
        do {
            let value = try await body(APIClient(live: client))
            try await client.shutdown()
            return value
        } catch {
            try? await client.shutdown()
            throw error
        }
    }
}

/// A live daemon that did not start or answer as a test expected.
struct LiveDaemonError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
