import Foundation
import Logging
import NoteSyncProtocol
import PostgresNIO
import Testing
import TestSupport

@testable import NoteSyncServer

/// The PostgreSQL server the tests use: `FLAKENOTES_POSTGRES_URL` (scripts/test.sh starts a throwaway cluster and
/// sets it, with `FLAKENOTES_REQUIRE_POSTGRES=1` so that a missing server fails the run instead of skipping).
enum TestPostgres {
    static let url: String? = {
        let value = ProcessInfo.processInfo.environment["FLAKENOTES_POSTGRES_URL"]
        return value?.isEmpty == false ? value : nil
    }()
    static let required = ProcessInfo.processInfo.environment["FLAKENOTES_REQUIRE_POSTGRES"] == "1"
    static var isAvailable: Bool { url != nil }

    static let logger = Logger(label: "postgres-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The URL with `search_path` set to `schema`.
    static func url(schema: String) throws -> String {
        let base = try #require(url, "FLAKENOTES_POSTGRES_URL is not set")
        return base + (base.contains("?") ? "&" : "?") + "search_path=\(schema)"
    }

    /// Creates a new, empty schema and returns its name: each store (or group of "daemons") gets its own.
    static func freshSchema() async throws -> String {
        let name = "t_" + String(UInt64.random(in: .min ... .max), radix: 16)
        let client = PostgresClient(
            configuration: try PostgresDatabase.configuration(url: try #require(url, "FLAKENOTES_POSTGRES_URL is not set")),
            backgroundLogger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            try await client.execute(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(name)"), logger: logger)
            group.cancelAll()
        }
        return name
    }

    /// A migrated store on `schema` (a fresh one when nil) that runs its own pool.
    static func store(schema: String? = nil) async throws -> PostgresNoteStore {
        let schema = if let schema { schema } else { try await freshSchema() }
        return try await PostgresNoteStore.connect(
            PostgresDatabase.configuration(url: url(schema: schema), maximumConnections: 8), logger: logger
        )
    }

    /// Creates a new database and returns its URL, for tests that run real daemons.
    static func freshDatabaseURL() async throws -> String {
        let base = try #require(url, "FLAKENOTES_POSTGRES_URL is not set")
        let name = "fn_" + String(UInt64.random(in: .min ... .max), radix: 16)
        let client = PostgresClient(configuration: try PostgresDatabase.configuration(url: base), backgroundLogger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            try await client.execute(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            group.cancelAll()
        }
        var components = try #require(URLComponents(string: base))
        components.path = "/\(name)"
        return try #require(components.string)
    }
}
