import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Channel messages across nodes over a real PostgreSQL (started by the
/// test), two real servers on loopback, real SDK clients.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterTests {
    /// Two nodes on one fresh database, handed to `body`; the database's log recorded when
    /// `body` throws. The test's scope (`TestResources`) stops the nodes and destroys the
    /// database when the test ends (`cluster`). Prefer `cluster` in a new test: its body stays
    /// a function (see `TestResources` on closures inside `#expect`).
    func withCluster(options: PostgresBackplaneOptions = Self.options(),
                     configure: @escaping (String, PostgresLocation, Logger, inout ServerConfiguration) -> Void = { _, _, _, _ in },
                     _ body: (PostgresTestServer, Harness, Harness) async throws -> Void) async throws {
        let (database, a, b) = try await Self.cluster(options: options, configure: configure)
        do {
            try await body(database, a, b)
        } catch {
            Issue.record("database log:\n\(database.log.suffix(2_000))")
            throw error
        }
    }

    /// Two nodes ("a", "b") on one fresh database. `configure` adds to each node's
    /// configuration (its name, the database, the logger). The test's scope (`TestResources`,
    /// which the `.realTime` trait opens) stops the nodes, then destroys the database, when the
    /// test ends, whatever it threw.
    static func cluster(options: PostgresBackplaneOptions = Self.options(),
                        configure: (String, PostgresLocation, Logger, inout ServerConfiguration) -> Void = { _, _, _, _ in })
        async throws -> (database: PostgresTestServer, a: Harness, b: Harness) {
        let (database, location, logger) = try await Self.database()
        TestResources.register { database.destroy() }   // after the nodes (stopped in reverse order)
        func node(_ name: String) async throws -> Harness {
            try await Harness.start {
                $0.backplane = PostgresChannelBackplane(location: location, node: name, options: options, logger: logger)
                configure(name, location, logger, &$0)
            }
        }
        return (database, try await node("a"), try await node("b"))
    }

    /// A fresh throwaway PostgreSQL (the caller destroys it), its location and the nodes'
    /// logger (warnings and worse).
    static func database(label: String = "test.cluster") async throws -> (PostgresTestServer, PostgresLocation, Logger) {
        let database = try await PostgresTestServer.start()
        var logger = Logger(label: label)
        logger.logLevel = .warning
        do {
            return (database, try PostgresLocation(url: database.url + "?sslmode=disable"), logger)
        } catch {
            database.destroy()
            throw error
        }
    }

    /// The backplane's options for the tests: polling and retry timers shrunk (they only make
    /// the tests quicker). The lease (2 s) is long enough that a node of a loaded machine is not
    /// declared dead, and fenced (its clients sent away), by mistake; the tests of a death
    /// shorten it. The database calls keep the release bound (5 s): on a loaded machine a
    /// PostgreSQL round trip can take over a second, and a test of a bound sets its own.
    static func options(_ change: (inout PostgresBackplaneOptions) -> Void = { _ in }) -> PostgresBackplaneOptions {
        var options = PostgresBackplaneOptions()
        options.pollInterval = .milliseconds(20)
        options.retryInterval = .milliseconds(50)
        options.leaseInterval = .milliseconds(100)
        options.lease = .seconds(2)
        change(&options)
        return options
    }

    /// A test client (`Harness.client`) whose requests and login wait as long as a loaded
    /// machine's database may take (15 s: above the nodes' 5 s call bound, so a node's refusal
    /// comes before the client gives up); a failure still ends at that bound. `configure`
    /// comes after, so a test of a client timeout sets its own.
    static func client(_ user: String, port: Int, configure: (inout RTMClientConfig) -> Void = { _ in },
                       login: Bool = true) async throws -> (RTMClient, AsyncRecorder<RTMEvent>) {
        try await Harness.client(user, port: port, configure: { config in
            config.requestTimeout = 15
            config.loginTimeout = 15
            configure(&config)
        }, login: login)
    }

    static func received(_ events: AsyncRecorder<RTMEvent>, channel: String = "room") async -> [MessageEvent] {
        await events.matching { $0.messageEvent?.channelName == channel }.compactMap(\.messageEvent)
    }

    @Test("M-2: publishes on both nodes reach subscribers on both, each once, in one order per channel, with the acknowledged numbers and epoch, one epoch")
    func crossNodeFanout() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (onA, onAEvents) = try await ClusterTests.client("sub-a", port: a.port)
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        try await onA.subscribe("room")
        try await onB.subscribe("room")
        // Two publishers on two nodes at once: their messages interleave in the channel.
        async let aliceSeqs = Self.publish(alice, prefix: "a", count: 40)
        async let bobSeqs = Self.publish(bob, prefix: "b", count: 40)
        let acknowledged = try await aliceSeqs.merging(try await bobSeqs) { first, _ in first }
        // JSON request path (storeInHistory): acknowledged after the commit too.
        let stored = try await alice.publishWithReceipt(channel: "room", message: "stored", customType: "t", storeInHistory: true)
        for events in [onAEvents, onBEvents] {
            #expect(await events.first(within: soon) { $0.messageEvent?.text == "stored" } != nil)
        }
        let seenOnA = await Self.received(onAEvents), seenOnB = await Self.received(onBEvents)
        #expect(seenOnA.count == 81 && seenOnB.count == 81)   // exactly once
        #expect(seenOnA.map(\.seq) == (1...81).map { UInt64($0) })   // one dense order, no gap
        #expect(seenOnA.map(\.text) == seenOnB.map(\.text))   // the same order on both nodes
        #expect(seenOnA.map(\.seq) == seenOnB.map(\.seq))
        for message in seenOnA where message.text != "stored" {
            // The ack carries the cluster's number and epoch.
            #expect(acknowledged[message.text ?? ""] == PublishReceipt(seq: message.seq ?? 0, epoch: message.epoch))
        }
        #expect(seenOnA.last?.seq == stored.seq && seenOnA.last?.epoch == stored.epoch && seenOnA.last?.customType == "t")
        // Each publisher's messages in its publishing order.
        for prefix in ["a", "b"] {
            #expect(seenOnB.compactMap(\.text).filter { $0.hasPrefix(prefix + "-") } == (1...40).map { "\(prefix)-\($0)" })
        }
        // One epoch and one position for the channel on both nodes.
        let positionA = a.server.hub.channelPosition(appId: Harness.appId, channel: "room")
        let positionB = b.server.hub.channelPosition(appId: Harness.appId, channel: "room")
        #expect(positionA == positionB && positionA.seq == 81 && positionA.epoch == stored.epoch)
        for client in [onA, onB, alice, bob] { await client.logout() }
    }

    @Test("M-3: a resend from the publisher's next session (the first ended after an error whose outcome it never heard) gets the first number through either node and is delivered once")
    func resendFromTheNextSession() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (onA, onAEvents) = try await ClusterTests.client("sub-a", port: a.port)
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        try await onA.subscribe("room")
        try await onB.subscribe("room")
        let publisher = UserKey(appId: Harness.appId, userId: "alice")
        // The first attempt, committed through A while alice has a session there.
        let (first, _) = try await ClusterTests.client("alice", port: a.port)
        let committed = try await Self.publishOnce(through: a)
        #expect(committed.seqs == [1])
        for events in [onAEvents, onBEvents] { #expect(await events.first(within: soon) { $0.messageEvent?.text == "once" } != nil) }
        // alice logs out: no session of hers anywhere (B learns it through the log).
        await first.logout()
        #expect(await StreamTests.eventually {
            a.server.hub.read { $0.sessions[publisher] == nil }
                && b.server.hub.read { $0.cluster.remote[publisher] == nil }
        })
        // Her next session, on B, resends: the first number, nothing stored; through A too.
        let (next, _) = try await ClusterTests.client("alice", port: b.port)
        for node in [b, a] {
            let again = try await Self.publishOnce(through: node)
            #expect(again.seqs == [1] && again.epoch == nil)
        }
        let marker = try await next.publish(channel: "room", message: "marker")
        #expect(marker == 2)
        for events in [onAEvents, onBEvents] {
            _ = await events.first(within: soon) { $0.messageEvent?.text == "marker" }
            #expect(await Self.received(events).compactMap(\.text) == ["once", "marker"])
        }
        for client in [onA, onB, next] { await client.logout() }
    }

    @Test("M-2: a subscriber that loses node A and reconnects to node B gets what it missed from B's replay, once, in order")
    func replayOnAnotherNode() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (carol, carolEvents, proxies) = try await Self.clientMovingFromAToB("carol", a: a, b: b)
        #expect(proxies.toA.openConnections == 1)
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        try await carol.subscribe("room")
        _ = try await alice.publish(channel: "room", message: "before")
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "before" } != nil)
        // Node A becomes unreachable for carol; node B is open.
        await proxies.cutA(carolEvents)
        for i in 1...5 { _ = try await alice.publish(channel: "room", message: "m\(i)") }
        proxies.openB()
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "m5" } != nil)
        #expect(proxies.toB.openConnections == 1)
        _ = try await alice.publish(channel: "room", message: "after")
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "after" } != nil)
        let seen = await Self.received(carolEvents)
        #expect(seen.compactMap(\.text) == ["before", "m1", "m2", "m3", "m4", "m5", "after"])
        #expect(seen.map(\.seq) == (1...7).map { UInt64($0) })
        #expect(await carolEvents.matching { if case .gap = $0 { true } else { false } }.isEmpty)
        await carol.logout()
        await alice.logout()
        await proxies.stop()
    }

    /// alice's publish of "once" (msgId 42) to `room` through `node`, as her connection's goes
    /// there: checked against the node's resend memory, committed, acknowledged (M-3).
    static func publishOnce(through node: Harness) async throws -> (seqs: [UInt64], epoch: String?) {
        let message = Hub.Outgoing(requestID: 1, msgId: 42, customType: nil, isText: true, payload: ByteBuffer(string: "once"))
        return try await node.server.hub.publishThroughBackplane(try #require(node.server.hub.configuration.backplane), appId: Harness.appId, channel: "room",
                                                                 publisher: UserKey(appId: Harness.appId, userId: "alice"), messages: [message])
    }

    /// A proxy before each node for one client: connected through A first (B refuses until
    /// `openB`), then moved by cutting A.
    struct NodeProxies {
        let toA: FaultProxy
        let toB: FaultProxy

        /// Node A becomes unreachable; returns once the client saw its link go.
        func cutA(_ events: AsyncRecorder<RTMEvent>) async {
            toA.setRefuseNew(true)
            toA.cutAll()
            _ = await events.first(within: soon) { $0.link?.currentState == .disconnected }
        }

        /// Node B accepts the client's reconnection.
        func openB() { toB.setRefuseNew(false) }

        func stop() async {
            try? await toA.stop()
            try? await toB.stop()
        }
    }

    /// A client of `user` whose endpoints are node A then node B, each through a proxy; its
    /// first connection goes to A.
    static func clientMovingFromAToB(_ user: String, a: Harness, b: Harness) async throws
        -> (RTMClient, AsyncRecorder<RTMEvent>, NodeProxies) {
        let proxies = NodeProxies(toA: try await FaultProxy.scoped(targetPort: a.port), toB: try await FaultProxy.scoped(targetPort: b.port))
        proxies.toB.setRefuseNew(true)
        let (client, events) = try await ClusterTests.client(user, port: a.port) {
            $0.endpoints = ["ws://127.0.0.1:\(proxies.toA.port)", "ws://127.0.0.1:\(proxies.toB.port)"]
            $0.presenceTimeout = 5
        }
        return (client, events, proxies)
    }

    @Test("M-3 across nodes: a resend of a committed client message id, on the same node, through another, or reaching the database before its node read the first attempt, is acknowledged with its first number and not stored again; one committed twice (by a node of an earlier release) is delivered once and never replayed")
    func resendNotStoredTwice() async throws {
        let (database, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        let (onA, onAEvents) = try await ClusterTests.client("sub-a", port: a.port)
        try await onB.subscribe("room")
        try await onA.subscribe("room")
        let backplane = try #require(a.server.hub.configuration.backplane)
        let first = try await Self.publishOnce(through: a)
        let again = try await Self.publishOnce(through: a)
        #expect(first.seqs == [1] && again.seqs == [1] && again.epoch == nil)
        // Through node B, once B has read the first attempt: its first number, not stored.
        _ = await onBEvents.first(within: soon) { $0.messageEvent?.text == "once" }
        let viaB = try await Self.publishOnce(through: b)
        #expect(viaB.seqs == [1] && viaB.epoch == nil)
        // A resend that reached the database before its node read the first attempt (the
        // backplane itself, no node's memory in front): the database's lookup answers with
        // the first number and stores nothing.
        let resent = try await backplane.publish([BackplanePublish(appId: Harness.appId, channel: "room", publisher: "alice", msgId: 42,
                                                                   customType: nil, isText: true, payload: ByteBuffer(string: "once"),
                                                                   millis: Hub.wallMillis)])
        #expect(resent == [BackplaneReceipt(seq: 1, epoch: first.epoch ?? "", resent: true)])
        // A node of an earlier release has no lookup: its copy is number 2, delivered to nobody.
        _ = try await database.sql("""
            WITH b AS (UPDATE rtm_channel_seq SET seq = seq + 1 WHERE app = '\(Harness.appId)' AND channel = 'room' RETURNING seq, epoch)
            INSERT INTO rtm_channel_log (app, channel, seq, epoch, publisher, node, msg_id, is_text, payload, ts, timeline)
            SELECT '\(Harness.appId)', 'room', seq, epoch, 'alice', 'old-release', 42, true, convert_to('once', 'UTF8'), \(Hub.wallMillis), rtm_timeline()
            FROM b
            """)
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let marker = try await alice.publish(channel: "room", message: "marker")
        #expect(marker == 3)
        for events in [onAEvents, onBEvents] {
            _ = await events.first(within: soon) { $0.messageEvent?.text == "marker" }
            #expect(await Self.received(events).compactMap(\.text) == ["once", "marker"])
        }
        // A replay from before both copies has one, and counts nothing as lost.
        for node in [a, b] {
            let replay = node.server.hub.replay(appId: Harness.appId, channel: "room",
                                                after: ChannelPosition(epoch: first.epoch ?? "", seq: 0))
            #expect(replay.messages.count == 2 && replay.lost == nil)
            let acrossTheCopy = node.server.hub.replay(appId: Harness.appId, channel: "room",
                                                       after: ChannelPosition(epoch: first.epoch ?? "", seq: 1))
            #expect(acrossTheCopy.messages.count == 1 && acrossTheCopy.lost == nil)
        }
        await onA.logout()
        await onB.logout()
        await alice.logout()
    }

    @Test("Two `rtm serve --postgres URL --node-id` processes on one database carry a channel message across; a bad URL and a bad --lease-seconds are refused by name")
    func serveProcesses() async throws {
        let (database, nodes) = try await RTMProcess.clusterNodes(["n1", "n2"], extraArguments: ["--lease-seconds", "5", "--log-retention-hours", "1"])   // stopped by the .realTime trait's scope
        let url = database.url + "?sslmode=disable"
        for (name, node) in zip(["n1", "n2"], nodes) {
            #expect(node.process.output.contains { $0.contains("cluster mode") && $0.contains(name) })
        }
        let (listener, events) = try await ClusterTests.client("listener", port: nodes[1].port)
        let (talker, _) = try await ClusterTests.client("talker", port: nodes[0].port)
        try await listener.subscribe("room")
        let seq = try await talker.publish(channel: "room", message: "across processes")
        let received = await events.first(within: soon) { $0.messageEvent?.text == "across processes" }
        #expect(received?.messageEvent?.seq == seq)
        await listener.logout()
        await talker.logout()

        let refused = try RTMProcess(arguments: ["serve", "--port", "0", "--postgres", "mysql://nobody@localhost/db"])
        await refused.waitUntilExit()
        #expect(refused.process.terminationStatus != 0)
        #expect(await refused.waitForLine(containing: "not a postgres:// URL", within: .seconds(2)) != nil)
        let badLease = try RTMProcess(arguments: ["serve", "--port", "0", "--postgres", url, "--lease-seconds", "0"])
        await badLease.waitUntilExit()
        #expect(badLease.process.terminationStatus != 0)
        #expect(await badLease.waitForLine(containing: "invalid setting lease-seconds from flag --lease-seconds: got 0, allowed 0.5…3600", within: .seconds(2)) != nil)
    }

    /// Publishes `count` messages one after the other; their acknowledged numbers by text.
    private static func publish(_ client: RTMClient, prefix: String, count: Int) async throws -> [String: PublishReceipt] {
        var receipts: [String: PublishReceipt] = [:]
        for i in 1...count {
            let text = "\(prefix)-\(i)"
            receipts[text] = try await client.publishWithReceipt(channel: "room", message: text)
        }
        return receipts
    }
}

extension RTMProcess {
    /// Runs `body` with the nodes of `clusterNodes`.
    static func withClusterNodes(_ names: [String], extraArguments: [String] = [],
                                 _ body: (PostgresTestServer, [(process: RTMProcess, port: Int)]) async throws -> Void) async throws {
        let (database, nodes) = try await clusterNodes(names, extraArguments: extraArguments)
        try await body(database, nodes)
    }

    /// One `rtm serve --postgres URL --node-id NAME` process per name, all on one throwaway
    /// PostgreSQL (the test app, `--publish-rate 0`, a data directory each, plus
    /// `extraArguments`), each listening. The test's scope (`TestResources`) stops them, removes
    /// their directories, then destroys the database when the test ends, whatever it threw.
    static func clusterNodes(_ names: [String], extraArguments: [String] = []) async throws
        -> (database: PostgresTestServer, nodes: [(process: RTMProcess, port: Int)]) {
        let database = try await PostgresTestServer.start()
        TestResources.register { database.destroy() }   // last: after every node stopped
        var nodes: [(process: RTMProcess, port: Int)] = []
        for name in names {
            let port = try LoopbackPort.free()
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-cluster-\(UUID().uuidString)").path
            TestResources.register { try? FileManager.default.removeItem(atPath: dir) }   // after its process stopped
            let process = try RTMProcess(arguments: [
                "serve", "--port", "\(port)", "--data-dir", dir, "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
                "--publish-rate", "0", "--postgres", database.url + "?sslmode=disable", "--node-id", name,
            ] + extraArguments)
            nodes.append((process, port))
            let listening = await process.waitForLine(containing: "listening", within: processStart)
            try #require(listening != nil, "\(process.output)")
        }
        return (database, nodes)
    }
}
