import Foundation
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// What users run, end to end: real `rtm serve` processes (single node on its embedded store,
/// and two nodes on one PostgreSQL) with SDK clients over real sockets. The suite runs with the
/// rest against the debug build, and CI runs it once more against the release binary the
/// README tells users to build (`RTM_BINARY`, see `RTMProcess.binary`): the optimiser must not
/// change what users see.
@Suite(.realTime, .serialized)
struct EndToEndProcessTests {
    /// A client of an `rtm serve` process, logged in. A debug server process started (or
    /// restarted) a moment ago can take seconds to answer its first login on a loaded machine:
    /// the login deadline here (10 s) only bounds a failure, it is not the rule under test.
    static func client(_ user: String, port: Int) async throws -> (RTMClient, AsyncRecorder<RTMEvent>) {
        try await Harness.client(user, port: port) { $0.loginTimeout = 10 }
    }

    // MARK: single node

    @Test("M-1, M-2, C-6: one rtm serve process: a user message (online and offline receiver), a channel message, a kick, and a restart that loses nothing acknowledged")
    func singleNode() async throws {
        let server = try await DurableServer()
        let (alice, _) = try await Self.client("alice", port: server.port)
        let (bob, bobEvents) = try await Self.client("bob", port: server.port)
        try await bob.subscribe("room")

        // A user message to an online receiver, and one to a receiver never logged in.
        let online = try await alice.publish(toUser: "bob", message: "to-bob")
        #expect(online.receiverOnline)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "to-bob" } != nil)
        _ = try await alice.publish(toUser: "erin", message: "to-erin")

        // A channel message.
        try await alice.publish(channel: "room", message: "in-room")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "in-room" } != nil)

        // C-6: bob logs in again elsewhere; the first session is told why it ended.
        let (bob2, _) = try await Self.client("bob", port: server.port)
        let kicked = await bobEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(kicked?.link?.reasonCode == .sameUidLogin)

        // kill -9 and start again on the same data directory: the stored message waits.
        try await server.killAndRestart()
        let (erin, erinEvents) = try await Self.client("erin", port: server.port)
        #expect(await erinEvents.first(within: soon) { $0.messageEvent?.text == "to-erin" } != nil)
        // The survivors came back by themselves and still work.
        let again = try await alice.publish(toUser: "bob", message: "after-restart")
        #expect(again.messageId > 0)
        for client in [alice, bob, bob2, erin] { await client.logout() }
    }

    // MARK: cluster

    @Test("M-1 across nodes: one user message from a sender on node 1 to a receiver on node 2 is answered at once, delivered once, and both nodes live on",
          .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
    func clusterOneUserMessage() async throws {
        let (_, nodes) = try await RTMProcess.clusterNodes(["n1", "n2"])   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: nodes[0].port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: nodes[1].port)
        let started = ContinuousClock.now
        let receipt = try await alice.publish(toUser: "bob", message: "one")
        // The reply follows the commit: no database call timeout (10 s) in between; 8 s leaves
        // a loaded machine's commit its seconds.
        #expect(ContinuousClock.now - started < .seconds(8), "the reply took \(ContinuousClock.now - started)")
        #expect(receipt.receiverOnline)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "one" } != nil)
        // Both processes are alive and still answer (the crash came after the reply's commit).
        try await Task.sleep(for: .milliseconds(300))   // a window for a late crash, not a wait for a result
        for node in nodes { #expect(node.process.process.isRunning, "\(node.process.output.suffix(30).joined(separator: "\n"))") }
        _ = try await bob.publish(toUser: "alice", message: "back")
        _ = try await alice.publish(toUser: "bob", message: "two")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "two" } != nil)
        #expect(await bobEvents.matching { $0.messageEvent?.text == "one" }.count == 1)
        for client in [alice, bob] { await client.logout() }
    }

    @Test("M-2, C-6 across nodes: a channel message crosses nodes, a login on node 2 kicks the same user on node 1, and a node restarted with SIGTERM serves again",
          .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
    func clusterChannelKickRestart() async throws {
        let (database, nodes) = try await RTMProcess.clusterNodes(["n1", "n2"])   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: nodes[0].port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: nodes[1].port)
        try await bob.subscribe("room")
        try await alice.publish(channel: "room", message: "across")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "across" } != nil)

        let (alice2, _) = try await ClusterTests.client("alice", port: nodes[1].port)
        let kicked = await aliceEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(kicked?.link?.reasonCode == .sameUidLogin)

        // Node 1 stopped (SIGTERM) and started again on its port: clients reach it again.
        await nodes[0].process.stopped()
        let restarted = try RTMProcess(arguments: [
            "serve", "--port", "\(nodes[0].port)", "--data-dir",
            FileManager.default.temporaryDirectory.appendingPathComponent("rtm-e2e-\(UUID().uuidString)").path,
            "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
            "--publish-rate", "0", "--postgres", database.url + "?sslmode=disable", "--node-id", "n1",
        ])
        #expect(await restarted.waitForLine(containing: "listening", within: processStart) != nil, "\(restarted.output)")
        let (carol, _) = try await ClusterTests.client("carol", port: nodes[0].port)
        try await carol.publish(channel: "room", message: "after-restart")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "after-restart" } != nil)
        _ = try await carol.publish(toUser: "bob", message: "user-after-restart")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "user-after-restart" } != nil)
        for client in [alice2, bob, carol] { await client.logout() }
    }
}
