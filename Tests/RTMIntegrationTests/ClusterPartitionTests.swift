import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// A node cut off from the database while its clients still reach it (a network partition
/// between node and PostgreSQL, made with a proxy that black-holes the node's database traffic).
extension ClusterTests {
    @Test("P-1, P-2: a node cut off from the database past its lease (black hole between node and PostgreSQL) while the other node reaches it acknowledges no publish, asks the other node, sends its clients away (goaway code 28, reason says why) and says 503 on /ready; an SDK client with another endpoint resumes there within its grace window, channels kept; the node joins again once it reaches the database")
    func cutOffNodeSendsClientsAway() async throws {
        let (database, location, logger) = try await Self.database()
        defer { database.destroy() }
        let toDatabase = try await FaultProxy.scoped(targetPort: database.port)   // node a's only way to PostgreSQL
        // A 2 s lease: short enough for a quick test, long enough that neither node misses a
        // renewal on a loaded machine before the partition.
        let options = Self.options { $0.lease = .seconds(2); $0.leaseInterval = .milliseconds(200) }
        let proxied = try PostgresLocation(url: "postgres://\(database.user)@127.0.0.1:\(toDatabase.port)/\(database.database)?sslmode=disable")
        let a = try await Harness.start {
            $0.backplane = PostgresChannelBackplane(location: proxied, node: "a", options: options, logger: logger)
            $0.drainReconnectSpread = .milliseconds(100)
        }
        let b = try await Harness.start { $0.backplane = PostgresChannelBackplane(location: location, node: "b", options: options, logger: logger) }
        let toA = try await FaultProxy.scoped(targetPort: a.port)
        let toB = try await FaultProxy.scoped(targetPort: b.port)
        do {
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: b.port))
            toB.setRefuseNew(true)   // carol's first connection goes to node a
            let (observer, observerEvents) = try await ClusterTests.client("observer", port: b.port)
            try await observer.subscribe("room")
            let (carol, carolEvents) = try await ClusterTests.client("carol", port: a.port) {
                $0.endpoints = ["ws://127.0.0.1:\(toA.port)", "ws://127.0.0.1:\(toB.port)"]
                $0.presenceTimeout = 10
            }
            try await carol.subscribe("room")
            _ = try await carol.publish(channel: "room", message: "acked before")
            #expect(await observerEvents.first(within: soon) { $0.messageEvent?.text == "acked before" } != nil)
            toB.setRefuseNew(false)
            let mark = await carolEvents.mark()

            // Node a has read b's address (b registered it once listening; two renewals of a's
            // lease since then mean a read the leases after it).
            #expect(try await Self.readsAddress(of: "b", by: "a", database))
            toDatabase.setMode(.blackhole)
            // Node a acknowledges nothing that crosses the cluster while cut off: this publish is
            // refused, or fails with the link; when the SDK resends it after moving, b stores it once.
            let cutOff = Task { () -> Bool in
                do { _ = try await carol.publish(channel: "room", message: "cut off"); return true } catch { return false }
            }
            // Node b declares a dead; a's lease ran out by its own clock, b says it reaches the
            // database, a's own try fails too: carol is sent away.
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 1, port: b.port))
            let lost = await carolEvents.first(since: mark, within: .seconds(20)) { $0.link?.reasonCode == .serverGoingAway }
            #expect(lost?.link?.reason.contains("cannot reach the cluster's database") == true, "\(lost.map { "\($0)" } ?? "no loss")")
            let back = await carolEvents.first(since: mark, within: .seconds(20)) { $0.link?.currentState == .connected }
            #expect(back?.link?.isResumed == true, "\(back.map { "\($0)" } ?? "not back")")
            #expect(back?.link?.unrestoredChannels == [])
            #expect(toB.openConnections == 1)
            let metrics = try await MetricsTests.scrape(a.port)
            #expect(metrics["rtm_cluster_lease_lapses_total"] == 1 && metrics["rtm_cluster_cut_off_total"] == 1)
            let ready = try await StreamTests.httpGet("/ready", port: a.port)
            #expect(ready.hasPrefix("HTTP/1.1 503") && ready.contains("this node is cut off"), "\(ready)")
            // Served by b now: both ways.
            _ = try await carol.publish(channel: "room", message: "from b")
            #expect(await observerEvents.first(within: soon) { $0.messageEvent?.text == "from b" } != nil)
            _ = try await observer.publish(channel: "room", message: "to carol")
            #expect(await carolEvents.first(since: mark, within: soon) { $0.messageEvent?.text == "to carol" } != nil)
            let acked = await cutOff.value
            let delivered = await observerEvents.all.filter { $0.messageEvent?.text == "cut off" }.count
            #expect(acked ? delivered == 1 : delivered <= 1, "acked \(acked), delivered \(delivered)")

            // The partition heals: a learns it was declared dead, and joins again.
            toDatabase.cutAll()
            toDatabase.setMode(.pass)
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: b.port))
            #expect(try await Self.waitForMetric("rtm_cluster_fenced_total", 1, port: a.port))
            #expect(try await StreamTests.httpGet("/ready", port: a.port).hasPrefix("HTTP/1.1 200"))
            await carol.logout()
            await observer.logout()
        } catch {
            Issue.record("database log:\n\(database.log.suffix(2_000))")
            throw error
        }
        try? await toA.stop()
        try? await toB.stop()
        await a.stop()
        await b.stop()
        try? await toDatabase.stop()
    }

    @Test("P-1: the database down for every node past their leases: each node asks the other, nobody reaches it, and clients stay connected (no goaway, /ready 200, /health says why); when it is back the lease is renewed and publishes go through")
    func databaseDownEverywhereKeepsClients() async throws {
        let options = Self.options { $0.lease = .seconds(2); $0.leaseInterval = .milliseconds(200) }
        // carol's link is the rule under test (it must not move): a heartbeat a loaded machine
        // keeps (0.5 s, the pong within 3 s, the server's slack 5 s), not the tests' 0.1 s.
        let (database, a, b) = try await Self.cluster(options: options) { _, _, _, config in config.heartbeatSlack = .seconds(5) }   // stopped by the .realTime trait's scope
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: a.port) {
            $0.heartbeatInterval = 0.5
            $0.pongTimeout = 3
            $0.presenceTimeout = 10
        }
        try await carol.subscribe("room")
        let mark = await carolEvents.mark()
        // Each node knows where to ask the other (so the answer is the other's, not an empty list).
        #expect(try await Self.readsAddress(of: "b", by: "a", database))
        #expect(try await Self.readsAddress(of: "a", by: "b", database))
        try await database.stop()
        for node in [a, b] {
            let alone = await Self.eventually {
                (try? await StreamTests.httpGet("/health", port: node.port))?.contains("no other node reaches the database") == true
            }
            #expect(alone)
        }
        let ready = try await StreamTests.httpGet("/ready", port: a.port)
        #expect(ready.hasPrefix("HTTP/1.1 200"), "\(ready)")
        let metrics = try await MetricsTests.scrape(a.port)
        #expect(metrics["rtm_cluster_lease_lapses_total"] == 1 && metrics["rtm_cluster_cut_off_total"] == 0)
        let movedWhileDown = await carolEvents.all.dropFirst(mark).compactMap(\.link)
        #expect(movedWhileDown.isEmpty, "\(movedWhileDown)")   // never left connected

        try await database.start()
        let renewed = await Self.eventually {
            (try? await StreamTests.httpGet("/health", port: a.port)).map { $0.contains("database: up") && !$0.contains("lease:") } == true
        }
        #expect(renewed)
        // Refused until the node has its database back: retried (bounded).
        let sent = await RTMTestSupport.eventually(within: .seconds(30), every: .milliseconds(50)) {
            (try? await carol.publish(channel: "room", message: "after")) != nil
        }
        #expect(sent)
        let movedAtAll = await carolEvents.all.dropFirst(mark).compactMap(\.link)
        #expect(movedAtAll.isEmpty, "\(movedAtAll)")
        await carol.logout()
    }

    /// Whether `condition` holds within 30 s (asked every 50 ms).
    private static func eventually(_ condition: () async -> Bool) async -> Bool {
        await RTMTestSupport.eventually(within: .seconds(30), every: .milliseconds(50), condition)
    }

    /// Whether node `reader` renewed its lease twice after `node`'s address was registered
    /// (each renewal is followed by a read of every node's lease and address), within 30 s.
    private static func readsAddress(of node: String, by reader: String, _ database: PostgresTestServer) async throws -> Bool {
        var found = false
        try await sql(database) { client in
            func row(_ id: String) async throws -> (address: String?, until: String)? {
                var found: (String?, String)?
                for try await (address, until) in try await client.query("SELECT address, lease_until::text FROM rtm_node WHERE node_id = \(id)",
                                                                         logger: Logger(label: "test.sql")).decode((String?, String).self) {
                    found = (address, until)
                }
                return found
            }
            found = await eventually { (try? await row(node))??.address != nil }
            guard found, var last = try await row(reader)?.until else { return }
            for _ in 0..<2 {
                let seen = last
                found = await eventually {
                    guard let now = try? await row(reader)?.until, now != seen else { return false }
                    last = now
                    return true
                }
            }
        }
        return found
    }
}
