import Foundation
import NIOCore
import RTMPostgres
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// A node cut off from the database while its clients still reach it (a network partition
/// between node and PostgreSQL, made with a proxy that black-holes the node's database traffic).
extension ClusterTests {
    @Test("P-1, P-2: a node cut off from the database past its lease (black hole between node and PostgreSQL) acknowledges no publish, sends its clients away (goaway code 28, reason says why); an SDK client with another endpoint resumes there within its grace window, channels kept; the node joins again once it reaches the database")
    func cutOffNodeSendsClientsAway() async throws {
        let (database, location, logger) = try Self.database()
        defer { database.destroy() }
        let toDatabase = try await FaultProxy.start(targetPort: database.port)   // node a's only way to PostgreSQL
        let options = Self.options { $0.lease = .seconds(1); $0.leaseInterval = .milliseconds(100) }
        let proxied = try PostgresLocation(url: "postgres://\(database.user)@127.0.0.1:\(toDatabase.port)/\(database.database)?sslmode=disable")
        let a = try await Harness.start {
            $0.backplane = PostgresChannelBackplane(location: proxied, node: "a", options: options, logger: logger)
            $0.drainReconnectSpread = .milliseconds(100)
        }
        let b = try await Harness.start { $0.backplane = PostgresChannelBackplane(location: location, node: "b", options: options, logger: logger) }
        let toA = try await FaultProxy.start(targetPort: a.port)
        let toB = try await FaultProxy.start(targetPort: b.port)
        do {
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: b.port))
            toB.setRefuseNew(true)   // carol's first connection goes to node a
            let (observer, observerEvents) = try await Harness.client("observer", port: b.port)
            try await observer.subscribe("room")
            let (carol, carolEvents) = try await Harness.client("carol", port: a.port) {
                $0.endpoints = ["ws://127.0.0.1:\(toA.port)", "ws://127.0.0.1:\(toB.port)"]
                $0.presenceTimeout = 10
            }
            try await carol.subscribe("room")
            _ = try await carol.publish(channel: "room", message: "acked before")
            #expect(await observerEvents.first(within: soon) { $0.messageEvent?.text == "acked before" } != nil)
            toB.setRefuseNew(false)
            let mark = await carolEvents.mark()

            toDatabase.setMode(.blackhole)
            // Node a acknowledges nothing that crosses the cluster while cut off: this publish is
            // refused, or fails with the link; when the SDK resends it after moving, b stores it once.
            let cutOff = Task { () -> Bool in
                do { _ = try await carol.publish(channel: "room", message: "cut off"); return true } catch { return false }
            }
            // Node b declares a dead; a's lease ran out by its own clock: carol is sent away.
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 1, port: b.port))
            let lost = await carolEvents.first(since: mark, within: .seconds(10)) { $0.link?.reasonCode == .serverGoingAway }
            #expect(lost?.link?.reason.contains("cannot reach the cluster's database") == true, "\(lost.map { "\($0)" } ?? "no loss")")
            let back = await carolEvents.first(since: mark, within: .seconds(10)) { $0.link?.currentState == .connected }
            #expect(back?.link?.isResumed == true, "\(back.map { "\($0)" } ?? "not back")")
            #expect(back?.link?.unrestoredChannels == [])
            #expect(toB.openConnections == 1)
            let metrics = try await MetricsTests.scrape(a.port)
            #expect(metrics["rtm_cluster_lease_lapses_total"] == 1)
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
}
