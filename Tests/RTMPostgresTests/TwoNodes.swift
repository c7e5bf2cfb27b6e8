import Dispatch
import RTMPostgres
import RTMTestSupport
import Testing

/// Two nodes' stores ("a" and "b") on one fresh database started for the test; `body` runs with
/// them, then they are stopped (and the database's log recorded when `body` threw).
func withTwoNodes<Store: Sendable>(open: (PostgresLocation, String) async throws -> Store, stop: (Store) async -> Void,
                                   _ body: (Store, Store) async throws -> Void) async throws {
    let server = try await PostgresTestServer.start()
    defer { server.destroy() }
    let location = try PostgresLocation(url: server.url + "?sslmode=disable")
    let a = try await open(location, "a")
    let b = try await open(location, "b")
    do {
        try await body(a, b)
    } catch {
        Issue.record("database log:\n\(server.log.suffix(2_000))")
        await stop(a); await stop(b)
        throw error
    }
    await stop(a); await stop(b)
}

/// Runs a (blocking) store call off the cooperative pool, as the server's store queues do.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}
