import NIOConcurrencyHelpers
import PostgresNIO

/// Calls waiting on pooled connections, told when their connection closes (`BoundedCall.untilClosed`).
///
/// One callback on each connection's `closeFuture` for the connection's whole life, not one per
/// call: a future keeps every callback until it completes, and a pooled connection serves
/// thousands of calls.
final class ClosingConnections: Sendable {
    /// The process's one watch (connections of every pool).
    static let shared = ClosingConnections()

    private struct State {
        /// Per open connection watched: its waiting calls by token.
        var waiting: [ObjectIdentifier: [UInt64: @Sendable () -> Void]] = [:]
        var nextToken: UInt64 = 1
    }

    private let state = NIOLockedValueBox(State())

    /// Calls `onClose` when `connection` closes (at once if it already has), unless `unwatch`
    /// comes first. Returns the token for `unwatch`.
    func watch(_ connection: PostgresConnection, onClose: @escaping @Sendable () -> Void) -> UInt64 {
        let key = ObjectIdentifier(connection)
        let (token, first) = state.withLockedValue { state -> (UInt64, Bool) in
            let token = state.nextToken
            state.nextToken += 1
            let first = state.waiting[key] == nil
            state.waiting[key, default: [:]][token] = onClose
            return (token, first)
        }
        if first {
            connection.closeFuture.whenComplete { [self] _ in
                let calls = state.withLockedValue { $0.waiting.removeValue(forKey: key) } ?? [:]
                for call in calls.values { call() }
            }
        }
        return token
    }

    /// The call of `token` ended: it is not told of the close.
    func unwatch(_ connection: PostgresConnection, _ token: UInt64) {
        let key = ObjectIdentifier(connection)
        state.withLockedValue { state in
            _ = state.waiting[key]?.removeValue(forKey: token)
        }
    }

    /// How many connections are watched (tests: closed ones are forgotten).
    var watchedConnections: Int { state.withLockedValue { $0.waiting.count } }
}
