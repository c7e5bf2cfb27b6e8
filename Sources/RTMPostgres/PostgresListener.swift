import Logging
import NIOConcurrencyHelpers
import NIOPosix
import PostgresNIO

/// One node's listening connection, shared by everything of the node that waits for
/// `NOTIFY`: the channel log's follower, the shared services and the user-message store each
/// `LISTEN` on their own channel, all on this one dedicated connection.
///
/// PostgreSQL keeps one notification queue per server: every `NOTIFY` wakes *every* backend
/// that listens on anything in the database, whatever the channel. With one listening
/// connection per node instead of one per subsystem, each publish's wake-up costs the
/// database one backend per node instead of three (measured under
/// `rtm bench cluster --rate 1000`, 3 nodes: the listeners of the two quiet channels took
/// 0.12 of a core, woken only to find nothing for them).
///
/// Without a shared one, each of them makes a listener of its own (one connection each).
///
/// `listen(on:logger:consume:)` keeps the contract of a dedicated connection: it
/// throws when the shared connection ends, and the caller's retry loop calls it again, which
/// opens a new connection if no one has yet. The connection is closed when its last listener
/// leaves.
public final class PostgresListener: Sendable {
    private struct State {
        /// The connection being opened or open, and its number.
        var current: (id: Int, connection: Task<PostgresConnection, any Error>)?
        /// Listeners on `current`.
        var users = 0
        var opened = 0
    }

    private let location: PostgresLocation
    private let state = NIOLockedValueBox(State())

    /// A listener for the database at `location`; it connects on first use.
    public init(location: PostgresLocation) {
        self.location = location
    }

    /// Connections opened so far (for tests and diagnostics).
    public var connectionsOpened: Int { state.withLockedValue { $0.opened } }

    /// `LISTEN`s on `channel` on the shared connection (opening it if needed) and runs
    /// `consume` with the notifications until the connection ends (it throws) or `consume`
    /// returns (then `UNLISTEN`).
    public func listen(on channel: String, logger: Logger, consume: (PostgresNotificationSequence) async throws -> Void) async throws {
        let (id, opening) = acquire(logger: logger)
        defer { release(id) }
        let connection: PostgresConnection
        do {
            connection = try await opening.value
        } catch {
            forget(id)   // the next listener tries again
            throw error
        }
        guard !connection.isClosed else {
            forget(id)
            throw PostgresChannelLogError("the listening connection closed")
        }
        do {
            try await connection.listen(on: channel, consume: consume)
        } catch {
            if connection.isClosed { forget(id) }
            throw error
        }
    }

    private func acquire(logger: Logger) -> (Int, Task<PostgresConnection, any Error>) {
        state.withLockedValue { state in
            state.users += 1
            if let current = state.current { return current }
            state.opened += 1
            let id = state.opened
            let configuration = Result { try location.connectionConfiguration() }
            let opening = Task {
                try await PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.any(),
                                                     configuration: try configuration.get(), id: id, logger: logger)
            }
            state.current = (id, opening)
            return (id, opening)
        }
    }

    /// The connection numbered `id` is of no more use: the next listener opens another.
    private func forget(_ id: Int) {
        let dropped: Task<PostgresConnection, any Error>? = state.withLockedValue { state in
            guard let current = state.current, current.id == id else { return nil }
            state.current = nil
            return current.connection
        }
        if let dropped { Task { try? await dropped.value.close() } }
    }

    private func release(_ id: Int) {
        let last: Task<PostgresConnection, any Error>? = state.withLockedValue { state in
            state.users -= 1
            guard state.users == 0, let current = state.current else { return nil }
            state.current = nil
            return current.connection
        }
        if let last { Task { try? await last.value.close() } }
    }
}
