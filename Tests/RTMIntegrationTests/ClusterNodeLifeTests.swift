import Foundation
import Logging
import NIOCore
import PostgresNIO
import RTMPostgres
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Gaps across nodes (M-2), and the database link in /health, /metrics and replies.
extension ClusterTests {
    /// Runs SQL on the test database.
    static func sql(_ database: PostgresTestServer, _ body: (PostgresClient) async throws -> Void) async throws {
        let location = try PostgresLocation(url: database.url + "?sslmode=disable")
        let client = PostgresClient(configuration: location.clientConfiguration(connections: 1), backgroundLogger: Logger(label: "test.sql"))
        let running = Task { await client.run() }
        defer { running.cancel() }
        try await body(client)
    }

    @Test("M-2: a number the cluster never delivers becomes a gap notice to the subscribers on every node, and the channel moves past it")
    func gapAcrossNodes() async throws {
        let (database, a, b) = try await Self.cluster(options: Self.options { $0.holdback = .milliseconds(200) })   // stopped by the .realTime trait's scope
        let (onA, onAEvents) = try await ClusterTests.client("sub-a", port: a.port)
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        try await onA.subscribe("room")
        try await onB.subscribe("room")
        #expect(try await alice.publish(channel: "room", message: "m1") == 1)
        // A hole: number 2 taken but never written (a writer lost mid-way), number 3 written.
        try await Self.sql(database) { client in
            let logger = Logger(label: "test.sql")
            let app = Harness.appId
            try await client.query("""
                WITH s AS (UPDATE rtm_channel_seq SET seq = seq + 2 WHERE app = \(app) AND channel = 'room' RETURNING epoch)
                INSERT INTO rtm_channel_log (app, channel, seq, epoch, publisher, node, is_text, payload, ts)
                SELECT \(app), 'room', 3, s.epoch, 'sql', 'x', true, convert_to('m3', 'UTF8'), \(Hub.wallMillis) FROM s
                """, logger: logger)
            try await client.query("NOTIFY rtm_log", logger: logger)
        }
        for events in [onAEvents, onBEvents] {
            #expect(await events.first(within: soon) { $0.messageEvent?.text == "m3" }?.messageEvent?.seq == 3)
            let seen = await events.all.compactMap { event -> String? in
                if case .gap(let gap) = event { return "gap \(gap.channelName) \(gap.lostCount ?? -1)" }
                return event.messageEvent.map { "\($0.text ?? "") #\($0.seq ?? 0)" }
            }
            #expect(seen == ["m1 #1", "gap room 1", "m3 #3"])
        }
        #expect(try await alice.publish(channel: "room", message: "m4") == 4)
        // Each node applies m4 when its follower reads it (the ack only says it is committed).
        for events in [onAEvents, onBEvents] {
            #expect(await events.first(within: soon) { $0.messageEvent?.text == "m4" }?.messageEvent?.seq == 4)
        }
        for node in [a, b] {
            #expect(node.server.hub.channelPosition(appId: Harness.appId, channel: "room").seq == 4)
        }
        let scrape = try await MetricsTests.scrape(b.port)
        #expect(scrape["rtm_cluster_gaps_total"] == 1)
        for client in [onA, onB, alice] { await client.logout() }
    }

    /// Scrapes `port` until `metric` has `value` (bounded).
    static func waitForMetric(_ metric: String, _ value: Double, port: Int) async throws -> Bool {
        try await eventually(within: .seconds(15), every: .milliseconds(20)) { try await MetricsTests.scrape(port)[metric] == value }
    }

    @Test("C-6, H-2: with the database unreachable nothing can confirm a new login's other sessions ended: it goes ahead after clusterLoginTimeout, and the link stays up")
    func loginWhileDatabaseDown() async throws {
        let (database, _, b) = try await Self.cluster(configure: { _, _, _, config in config.clusterLoginTimeout = .milliseconds(300) })   // stopped by the .realTime trait's scope
        try await database.stop()
        #expect(try await Self.waitForMetric("rtm_database_up", 0, port: b.port))
        let loginStarted = ContinuousClock.now
        let (late, lateEvents) = try await ClusterTests.client("late", port: b.port)
        #expect(ContinuousClock.now - loginStarted >= .milliseconds(300))
        // And it stays up (H-2): its heartbeat deadline counts from the reply, not from the
        // login frame read 300 ms earlier (the sweep had closed it at once; the client came
        // back with a resume, so a look right after the login did not see it).
        // A window in which nothing may happen (the rule is a negative: no drop), not a wait for a result.
        try await Task.sleep(for: .milliseconds(600))
        #expect(await late.linkState == .connected)
        let transitions = await lateEvents.all.compactMap(\.link)
        #expect(!transitions.contains { $0.currentState == .disconnected }, "\(transitions)")
        await late.logout()
    }

    @Test("The database stopped under two nodes: rtm_database_up 0, /health says so, a publish gets an error reply; back: 1, publishes work, nothing delivered twice")
    func databaseLinkDownAndBack() async throws {
        let (database, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        let (alice, _) = try await ClusterTests.client("alice", port: a.port, configure: { $0.requestTimeout = 5 })
        try await onB.subscribe("room")
        _ = try await alice.publish(channel: "room", message: "before")
        #expect(await onBEvents.first(within: soon) { $0.messageEvent?.text == "before" } != nil)
        let up = try await MetricsTests.scrape(a.port)
        #expect(up["rtm_database_up"] == 1 && up["rtm_cluster_publish_commit_seconds_count"] >= 1)
        #expect(try await StreamTests.httpGet("/health", port: a.port).contains("database: up"))

        try await database.stop()
        for node in [a, b] { #expect(try await Self.waitForMetric("rtm_database_up", 0, port: node.port)) }
        let health = try await StreamTests.httpGet("/health", port: a.port)
        #expect(health.hasPrefix("HTTP/1.1 200") && health.contains("database: down"))
        #expect(try await StreamTests.httpGet("/ready", port: a.port).contains("database: down"))
        // Refused by the server (its reason), sent again by the SDK until the request
        // timeout, which then fails it with that reason (M-3, R-3).
        do {
            _ = try await alice.publish(channel: "room", message: "lost")
            Issue.record("a publish with the database down succeeded")
        } catch {
            #expect(error.code == .channelPublishMessageTimeout && error.reason.contains("last refused") && error.reason.contains("cluster"),
                    "\(error)")
        }

        try await database.start()
        for node in [a, b] { #expect(try await Self.waitForMetric("rtm_database_up", 1, port: node.port)) }
        // Refused until the nodes have their database back: retried (bounded).
        let sent = await eventually(within: .seconds(30), every: .milliseconds(50)) {
            (try? await alice.publish(channel: "room", message: "after")) != nil
        }
        #expect(sent)
        #expect(await onBEvents.first(within: soon) { $0.messageEvent?.text == "after" } != nil)
        #expect(try await StreamTests.httpGet("/health", port: a.port).contains("database: up"))
        // A marker after: everything before it has arrived; each once.
        _ = try await alice.publish(channel: "room", message: "marker")
        _ = await onBEvents.first(within: soon) { $0.messageEvent?.text == "marker" }
        #expect(await Self.received(onBEvents).compactMap(\.text) == ["before", "after", "marker"])
        await onB.logout()
        await alice.logout()
    }

    @Test("The database stopped and started 8 times under two nodes, a publish refused during each outage: after each restart the next publish reaches the other node (no follower left waiting on a dead pooled connection), each once, in order")
    func repeatedDatabaseRestarts() async throws {
        let (database, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        try await onB.subscribe("room")
        // Outages of different lengths (ms); reads and lease renewals issued in them land
        // on connections that are closing, which is what left a follower stuck for good.
        for (round, outage) in [0, 50, 120, 200, 300, 10, 160, 250].enumerated() {
            try await database.stop()
            try await Task.sleep(for: .milliseconds(outage))   // the length of the fault
            _ = try? await alice.publish(channel: "room", message: "refused \(round)")
            try await database.start()
            let sent = await eventually(within: .seconds(30), every: .milliseconds(50)) {
                (try? await alice.publish(channel: "room", message: "r\(round)")) != nil
            }
            #expect(sent, "round \(round)")
            let delivered = await onBEvents.first(within: soon) { $0.messageEvent?.text == "r\(round)" }
            #expect(delivered != nil, "round \(round): not delivered on node b")
            if delivered == nil { break }
        }
        let texts = await Self.received(onBEvents).compactMap(\.text).filter { $0.hasPrefix("r") }
        #expect(texts == (0..<8).map { "r\($0)" })
        await onB.logout()
        await alice.logout()
    }

    @Test("Nodes hold leases; rtm_cluster_nodes counts them and a node that stops renewing is declared dead by the other")
    func nodeLeasesInCluster() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        for node in [a, b] {
            let counted = try await Self.waitForMetric("rtm_cluster_nodes", 2, port: node.port)
            #expect(counted)
        }
        // Node b stops (its lease is no longer renewed; nothing removes it).
        await b.stop()
        let declared = try await Self.waitForMetric("rtm_cluster_nodes", 1, port: a.port)
        #expect(declared)
        #expect(a.server.hub.deadNodes == ["b"])
    }
}
