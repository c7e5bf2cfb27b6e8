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
    /// `run` returns, `ROLLBACK` when it throws. If the connection closes before the transaction
    /// ends, the call fails at once (`ConnectionClosedMidCall`) instead of waiting for a reply
    /// that cannot come (see `TransactionCall`).
    func transaction<Work: PostgresTransaction>(_ work: Work, logger: Logger) async throws -> Work.Output {
        try await withConnection { connection in
            try await TransactionCall(work: work, connection: connection, logger: logger).run()
        }
    }
}

/// One transaction on one leased connection, raced against that connection's close.
///
/// PostgresNIO's pool can lease a connection whose socket has just closed (a database killed or
/// failed over, a cut link; the pool hears of the close a moment later): the statements written
/// to it are dropped with the connection's handlers and their promises never complete. Found
/// with a synchronous standby promoted under a stream of user messages: a node's commit waited
/// out its whole deadline (10 s) on such a connection with the new primary already up, and its
/// receivers got nothing meanwhile. The connection's `closeFuture` does complete: the call fails
/// then, with the outcome unknown (the `COMMIT` may have been sent), and the work is left behind.
/// The work runs from a method of this value, not from a closure nested in the closure given to
/// `withConnection` (see `PostgresTransaction` for the optimiser bug that rule avoids).
private struct TransactionCall<Work: PostgresTransaction>: Sendable {
    let work: Work
    let connection: PostgresConnection
    let logger: Logger

    func run() async throws -> Work.Output {
        try await BoundedCall.untilClosed(connection) { try await self.statements() }
    }

    private func statements() async throws -> Work.Output {
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
