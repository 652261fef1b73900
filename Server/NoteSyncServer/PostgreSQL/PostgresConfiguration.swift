import Foundation
import PostgresNIO

extension PostgresDatabase {
    /// A pool configuration from a `postgres://` or `postgresql://` URL:
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require&search_path=SCHEMA]`.
    ///
    /// `sslmode` defaults to `prefer` (TLS when the server offers it); `require` uses TLS with certificate checks.
    /// `search_path` selects a schema (tests use one schema per store). User and password may be percent-encoded.
    ///
    /// - Throws: ``ConfigurationError`` naming what is wrong (the password is never shown).
    public static func configuration(url: String, maximumConnections: Int = 20) throws(ConfigurationError) -> PostgresClient.Configuration {
        let shown = ServerConfiguration.Database.redacted(url)
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql"
        else { throw ConfigurationError("'\(shown)' is not a postgres:// URL") }
        guard let host = components.host, !host.isEmpty else {
            throw ConfigurationError("the PostgreSQL URL '\(shown)' names no host")
        }
        guard let user = components.user?.removingPercentEncoding, !user.isEmpty else {
            throw ConfigurationError("the PostgreSQL URL '\(shown)' names no user")
        }
        let password = components.password?.removingPercentEncoding
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw ConfigurationError("the PostgreSQL URL '\(shown)' has a bad port") }

        var tls = PostgresClient.Configuration.TLS.prefer(.makeClientConfiguration())
        var searchPath: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                switch item.value ?? "" {
                case "disable": tls = .disable
                case "prefer", "allow": tls = .prefer(.makeClientConfiguration())
                case "require", "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
                default: throw ConfigurationError("sslmode must be disable, prefer or require, got '\(item.value ?? "")'")
                }
            case "search_path":
                guard let value = item.value, !value.isEmpty else { throw ConfigurationError("search_path is empty") }
                searchPath = value
            case "application_name", "connect_timeout":
                continue
            default:
                throw ConfigurationError("unknown PostgreSQL URL parameter '\(item.name)' (known: sslmode, search_path)")
            }
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database.isEmpty ? nil : database, tls: tls
        )
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(10)
        var parameters = [("application_name", "notesyncd")]
        if let searchPath { parameters.append(("search_path", searchPath)) }
        configuration.options.additionalStartupParameters = parameters
        return configuration
    }
}
