import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
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
            let (lines, listening) = AsyncStream.makeStream(of: String.self)
            let app = try await buildApplication(
                configuration: configuration, logger: testLogger, changeFeed: feed, onListening: { listening.yield($0) })
            let group = ServiceGroup(configuration: .init(services: [app], logger: testLogger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                var iterator = lines.makeAsyncIterator()
                let line = try #require(await iterator.next(), "the daemon did not start")
                let port = try #require(line.split(separator: ":").last.flatMap { Int($0) }, "\(line)")
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
    }

    /// Runs the application through HummingbirdTesting's `.live` (a real socket on a free port); `body` gets the port
    /// and a typed client. `.live` rebuilds the server's configuration from its address alone, dropping the connection
    /// cap: test that with ``run(feed:_:_:)``.
    static func test(
        _ configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: @Sendable (_ port: Int, _ api: APIClient) async throws -> Void
    ) async throws {
        try await withConfiguration(configure) { configuration in
            let app = try await buildApplication(configuration: configuration, logger: testLogger, onListening: { _ in })
            try await app.test(.live) { client in
                let port = try #require(client.port)
                try await body(port, APIClient(http: client))
            }
        }
    }
}
