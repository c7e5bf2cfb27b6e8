import Foundation
import Logging
import NIOConcurrencyHelpers
import RTMPostgres
import RTMTestSupport
import Testing

/// A node's one listening connection (`PostgresListener`) on a real PostgreSQL started for the test.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresListenerTests {
    private static let logger = Logger(label: "test.postgres.listener")

    /// Listens on `channel` through `listener` in a retry loop, as the node's followers do,
    /// recording each payload in `received`.
    private func follow(_ channel: String, _ listener: PostgresListener, into received: NIOLockedValueBox<[String]>) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                try? await listener.listen(on: channel, logger: Self.logger) { notifications in
                    for try await notification in notifications { received.withLockedValue { $0.append(notification.payload) } }
                }
                try? await Task.sleep(for: .milliseconds(20))   // the retry loop's pause, as the node's followers have
            }
        }
    }

    /// Backends of the test's database currently listening (their last statement a LISTEN).
    private func listeningBackends(_ server: PostgresTestServer) async throws -> [String] {
        try await server.sql("SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() ORDER BY pid")
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Polls `condition` for up to 10 s.
    private func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        try await RTMTestSupport.eventually(within: .seconds(10), condition)
    }

    @Test("Three channels' listeners share one database connection; after it is killed they all listen again on one new one")
    func oneConnectionForEveryChannel() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.destroy() }
        let listener = PostgresListener(location: try PostgresLocation(url: server.url + "?sslmode=disable"))
        let channels = ["rtm_log", "rtm_services", "rtm_user"]
        let received = channels.map { _ in NIOLockedValueBox<[String]>([]) }
        let followers = channels.indices.map { follow(channels[$0], listener, into: received[$0]) }
        defer { followers.forEach { $0.cancel() } }

        // One backend, listening on all three: each channel's notification reaches its listener only.
        #expect(try await eventually { try await listeningBackends(server).count == 1 })
        func notifyAll(_ round: String) async throws -> Bool {
            // A listener may still be starting: notify until each has its round's payload.
            try await eventually {
                for channel in channels { _ = try await server.sql("NOTIFY \(channel), '\(channel) \(round)'") }
                return channels.indices.allSatisfy { index in received[index].withLockedValue { $0.contains("\(channels[index]) \(round)") } }
            }
        }
        #expect(try await notifyAll("first"))
        for index in channels.indices {
            #expect(received[index].withLockedValue { $0 }.allSatisfy { $0.hasPrefix(channels[index] + " ") })
        }
        let first = try await listeningBackends(server)
        #expect(first.count == 1)
        #expect(listener.connectionsOpened == 1)

        // The connection is killed: every listener is back, on one new connection.
        _ = try await server.sql("SELECT pg_terminate_backend(\(first[0]))")
        #expect(try await notifyAll("second"))
        let second = try await listeningBackends(server)
        #expect(second.count == 1 && second != first, "\(first) → \(second)")
        #expect(listener.connectionsOpened == 2)
    }
}
