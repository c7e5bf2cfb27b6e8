import Foundation
import Logging
import NIOPosix
import PostgresNIO
import RTMPostgres
import RTMTestSupport
import Testing

/// One throwaway PostgreSQL for a whole contract suite (`.contractDatabase`): started before
/// the suite's first case, destroyed after its last. Cases share it and keep apart by an
/// application (and node) name of their own (`withCase`).
struct ContractDatabase: Sendable {
    @TaskLocal static var current: ContractDatabase?

    let server: PostgresTestServer
    let location: PostgresLocation
    static let logger = Logger(label: "test.postgres.contract")

    /// Opens a store on the suite's database for one case, under a name no other case uses
    /// (the case's application id and node name), runs `body` with it and stops it.
    static func withCase<Store: Sendable>(open: (ContractDatabase, String) async throws -> Store, stop: (Store) async -> Void,
                                          _ body: (Store, ContractDatabase, String) async throws -> Void) async throws {
        let database = try #require(current, "the suite needs the .contractDatabase trait")
        let name = "c" + UUID().uuidString.prefix(8).lowercased()
        let store = try await open(database, name)
        do {
            try await body(store, database, name)
        } catch {
            await stop(store)
            throw error
        }
        await stop(store)
    }
}

/// Gives a suite one `ContractDatabase` for all its cases.
struct ContractDatabaseTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let server = try await PostgresTestServer.start()
        defer { server.destroy() }
        // Text sorted as a production database sorts it (a language's order, by ICU), not byte
        // by byte as the test server's C locale does: an order the store leaves to the database
        // would differ from the single node's.
        _ = try await server.sql("CREATE DATABASE contract TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en' LOCALE 'C.UTF-8'")
        let url = "postgres://\(server.user)@127.0.0.1:\(server.port)/contract?sslmode=disable"
        let database = ContractDatabase(server: server, location: try PostgresLocation(url: url))
        try await ContractDatabase.$current.withValue(database) { try await function() }
    }
}

extension Trait where Self == ContractDatabaseTrait {
    /// One throwaway PostgreSQL for the suite's contract cases.
    static var contractDatabase: ContractDatabaseTrait { ContractDatabaseTrait() }
}

extension ContractDatabase {
    /// Runs one statement on the suite's database (a connection of its own, closed after).
    func execute(_ statement: String) async throws {
        let connection = try await PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.any(),
                                                              configuration: location.connectionConfiguration(), id: 0,
                                                              logger: Self.logger)
        do {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Self.logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    /// A node's started `PostgresServices` (metadata, history and locks) named `node`.
    static func services(_ database: ContractDatabase, node: String) async throws -> PostgresServices {
        let services = PostgresServices(location: database.location, node: node, logger: logger)
        try await services.start()
        return services
    }
}
