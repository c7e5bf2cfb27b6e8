import Dispatch
import Foundation
import Logging
import RTMPostgres
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing

/// The cluster's metadata, history and locks store on a real PostgreSQL
/// started for the test, used by two nodes at once.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresServicesTests {
    private static let logger = Logger(label: "test.postgres.services")

    /// Two nodes' services on one fresh database.
    private func withServices(_ body: (PostgresServices, PostgresServices) async throws -> Void) async throws {
        try await withTwoNodes(open: { location, node in
            let services = PostgresServices(location: location, node: node, logger: Self.logger)
            try await services.start()
            return services
        }, stop: { await $0.stop() }, body)
    }

    private func call<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await offPool(body)
    }

    private struct Outdated: Error {}

    @Test("§2.11: two nodes' read-check-write of one set, made to overlap: the second runs after the first committed and sees its revision")
    func metadataWritesExcludeEachOther() async throws {
        try await withServices { a, b in
            let key = StorageKey(appId: "app", type: .channel, target: "doc")
            _ = try await call { try a.modifyMetadata(key, requiredLock: nil) { _ in Metadata(majorRevision: 1, items: [MetadataItem(key: "k", value: "v")]) } }
            // Each write expects revision 1 and takes 200 ms between its read and its write: without
            // mutual exclusion both would read 1 and both would win.
            @Sendable func write(_ store: PostgresServices, _ value: String) async -> Bool {
                (try? await call {
                    try store.modifyMetadata(key, requiredLock: nil) { current in
                        guard current?.majorRevision == 1 else { throw Outdated() }
                        Thread.sleep(forTimeInterval: 0.2)   // widens the race window on purpose
                        return Metadata(majorRevision: 2, items: [MetadataItem(key: "k", value: value)])
                    }
                }) != nil
            }
            async let fromA = write(a, "a")
            async let fromB = write(b, "b")
            let won = await [fromA, fromB]
            #expect(won.filter { $0 }.count == 1, "\(won)")
            let stored = try await call { try b.loadMetadata(key) }
            #expect(stored?.majorRevision == 2 && stored?["k"]?.value == (won[0] ? "a" : "b"))
        }
    }

    @Test("§2.11: a lock-guarded write is refused in its transaction unless the writer holds the lock")
    func lockGuard() async throws {
        try await withServices { a, b in
            let key = StorageKey(appId: "app", type: .channel, target: "doc")
            _ = try await a.perform(.set(ttl: 10, maxLocks: 32), appId: "app", channel: "doc", name: "L", user: "alice")
            _ = try await a.perform(.acquire, appId: "app", channel: "doc", name: "L", user: "alice")
            let guarded: @Sendable (PostgresServices, String) throws -> Metadata = { store, user in
                try store.modifyMetadata(key, requiredLock: MetadataLockGuard(lockName: "L", owner: user)) { _ in
                    Metadata(majorRevision: 1, items: [MetadataItem(key: "k", value: user)])
                }
            }
            await #expect(throws: SharedStoreRefusal(code: .storageLockNotAcquired, reason: "the write needs lock 'L', which 'bob' does not hold")) {
                try await call { try guarded(b, "bob") }
            }
            #expect(try await call { try guarded(b, "alice") }["k"]?.value == "alice")
        }
    }

    @Test("§2.12: a lock request to a database that stopped answering (frozen with SIGSTOP) is refused at callTimeout instead of waiting for ever; once it answers again, locks work")
    func lockCallBoundedWhenDatabaseHangs() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.destroy() }
        let location = try PostgresLocation(url: server.url + "?sslmode=disable")
        let services = PostgresServices(location: location, node: "a", callTimeout: .seconds(1), logger: Self.logger)
        try await services.start()
        _ = try await services.perform(.set(ttl: 10, maxLocks: 32), appId: "app", channel: "doc", name: "L", user: "alice")
        try server.freeze()
        let started = ContinuousClock.now
        let acquire = Task { try await services.perform(.acquire, appId: "app", channel: "doc", name: "L", user: "alice") }
        // Waited for at most 10 s: without the bound the call would never end while frozen, so
        // then the database is thawed (which lets the call end) and the test fails.
        let ended = await withDeadline(.seconds(10)) {
            await withTaskCancellationHandler { _ = await acquire.result; return true } onCancel: { try? server.thaw() }
        } ?? false
        let waited = ContinuousClock.now - started
        try server.thaw()
        #expect(ended, "the lock call was still waiting after 10 s")
        await #expect(throws: (any Error).self) { try await acquire.value }
        #expect(waited >= .seconds(1) && waited < .seconds(5), "\(waited)")
        // The database answers again: the same user's acquire gets the lock (or the one the
        // refused call may have committed, with the same token).
        if case .done(let detail, _) = try await services.perform(.acquire, appId: "app", channel: "doc", name: "L", user: "alice") {
            #expect(detail.owner == "alice")
        } else {
            Issue.record("the acquire after the thaw was refused")
        }
        await services.stop()
    }

    @Test("§2.8: two nodes append to one channel's history at the same millisecond: every message stored once, timestamps unique")
    func historyAcrossNodes() async throws {
        try await withServices { a, b in
            @Sendable func append(_ store: PostgresServices, _ prefix: String) async throws {
                for i in 1...20 {
                    let message = HistoryMessage(publisher: prefix, text: "\(prefix)\(i)", data: nil, customType: nil, ts: 5_000)
                    let record = HistoryRecord(appId: "app", channelType: "message", channel: "room", message: message, dedupKey: "\(prefix):\(i)")
                    #expect(try await call { try store.appendHistory(record) } != nil)
                }
            }
            async let fromA: Void = append(a, "a")
            async let fromB: Void = append(b, "b")
            _ = try await (fromA, fromB)
            // A resend (same dedup key) is stored once.
            let resend = HistoryRecord(appId: "app", channelType: "message", channel: "room",
                                       message: HistoryMessage(publisher: "a", text: "a1", data: nil, customType: nil, ts: 9_000), dedupKey: "a:1")
            #expect(try await call { try b.appendHistory(resend) } == nil)
            let page = try await call { try b.history(appId: "app", channelType: "message", channel: "room", start: .max, end: 0, limit: 100) }
            #expect(page.count == 40 && Set(page.map(\.ts)).count == 40)
            #expect(page.map(\.ts) == page.map(\.ts).sorted(by: >))
        }
    }

    @Test("§2.12: an owner offline through node a and back on node b keeps its lock; node b declared dead: released TTL later by a sweep on a")
    func lockTTLAcrossNodes() async throws {
        try await withServices { a, b in
            _ = try await a.perform(.set(ttl: 1, maxLocks: 32), appId: "app", channel: "doc", name: "L", user: "alice")
            guard case .done(let held, _) = try await a.perform(.acquire, appId: "app", channel: "doc", name: "L", user: "alice") else {
                Issue.record("not acquired"); return
            }
            try await a.ownerOffline(appId: "app", user: "alice")
            try await b.ownerOnline(appId: "app", user: "alice")   // back within the TTL, on node b
            try await a.nodeDied("a")   // not alice's node any more
            let deadline = ContinuousClock.now + .milliseconds(1_500)
            while ContinuousClock.now < deadline {
                #expect(try await a.sweep().isEmpty)
                try await Task.sleep(for: .milliseconds(100))   // sweeps across a window in which nothing may be released
            }
            #expect(try await b.locks(appId: "app", channel: "doc") == [held])
            // Taken before the declaration: the TTL runs from it (the database's clock), so a
            // release comes at least 1 s after this instant, however late the calls return.
            let declared = ContinuousClock.now
            try await a.nodeDied("b")
            let early = try await a.sweep()
            #expect(early.isEmpty || ContinuousClock.now - declared >= .seconds(1), "\(early)")   // due only after the TTL
            let released = early.isEmpty ? try await firstValue(within: .seconds(15), every: .milliseconds(20)) { () async throws -> [SharedLockChange]? in
                let changes = try await a.sweep()
                return changes.isEmpty ? nil : changes
            } ?? [] : early
            #expect(ContinuousClock.now - declared >= .milliseconds(900))   // 0.1 s for the two clocks' reading
            #expect(released == [SharedLockChange(appId: "app", channel: "doc", kind: .lockReleased, detail: LockDetail(lockName: "L", ttl: 1))])
            guard case .done(let next, _) = try await b.perform(.acquire, appId: "app", channel: "doc", name: "L", user: "bob") else {
                Issue.record("not acquired after the release"); return
            }
            #expect(next.fencingToken > held.fencingToken)
        }
    }

    @Test("§2.12: a node restarted under the same id (before being declared dead) lets the locks of its previous run go after their TTL")
    func restartedNodeReleasesItsOldLocks() async throws {
        try await withServices { a, b in
            _ = try await a.perform(.set(ttl: 1, maxLocks: 32), appId: "app", channel: "doc", name: "L", user: "alice")
            _ = try await a.perform(.acquire, appId: "app", channel: "doc", name: "L", user: "alice")
            #expect(try await b.sweep().isEmpty)
            let restarted = PostgresServices(location: a.location, node: "a", logger: Self.logger)
            let started = ContinuousClock.now   // before the restart: the TTL runs from a later instant
            try await restarted.start()
            let released = try await firstValue(within: .seconds(15), every: .milliseconds(20)) { () async throws -> [SharedLockChange]? in
                let changes = try await b.sweep()
                return changes.isEmpty ? nil : changes
            } ?? []
            #expect(released.map(\.detail.lockName) == ["L"] && ContinuousClock.now - started >= .milliseconds(900))
            await restarted.stop()
        }
    }
}
