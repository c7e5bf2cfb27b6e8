import Logging
import PostgresNIO

/// The work of one transaction, as a value: what it needs is stored in its fields, and `run`
/// does it on the transaction's connection (`PostgresClient.transaction`).
///
/// Why values and not closures: the optimiser of Swift 6.3.1 miscompiled this module's async
/// closures handed to postgres-nio's closure APIs (`withTransaction`, and any async closure
/// nested in the closure given to `withConnection`): in release builds the caller read the
/// closure's result from memory nothing had written (AddressSanitizer: the 0xbe fill of fresh
/// memory), so a node died on its first user message (`EndToEndProcessTests` against the
/// release binary). The closure given to `withConnection` here holds no async closure; it calls
/// `run` on a value, as `PostgresChannelLog` always did, and release builds compile it right.
protocol PostgresTransaction: Sendable {
    associatedtype Output: Sendable
    /// The statement that opens the transaction (`BEGIN`, or with an isolation level).
    static var begin: PostgresQuery { get }
    /// The transaction's statements; it is rolled back when this throws.
    func run(on connection: PostgresConnection, logger: Logger) async throws -> Output
}

extension PostgresTransaction {
    static var begin: PostgresQuery { "BEGIN" }
}

extension PostgresClient {
    /// Runs `work` in one transaction on one pooled connection: `Work.begin`, then `COMMIT` when
    /// `run` returns, `ROLLBACK` when it throws.
    func transaction<Work: PostgresTransaction>(_ work: Work, logger: Logger) async throws -> Work.Output {
        try await withConnection { connection in
            try await connection.query(Work.begin, logger: logger)
            let output: Work.Output
            do {
                output = try await work.run(on: connection, logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
            try await connection.query("COMMIT", logger: logger)
            return output
        }
    }
}
