import Logging
import NIOPosix
import PostgresNIO

extension PostgresLocation {
    /// One listening session on a dedicated connection: connects, `LISTEN`s on `channel` and
    /// runs `consume` with the notifications until the connection ends (it throws) or `consume`
    /// returns; then closes the connection. Followers call it in a retry loop.
    func listen(on channel: String, connectionID id: Int, logger: Logger,
                consume: (PostgresNotificationSequence) async throws -> Void) async throws {
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: try connectionConfiguration(), id: id, logger: logger)
        defer { Task { try? await connection.close() } }
        try await connection.listen(on: channel, consume: consume)
    }
}
