import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// A database failover under a cluster: a real primary and a real streaming replica
/// (`pg_basebackup -R -X stream`), two nodes reaching the primary through a stable address (a
/// TCP forwarder standing in for a virtual IP), the primary killed with `SIGKILL`, the replica
/// promoted and the address moved to it. Real SDK clients publish, subscribe, send and receive
/// throughout (SPEC M-1, M-2).
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterFailoverTests {
    private struct Node {
        let harness: Harness
        var port: Int { harness.port }
    }

    /// What a subscriber saw, in order.
    private enum Seen: Equatable {
        case message(String, UInt64)
        case gap(Int?)
    }

    private struct Cluster {
        let primary: PostgresTestServer
        let replica: PostgresTestServer
        let address: FaultProxy
        let a: Node
        let b: Node

        /// `kill -9` of the primary, the replica (started again if it was stopped, once the
        /// primary is dead: it cannot catch up) promoted, the address moved to it.
        func failOver(startingReplica: Bool = false) async throws {
            try primary.crash()
            if startingReplica { try await replica.start() }
            try await replica.promote()
            address.retarget(to: replica.port)
            address.cutAll()
        }
    }

    /// A primary (synchronous: with a synchronous standby, `ANY 1 (*)`), its replica, and two
    /// nodes through one address. The test's scope (`TestResources`) stops the nodes and the
    /// address, then destroys the databases, when the test ends. The stores' calls keep the
    /// release bound (5 s): on a loaded machine a round trip can take over a second.
    private static func cluster(synchronous: Bool) async throws -> Cluster {
        let primary = try await PostgresTestServer.start()
        TestResources.register { primary.destroy() }
        if synchronous { try await primary.requireSynchronousStandby() }
        let replica = try await primary.startReplica()
        TestResources.register { replica.destroy() }
        let address = try await FaultProxy.scoped(targetPort: primary.port)
        TestResources.register { try? await address.stop() }
        let location = try PostgresLocation(url: "postgres://postgres@127.0.0.1:\(address.port)/postgres?sslmode=disable")
        var logger = Logger(label: "test.failover")
        logger.logLevel = ProcessInfo.processInfo.environment["RTM_TEST_LOG"] != nil ? .info : .critical
        func node(_ name: String) async throws -> Node {
            let store = try await PostgresUserMessageStore.open(location: location, node: name, pollInterval: .milliseconds(50),
                                                                retryInterval: .milliseconds(50), callTimeout: .seconds(5), logger: logger)
            var config = Harness.serverConfig()
            config.backplane = PostgresChannelBackplane(location: location, node: name, options: ClusterTests.options(), logger: logger)
            let server = try RTMServer(configuration: config, store: store, logger: logger)
            let port = try await server.start()
            TestResources.register { try? await server.shutdown() }
            return Node(harness: Harness(server: server, port: port))
        }
        return Cluster(primary: primary, replica: replica, address: address, a: try await node("a"), b: try await node("b"))
    }

    /// Retries `attempt` until it succeeds (refusals while the database is away), for at most
    /// 30 s; nil if it never did. Each attempt is a new publish (the SDK resends a refused one
    /// with its msgId only until its request timeout), so an attempt refused with an unknown
    /// outcome may have been stored too: then `text` goes into `retried`, and may be delivered
    /// more than once, each time with its own number.
    private static func acknowledged<T>(_ text: String, retried: inout Set<String>, _ attempt: () async throws -> T) async -> T? {
        await firstValue(within: .seconds(30), every: .milliseconds(50)) { () async -> T? in
            if let value = try? await attempt() { return value }
            retried.insert(text)
            return nil
        }
    }

    /// Each text once, in the order of its first appearance.
    private static func firstOccurrences(_ texts: [String]) -> [String] {
        var seen: Set<String> = []
        return texts.filter { seen.insert($0).inserted }
    }

    private static func seen(_ events: AsyncRecorder<RTMEvent>) async -> [Seen] {
        await events.all.compactMap { event -> Seen? in
            switch event {
            case .message(let m) where m.channelType == .message: .message(m.text ?? "", m.seq ?? 0)
            case .gap(let g): .gap(g.lostCount)
            default: nil
            }
        }
    }

    /// The channel messages a subscriber saw, split at the gaps of unknown size (new epochs):
    /// within each epoch every number names one message, numbers increase by one, and no text
    /// comes twice but those published again after a refusal (`retried`).
    private static func checkEpochs(_ seen: [Seen], retried: Set<String> = []) -> [[(String, UInt64)]] {
        var epochs: [[(String, UInt64)]] = [[]]
        for item in seen {
            switch item {
            case .message(let text, let seq): epochs[epochs.count - 1].append((text, seq))
            case .gap(nil): epochs.append([])
            case .gap: Issue.record("a gap of known size: \(item)")
            }
        }
        for epoch in epochs where !epoch.isEmpty {
            let seqs = epoch.map(\.1)
            // Checked pair by pair: no range or sum built from a received number that could trap.
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $1 == $0 &+ 1 }, "numbers in one epoch: \(seqs)")
            let once = epoch.map(\.0).filter { !retried.contains($0) }
            #expect(Set(once).count == once.count, "a message twice: \(epoch.map(\.0))")
        }
        return epochs
    }

    @Test("M-1, M-2: asynchronous replication, the replica behind at the kill -9: no number names two messages in one epoch (the acks' epochs tell the two epochs' numbers apart), the lost tail is announced (a gap of unknown size, a new mailbox epoch), nothing acknowledged after the failover is lost")
    func asynchronousFailover() async throws {
        let cluster = try await Self.cluster(synchronous: false)   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: cluster.a.port)
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: cluster.b.port)
        try await carol.subscribe("room")
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: cluster.b.port)
        #expect(await waitUntil { cluster.a.harness.server.hub.read { $0.cluster.remote[UserKey(appId: Harness.appId, userId: "bob")] != nil } })

        // Replicated: five publishes, three user messages.
        var kept: [PublishReceipt] = []
        for i in 1...5 { kept.append(try await alice.publishWithReceipt(channel: "room", message: "kept-\(i)")) }
        for i in 1...3 { _ = try await alice.publish(toUser: "bob", message: "u-kept-\(i)") }
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "kept-5" } != nil)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "u-kept-3" } != nil)
        #expect(await eventually(within: .seconds(10)) {
            let published = try? await cluster.replica.sql("SELECT count(*) FROM rtm_channel_log WHERE channel = 'room'")
            let sent = try? await cluster.replica.sql("SELECT max(seq) FROM rtm_user_seq WHERE receiver = 'bob'")
            return published?.trimmingCharacters(in: .whitespacesAndNewlines) == "5" && sent?.trimmingCharacters(in: .whitespacesAndNewlines) == "3"
        })

        // The replica falls behind (stopped): what is acknowledged now lives on the primary only.
        try await cluster.replica.stop()
        var lost: [PublishReceipt] = []
        for i in 1...5 { lost.append(try await alice.publishWithReceipt(channel: "room", message: "lost-\(i)")) }
        var lostIds: [UInt64] = []
        for i in 1...3 { lostIds.append(try await alice.publish(toUser: "bob", message: "u-lost-\(i)").messageId) }
        #expect(lost.map(\.seq) == [6, 7, 8, 9, 10])
        #expect(kept.first?.epoch != nil && (kept + lost).allSatisfy { $0.epoch == kept.first?.epoch })
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "lost-5" } != nil)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "u-lost-3" } != nil)

        try await cluster.failOver(startingReplica: true)

        // After the failover: every acknowledged publish and user message is delivered.
        var after: [String: PublishReceipt] = [:]
        var retried: Set<String> = []
        for i in 1...5 {
            let text = "after-\(i)"
            after[text] = await Self.acknowledged(text, retried: &retried) { try await alice.publishWithReceipt(channel: "room", message: text) }
            #expect(after[text] != nil, "\(text) never acknowledged")
        }
        var afterIds: [String: UInt64] = [:]
        for i in 1...3 {
            let text = "u-after-\(i)"
            afterIds[text] = await Self.acknowledged(text, retried: &retried) { try await alice.publish(toUser: "bob", message: text).messageId }
        }
        #expect(await carolEvents.first(within: .seconds(10)) { $0.messageEvent?.text == "after-5" } != nil)
        #expect(await bobEvents.first(within: .seconds(10)) { $0.messageEvent?.text == "u-after-3" } != nil)

        // The subscriber: the old epoch (kept and lost messages, 1-10), a gap of unknown
        // size, then the new epoch from 1; each acknowledged number is the one delivered.
        let epochs = Self.checkEpochs(await Self.seen(carolEvents), retried: retried)
        #expect(epochs.count == 2)
        #expect(epochs.first?.map(\.0) == (1...5).map { "kept-\($0)" } + (1...5).map { "lost-\($0)" })
        let delivered = epochs.last ?? []
        for (text, receipt) in after {
            #expect(delivered.contains { $0 == (text, receipt.seq) },
                    "\(text): acknowledged as \(receipt.seq), delivered as \(delivered.filter { $0.0 == text }.map(\.1))")
        }
        #expect(epochs.last?.first?.1 == 1)
        // The numbers start again at 1 in the new epoch: the acks' epochs tell them apart,
        // each the epoch its message was delivered with.
        #expect(Set(after.values.map(\.epoch)).count == 1 && after.values.allSatisfy { $0.epoch != nil && $0.epoch != kept.first?.epoch })
        let carolMessages = await carolEvents.all.compactMap(\.messageEvent)
        let receipts = after.map { ($0.key, $0.value) } + zip((1...5).map { "kept-\($0)" } + (1...5).map { "lost-\($0)" }, kept + lost).map { ($0, $1) }
        for (text, receipt) in receipts {
            #expect(carolMessages.contains { $0.text == text && $0.seq == receipt.seq && $0.epoch == receipt.epoch }, "\(text): \(receipt)")
        }

        // The receiver: told of the new mailbox epoch once, before its first message; the
        // new ids are above every earlier one, none given twice.
        let userEvents = await bobEvents.all.compactMap { event -> String? in
            switch event {
            case .message(let m) where m.channelType == .user: "\(m.text ?? "")#\(m.seq ?? 0)"
            case .userMessageEpochChanged: "epoch"
            default: nil
            }
        }
        let texts = userEvents.map { $0.split(separator: "#").first.map(String.init) ?? $0 }
        #expect(Array(texts.prefix(7)) == (1...3).map { "u-kept-\($0)" } + (1...3).map { "u-lost-\($0)" } + ["epoch"], "\(userEvents)")
        #expect(Set(texts.dropFirst(7)) == Set(afterIds.keys), "\(userEvents)")
        #expect(afterIds.values.allSatisfy { $0 > 1 << 32 }, "\(afterIds)")
        #expect(lostIds == [4, 5, 6])
        for client in [alice, bob, carol] { await client.logout() }
    }

    @Test("M-1, M-2: synchronous replication (ANY 1): a kill -9 of the primary loses nothing acknowledged; a receiver that was offline gets every message stored for it")
    func synchronousFailover() async throws {
        let cluster = try await Self.cluster(synchronous: true)   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: cluster.a.port)
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: cluster.b.port)
        try await carol.subscribe("room")
        for i in 1...5 { _ = try await alice.publish(channel: "room", message: "before-\(i)") }
        for i in 1...3 { _ = try await alice.publish(toUser: "dave", message: "d-\(i)") }   // dave is offline
        try await cluster.failOver()
        var retried: Set<String> = []
        for i in 1...3 {
            let text = "after-\(i)"
            #expect(await Self.acknowledged(text, retried: &retried) { try await alice.publish(channel: "room", message: text) } != nil)
        }
        #expect(await carolEvents.first(within: .seconds(10)) { $0.messageEvent?.text == "after-3" } != nil)
        let epochs = Self.checkEpochs(await Self.seen(carolEvents), retried: retried)
        #expect(epochs.map { Self.firstOccurrences($0.map(\.0)) } == [(1...5).map { "before-\($0)" }, (1...3).map { "after-\($0)" }])
        // Everything acknowledged before the kill is in the new primary's log.
        #expect(try await cluster.replica.sql("SELECT count(*) FROM rtm_channel_log WHERE convert_from(payload, 'UTF8') LIKE 'before-%'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "5")
        let (dave, daveEvents) = try await ClusterTests.client("dave", port: cluster.b.port)
        #expect(await daveEvents.first(within: .seconds(10)) { $0.messageEvent?.text == "d-3" } != nil)
        #expect(await daveEvents.matching { $0.messageEvent?.channelType == .user }.compactMap(\.messageEvent?.text) == ["d-1", "d-2", "d-3"])
        for client in [alice, carol, dave] { await client.logout() }
    }
}
