import RTMTestSupport
import Testing

/// The test harness itself: a server that starts, stops, starts again and goes away.
@Suite(.realTime, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresTestServerTests {
    @Test("a throwaway PostgreSQL starts on a free port, restarts, and is removed")
    func startsAndStops() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.destroy() }
        // Below the kernel's range for outgoing connections: no client socket of a test running
        // beside can take it before the server binds it, or between a stop and a start.
        #expect(server.port >= 20_000 && server.port < 32_768)
        try await server.stop()
        try await server.start()
        #expect(server.log.contains("ready to accept connections"))
    }
}
