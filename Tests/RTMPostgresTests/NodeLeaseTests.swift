import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import RTMPostgres
import RTMServer
import RTMTestSupport
import Testing

/// Node leases and the log's retention on a real PostgreSQL (items 5 and 7).
extension PostgresChannelLogTests {
    @Test("A node that stops renewing its lease (cancelled like kill -9) is declared dead by the other within lease + one interval")
    func deadNodeDeclared() async throws {
        try await withDatabase(clients: 2) { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            // A 1 s lease: the survivor renews within it on a loaded machine.
            let interval = TimeAmount.milliseconds(100), lease = TimeAmount.seconds(1)
            let survivor = NodeRegistry(client: clients[0], node: "a", interval: interval, lease: lease, logger: Self.logger)
            let victim = NodeRegistry(client: clients[1], node: "b", interval: interval, lease: lease, logger: Self.logger)
            let (events, sink) = AsyncStream<String>.makeStream()
            let recorder = AsyncRecorder(events)
            let survivorTask = Task {
                await survivor.run { event in
                    switch event {
                    case .nodeDied(let node): sink.yield("died \(node)")
                    case .nodeReturned(let node): sink.yield("back \(node)")
                    case .liveNodes(let count): sink.yield("live \(count)")
                    default: break
                    }
                }
            }
            defer { survivorTask.cancel() }
            let victimTask = Task { await victim.run { _ in } }
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "live 2" }) != nil)
            // No goodbye, no last write: the lease just stops being renewed.
            victimTask.cancel()
            await victimTask.value
            let killed = ContinuousClock.now
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "died b" }) != nil)
            let took = ContinuousClock.now - killed
            // The bound: lease + one interval (1.1 s), plus 2 s for the survivor's queries on a
            // loaded machine (a real-time measurement: the lease runs out on the database's clock).
            #expect(took <= .milliseconds(1_100 + 2_000), "declared dead after \(took)")
            #expect(await recorder.first(within: .seconds(5), where: { $0 == "live 1" }) != nil)
            #expect(!(await recorder.all.contains("died a")))
            // Renewing again: back.
            let again = Task { await victim.run { _ in } }
            defer { again.cancel() }
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "back b" }) != nil)
        }
    }

    @Test("P-2 fencing: a node is declared dead only while its lease is lapsed, in the database; the node then learns it at its next renewal and commits nothing (ensureLease throws) until it registers again")
    func fencing() async throws {
        try await withDatabase(clients: 2) { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            // A 2 s lease: what must happen within it (a registration, then a fence that finds it
            // running) does on a loaded machine.
            let lease = TimeAmount.seconds(2)
            let survivor = NodeRegistry(client: clients[0], node: "a", interval: .milliseconds(100), lease: lease, logger: Self.logger)
            let zombie = NodeRegistry(client: clients[1], node: "b", interval: .milliseconds(100), lease: lease, logger: Self.logger)
            try await survivor.register(newRun: true)
            try await zombie.register(newRun: true)
            #expect(try await survivor.fence("b") == false)   // its lease runs: not declared dead
            try await zombie.ensureLease()
            // The zombie is paused past its lease (no renewal; by the database's clock and its own):
            // the lease running out is the rule under test.
            try await Task.sleep(for: .milliseconds(2_500))
            #expect(try await survivor.fence("b") == true)
            #expect(try await survivor.fence("b") == true)   // another survivor: declared already
            await #expect(throws: NodeFenced.self) { try await zombie.ensureLease() }
            #expect(try await zombie.renew() == .fenced)
            #expect(try await survivor.leases()["b"] == false)
            // It has sent its clients away: it joins again.
            try await zombie.register(newRun: false)
            try await zombie.ensureLease()
            #expect(try await zombie.renew() == .renewed)
            #expect(try await survivor.fence("b") == false)
            #expect(try await survivor.leases()["b"] == true)
        }
    }

    @Test("Retention trims messages older than the horizon, once per period for all nodes, and the follower keeps working")
    func retentionTrimsOldRows() async throws {
        try await withDatabase(clients: 2) { server, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let location = try PostgresLocation(url: server.url + "?sslmode=disable")
            let log = PostgresChannelLog(client: clients[0], logger: Self.logger)
            let nowMillis = Int64(Date().timeIntervalSince1970 * 1000)
            var old = message("a", "old")
            old.millis = nowMillis - 3_600_000
            var recent = message("a", "recent")
            recent.millis = nowMillis
            _ = try await log.append([old, old, recent], node: "n1")
            let follower = ChannelLogFollower(log: log, location: location, pollInterval: .milliseconds(20), logger: Self.logger)
            let (events, sink) = AsyncStream<String>.makeStream()
            let recorder = AsyncRecorder(events)
            let (started, didStart) = AsyncStream<Void>.makeStream()
            let task = Task {
                try await follower.run(started: { didStart.finish() }) { event in
                    if case .messages(let entries) = event { for entry in entries { sink.yield("\(entry.channel)#\(entry.seq)") } }
                }
            }
            defer { task.cancel() }
            for await _ in started {}
            // Two nodes at once: one trims; the other finds this period's trim done.
            let retentions = clients.map { ChannelLogRetention(client: $0, retention: .minutes(30), interval: .seconds(60), logger: Self.logger) }
            async let first = retentions[0].trimIfDue(nowMillis: nowMillis)
            async let second = retentions[1].trimIfDue(nowMillis: nowMillis)
            let results = [try await first, try await second]
            #expect(results.compactMap { $0 } == [2])
            #expect(try await retentions[0].trimIfDue(nowMillis: nowMillis) == nil)   // this period's is done
            let left = try await log.messages(appId: "app", channel: "a", after: 0, limit: 10)
            #expect(left.map(\.seq) == [3] && String(buffer: left[0].payload) == "recent")
            // The follower still delivers what comes next.
            _ = try await log.append([message("a", "next")], node: "n2", announce: true)
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "a#4" }) != nil)
        }
    }
}
