import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// User messages across nodes over a real PostgreSQL (started by
/// the test), two real servers on loopback sharing it, real SDK clients.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterUserMessageTests {
    private struct Node {
        let harness: Harness
        let store: PostgresUserMessageStore
        var port: Int { harness.port }
    }

    /// Two nodes (channel backplane and user-message store) on one fresh database. The test's
    /// scope (`TestResources`) stops them, then destroys the database, when the test ends.
    private static func cluster() async throws -> (a: Node, b: Node) {
        let (database, location, logger) = try await ClusterTests.database(label: "test.cluster.user")
        TestResources.register { database.destroy() }   // after the nodes (stopped in reverse order)
        func node(_ name: String) async throws -> Node {
            let store = try await PostgresUserMessageStore.open(location: location, node: name, pollInterval: .milliseconds(50), logger: logger)
            var config = Harness.serverConfig()
            config.backplane = PostgresChannelBackplane(location: location, node: name, pollInterval: .milliseconds(20), logger: logger)
            let server = try RTMServer(configuration: config, store: store, logger: logger)
            let port = try await server.start()
            TestResources.register { try? await server.shutdown() }
            return Node(harness: Harness(server: server, port: port), store: store)
        }
        return (try await node("a"), try await node("b"))
    }

    private static func userMessages(_ events: AsyncRecorder<RTMEvent>) async -> [MessageEvent] {
        await events.matching { $0.messageEvent?.channelType == .user }.compactMap(\.messageEvent)
    }

    /// A store call (blocking) off the cooperative pool.
    private static func waiting(_ store: PostgresUserMessageStore, for user: String) async throws -> [StoredUserMessage] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try store.pending(appId: Harness.appId, receiver: user, notBefore: 0) })
            }
        }
    }

    @Test("M-1: alice on node A sends to bob on node B: stored before her reply (receiverOnline: bob is logged in on B), delivered once in order, acked, not re-delivered after bob moves to A")
    func crossNodeDelivery() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        // Stored before the reply: another node reads it at once.
        _ = try await alice.publish(toUser: "carol", message: "for later")
        #expect(try await Self.waiting(b.store, for: "carol").map(\.text) == ["for later"])

        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        var receipts: [UserMessageReceipt] = []
        // Bob's login is known on node A before A answers a send: receiverOnline is the cluster's.
        #expect(await waitUntil { a.harness.server.hub.read { $0.cluster.remote[UserKey(appId: Harness.appId, userId: "bob")] != nil } })
        for i in 1...20 { receipts.append(try await alice.publish(toUser: "bob", message: "m\(i)")) }
        #expect(receipts.allSatisfy { $0.stored && $0.receiverOnline })
        #expect(receipts.map(\.messageId) == (1...20).map { UInt64($0) })   // per receiver, dense
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "m20" } != nil)
        let seen = await Self.userMessages(bobEvents)
        #expect(seen.compactMap(\.text) == (1...20).map { "m\($0)" })   // once each, in order
        #expect(seen.allSatisfy { $0.publisher == "alice" })
        // Bob's acks (on B) delete them in the database.
        #expect(try await eventually(within: soon, every: .milliseconds(20)) { try await Self.waiting(a.store, for: "bob").isEmpty })
        // Bob moves to node A: nothing comes again, only what is new.
        await bob.logout()
        let (bobOnA, bobOnAEvents) = try await ClusterTests.client("bob", port: a.port)
        _ = try await alice.publish(toUser: "bob", message: "new")
        #expect(await bobOnAEvents.first(within: soon) { $0.messageEvent?.text == "new" } != nil)
        #expect(await Self.userMessages(bobOnAEvents).compactMap(\.text) == ["new"])
        await bobOnA.logout()
        await alice.logout()
    }

    @Test("M-1: messages for an offline receiver wait in PostgreSQL; it logs in on the other node and gets them once, in order")
    func offlineReceiverLogsInElsewhere() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        for i in 1...3 {
            let receipt = try await alice.publish(toUser: "bob", message: "w\(i)")
            #expect(receipt.stored && !receipt.receiverOnline)
        }
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "w3" } != nil)
        _ = try await alice.publish(toUser: "bob", message: "live")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "live" } != nil)
        #expect(await Self.userMessages(bobEvents).compactMap(\.text) == ["w1", "w2", "w3", "live"])
        await bob.logout()
        await alice.logout()
    }

    @Test("M-3: a sendUser resent through the other node (same msgId after a reconnection) gets the first receipt and is delivered once")
    func resendThroughOtherNode() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        let first = try await RawConnection.open(port: a.port)
        #expect(await first.login("alice")?.type == .ok)
        first.send(Frame(type: .sendUser, id: 10, userId: "bob", text: "once", msgId: 555))
        let receipt = await first.reply(10)
        #expect(receipt?.type == .ok && receipt?.stored == true && (receipt?.msgId ?? 0) > 0)
        first.channel.close(promise: nil)
        // The reply was lost (as far as the client knows): it reconnects to node B and sends
        // the same message with the same msgId, then a new one.
        let again = try await RawConnection.open(port: b.port)
        #expect(await again.login("alice")?.type == .ok)
        again.send(Frame(type: .sendUser, id: 11, userId: "bob", text: "once", msgId: 555))
        let repeated = await again.reply(11)
        #expect(repeated?.type == .ok && repeated?.msgId == receipt?.msgId)
        again.send(Frame(type: .sendUser, id: 12, userId: "bob", text: "after", msgId: 556))
        #expect(await again.reply(12)?.msgId == (receipt?.msgId ?? 0) + 1)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "after" } != nil)
        #expect(await Self.userMessages(bobEvents).compactMap(\.text) == ["once", "after"])
        #expect(try await Self.waiting(a.store, for: "bob").compactMap(\.text).filter { $0 == "once" }.count <= 1)
        again.channel.close(promise: nil)
        await bob.logout()
    }

    @Test("M-1: senders on both nodes write to one receiver at once: it gets every message once, in its id order")
    func sendersOnBothNodes() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (dave, _) = try await ClusterTests.client("dave", port: b.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        async let fromAlice = Self.send(alice, prefix: "a", count: 30)
        async let fromDave = Self.send(dave, prefix: "d", count: 30)
        let ids = try await fromAlice + fromDave
        #expect(Set(ids) == Set((1...60).map { UInt64($0) }))
        _ = await eventually(within: soon, every: .milliseconds(20)) { await Self.userMessages(bobEvents).count >= 60 }
        let seen = await Self.userMessages(bobEvents)
        #expect(seen.compactMap(\.seq) == (1...60).map { UInt64($0) })   // every id, once, in order
        for prefix in ["a", "d"] {
            #expect(seen.compactMap(\.text).filter { $0.hasPrefix(prefix) } == (1...30).map { "\(prefix)\($0)" })
        }
        for client in [alice, dave, bob] { await client.logout() }
    }

    @Test("M-1: node A stopped right after its replies: nothing acknowledged to alice is lost (bob online on B, and bob logging in later)")
    func senderNodeStopped() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        for i in 1...10 {
            _ = try await alice.publish(toUser: "bob", message: "s\(i)")
            _ = try await alice.publish(toUser: "erin", message: "e\(i)")
        }
        await a.harness.stop()
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "s10" } != nil)
        #expect(await Self.userMessages(bobEvents).compactMap(\.text) == (1...10).map { "s\($0)" })
        let (erin, erinEvents) = try await ClusterTests.client("erin", port: b.port)
        #expect(await erinEvents.first(within: soon) { $0.messageEvent?.text == "e10" } != nil)
        #expect(await Self.userMessages(erinEvents).compactMap(\.text) == (1...10).map { "e\($0)" })
        for client in [alice, bob, erin] { await client.logout() }
    }

    @Test("M-1: `rtm serve --postgres` processes: a node killed with SIGKILL right after its replies loses nothing acknowledged; the receivers get it on the other node")
    func killedNodeProcess() async throws {
        let (_, nodes) = try await RTMProcess.clusterNodes(["n1", "n2"])   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: nodes[0].port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: nodes[1].port)
        for i in 1...10 {
            _ = try await alice.publish(toUser: "bob", message: "k\(i)")
            _ = try await alice.publish(toUser: "erin", message: "e\(i)")
        }
        await nodes[0].process.kill9()
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "k10" } != nil)
        #expect(await Self.userMessages(bobEvents).compactMap(\.text) == (1...10).map { "k\($0)" })
        let (erin, erinEvents) = try await ClusterTests.client("erin", port: nodes[1].port)
        #expect(await erinEvents.first(within: soon) { $0.messageEvent?.text == "e10" } != nil)
        #expect(await Self.userMessages(erinEvents).compactMap(\.text) == (1...10).map { "e\($0)" })
        for client in [alice, bob, erin] { await client.logout() }
    }

    private static func send(_ client: RTMClient, prefix: String, count: Int) async throws -> [UInt64] {
        var ids: [UInt64] = []
        for i in 1...count { ids.append(try await client.publish(toUser: "bob", message: "\(prefix)\(i)").messageId) }
        return ids
    }
}
