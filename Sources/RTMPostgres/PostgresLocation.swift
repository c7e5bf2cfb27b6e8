import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// Where the cluster's database is: parsed from a libpq-style URL,
/// `postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require]`.
public struct PostgresLocation: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    /// libpq's `sslmode`: `disable`, `prefer` (the default: TLS when the server offers it) or `require`.
    public var sslMode: String

    /// Parses `url`; throws a `PostgresLocationError` naming what is wrong with it (never the URL
    /// itself, which may hold a password).
    public init(url: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme,
              scheme == "postgres" || scheme == "postgresql" else {
            throw PostgresLocationError("not a postgres:// URL")
        }
        guard let host = components.host, !host.isEmpty else { throw PostgresLocationError("the URL names no host") }
        guard let user = components.user, !user.isEmpty else { throw PostgresLocationError("the URL names no user") }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user
        self.password = components.password
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = path.isEmpty ? user : path
        self.sslMode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        guard ["disable", "prefer", "require"].contains(sslMode) else {
            throw PostgresLocationError("sslmode must be disable, prefer or require, not \(sslMode)")
        }
    }

    /// The client configuration for a pool of at most `connections` connections.
    public func clientConfiguration(connections: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch sslMode {
        case "disable": tls = .disable
        case "require": tls = .require(.makeClientConfiguration())
        default: tls = .prefer(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(host: host, port: port, username: username, password: password,
                                                         database: database, tls: tls)
        configuration.options.maximumConnections = connections
        configuration.options.minimumConnections = 1
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// The configuration of a single, dedicated connection (the follower's `LISTEN`).
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch sslMode {
        case "disable": tls = .disable
        case "require": tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        default: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(host: host, port: port, username: username, password: password,
                                                             database: database, tls: tls)
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// The URL without its password (for logs).
    public var redacted: String { "postgres://\(username)@\(host):\(port)/\(database)" }
}

/// A `--postgres` URL that cannot be used.
public struct PostgresLocationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
