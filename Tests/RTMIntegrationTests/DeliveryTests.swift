import Foundation
import NIOConcurrencyHelpers
import RTMProtocol
@testable import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Nothing lost, nothing twice (SPEC M-1, M-2, M-3), end to end over real sockets.
@Suite(.realTime, .serialized)
struct DeliveryTests {
    static func texts(_ events: AsyncRecorder<RTMEvent>, user: Bool = false) async -> [String] {
        await events.matching { ($0.messageEvent?.channelType == .user) == user && $0.messageEvent != nil }
            .compactMap { $0.messageEvent?.text }
    }

    @Test("M-1: a user message written into a dead link arrives exactly once after the reconnect")
    func userMessageSurvivesDeadLink() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: proxy.port)
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        proxy.setMode(.blackhole)   // bob's link is dead, but nobody has noticed yet
        let receipt = try await alice.publish(toUser: "bob", message: "into the void")
        #expect(receipt.stored)
        _ = await bobEvents.next(within: soon) { $0.link?.currentState == .disconnected }
        proxy.setMode(.pass)
        proxy.cutAll()
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "into the void" } != nil)
        try await alice.publish(toUser: "bob", message: "marker")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "marker" } != nil)
        #expect(await Self.texts(bobEvents, user: true) == ["into the void", "marker"])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("M-1: messages for an offline user wait, arrive in order when it logs in, and are not sent again once acknowledged")
    func offlineReceiverGetsMessagesInOrder() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        for i in 1...5 {
            let receipt = try await alice.publish(toUser: "bob", message: "m\(i)")
            #expect(receipt.receiverOnline == false)
        }
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "m5" }
        #expect(await Self.texts(bobEvents, user: true) == ["m1", "m2", "m3", "m4", "m5"])
        // Acknowledged: a later login of bob gets nothing again.
        try await alice.publish(toUser: "bob", message: "marker")
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "marker" }
        await bob.logout()
        let (again, againEvents) = try await Harness.client("bob", port: harness.port)
        try await alice.publish(toUser: "bob", message: "marker2")
        _ = await againEvents.first(within: soon) { $0.messageEvent?.text == "marker2" }
        let texts = await Self.texts(againEvents, user: true)
        #expect(texts == ["marker2"])
        await again.logout()
        await alice.logout()
    }

    @Test("M-1: past the per-receiver cap the oldest are dropped and the receiver is told how many")
    func capDropsOldestAndTells() async throws {
        let harness = try await Harness.start { $0.userMessageCap = 3 }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        for i in 1...5 { try await alice.publish(toUser: "bob", message: "m\(i)") }
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let dropped = await bobEvents.first(within: soon) { if case .userMessagesDropped = $0 { true } else { false } }
        if case .userMessagesDropped(let count)? = dropped { #expect(count == 2) } else { Issue.record("no dropped notice") }
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "m5" }
        #expect(await Self.texts(bobEvents, user: true) == ["m3", "m4", "m5"])
        await bob.logout()
        await alice.logout()
    }

    @Test("M-1: a user message survives the server being killed with SIGKILL and restarted on the same data directory")
    func userMessageSurvivesKill9() async throws {
        let server = try await DurableServer()
        let port = server.port
        let (alice, _) = try await Harness.client("alice", port: port)
        let receipt = try await alice.publish(toUser: "bob", message: "durable")
        #expect(receipt.stored && !receipt.receiverOnline)
        try await server.killAndRestart()   // right after the acknowledgement: no shutdown code runs
        await alice.logout()
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "durable" } != nil)
        let (alice2, _) = try await Harness.client("alice", port: port)
        try await alice2.publish(toUser: "bob", message: "marker")
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "marker" }
        #expect(await Self.texts(bobEvents, user: true) == ["durable", "marker"])
        await bob.logout()
        await alice2.logout()
    }

    @Test("M-2: 40 messages during a cut longer than the window: at most 32 from the last window are replayed, the rest reported as a gap")
    func channelReplayWithGap() async throws {
        // Scaled: a 300 ms window for the 30 s one, a ~350 ms cut for 35 s.
        let harness = try await Harness.start { $0.channelReplayWindow = .milliseconds(300) }
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port) { $0.presenceTimeout = 5 }
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.subscribe("room")
        try await bob.publish(channel: "room", message: "before")
        _ = await aliceEvents.first(within: soon) { $0.messageEvent?.text == "before" }
        proxy.setRefuseNew(true)
        proxy.cutAll()
        let start = ContinuousClock.now
        for i in 1...40 {
            try await bob.publish(channel: "room", message: "m\(i)")
            try await Task.sleep(until: start + .milliseconds(9 * i))   // pacing: spread over ~360 ms of outage
        }
        proxy.setRefuseNew(false)
        #expect(await aliceEvents.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        try await bob.publish(channel: "room", message: "after")
        _ = await aliceEvents.first(within: soon) { $0.messageEvent?.text == "after" }
        let received = await Self.texts(aliceEvents).filter { $0.hasPrefix("m") }.map { Int($0.dropFirst())! }
        let gap = await aliceEvents.first(within: .zero) { if case .gap = $0 { true } else { false } }
        guard case .gap(let event)? = gap else { Issue.record("no gap reported: \(received)"); return }
        let lost = try #require(event.lostCount)
        #expect(received.count <= 32)
        #expect(lost + received.count == 40)           // nothing silently skipped
        #expect(received == Array(stride(from: lost + 1, through: 40, by: 1)))   // the newest, in order, each once (no range trap when all were lost)
        #expect(await Self.texts(aliceEvents).last == "after")
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("M-2: a short cut loses nothing: the messages published meanwhile are replayed, in order, once")
    func shortCutReplaysEverything() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.subscribe("room")
        proxy.setRefuseNew(true)
        proxy.cutAll()
        _ = await aliceEvents.first(within: soon) { $0.link?.currentState == .disconnected }
        for i in 1...10 { try await bob.publish(channel: "room", message: "m\(i)") }
        proxy.setRefuseNew(false)
        _ = await aliceEvents.first(within: soon) { $0.messageEvent?.text == "m10" }
        try await bob.publish(channel: "room", message: "after")
        _ = await aliceEvents.first(within: soon) { $0.messageEvent?.text == "after" }
        #expect(await Self.texts(aliceEvents) == (1...10).map { "m\($0)" } + ["after"])
        #expect(await aliceEvents.matching { if case .gap = $0 { true } else { false } }.isEmpty)
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("M-3: a publish whose acknowledgement was lost is sent again after the reconnect and delivered once")
    func retriedPublishDeliveredOnce() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        // The request timeout only bounds a failure here (the rule is the resend, not its time):
        // 10 s, since the loss, the reconnection and the resend took more than 2 s under load.
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port, configure: { $0.requestTimeout = 10 })
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        try await alice.subscribe("room")
        proxy.setMode(.blackholeDownstream)   // the publish reaches the server; its ack does not come back
        async let seq = alice.publish(channel: "room", message: "once")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "once" } != nil)
        _ = await aliceEvents.first(within: soon) { $0.link?.currentState == .disconnected }
        proxy.setMode(.pass)
        proxy.cutAll()
        let acknowledged = try await seq   // answered after the resend
        try await bob.publish(channel: "room", message: "marker")
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "marker" }
        #expect(await Self.texts(bobEvents) == ["once", "marker"])
        let first = await bobEvents.first(within: .zero) { $0.messageEvent?.text == "once" }
        #expect(first?.messageEvent?.seq == acknowledged)
        // And a user message resent the same way is stored once.
        proxy.setMode(.blackholeDownstream)
        async let receipt = alice.publish(toUser: "bob", message: "direct")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "direct" } != nil)
        proxy.setMode(.pass)
        proxy.cutAll()
        _ = try await receipt
        try await alice.publish(toUser: "bob", message: "direct-marker")
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "direct-marker" }
        #expect(await Self.texts(bobEvents, user: true) == ["direct", "direct-marker"])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("M-3: with concurrent publishers each one's messages arrive in publishing order, each once")
    func orderUnderConcurrentPublishers() async throws {
        let harness = try await Harness.start()
        let (reader, events) = try await Harness.client("reader", port: harness.port)
        try await reader.subscribe("room")
        var publishers: [RTMClient] = []
        for name in ["p1", "p2", "p3"] { publishers.append(try await Harness.client(name, port: harness.port).0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for publisher in publishers {
                group.addTask { for i in 0..<50 { try await publisher.publish(channel: "room", message: "\(i)") } }
            }
            try await group.waitForAll()
        }
        _ = await waitUntil { true }
        for name in ["p1", "p2", "p3"] {
            _ = await events.first(within: soon) { $0.messageEvent?.publisher == name && $0.messageEvent?.text == "49" }
            let got = await events.matching { $0.messageEvent?.publisher == name }.compactMap { $0.messageEvent?.text }.map { Int($0)! }
            #expect(got == Array(0..<50), "\(name): \(got)")
        }
        let seqs = await events.matching { $0.messageEvent != nil }.compactMap { $0.messageEvent?.seq }
        #expect(seqs == Array(1...150).map(UInt64.init))   // one order for all, no holes, no repeats
        for publisher in publishers { await publisher.logout() }
        await reader.logout()
    }
}

extension DeliveryTests {
    @Test("M-3, long uptimes: a publisher's remembered message ids (channel and user messages) go with its session (channel ids publishResendWindow later), so 30 users that publish and leave leave nothing behind")
    func dedupMemoryEndsWithSession() async throws {
        let harness = try await Harness.start { $0.publishResendWindow = .milliseconds(300) }
        let (stay, _) = try await Harness.client("stays", port: harness.port)
        _ = try await stay.publish(channel: "room", message: "still here")
        for i in 0..<30 {
            let (client, _) = try await Harness.client("visitor\(i)", port: harness.port)
            _ = try await client.publish(channel: "room", message: "hello")
            _ = try await client.publish(toUser: "stays", message: "hi")
            await client.logout()
        }
        let hub = harness.server.hub
        func remembered() -> Set<String> { hub.read { Set($0.resends.ids.keys.map(\.userId)) } }
        // The server ends a session when it reads the logout, which may come after the SDK's
        // `logout()` returns: awaited briefly. Within the window the last visitor's channel ids
        // are still there (a resend from its next session is recognised).
        _ = await eventually(within: soon, every: .milliseconds(5)) { hub.read { $0.sessions.count } <= 1 }
        #expect(remembered().contains("visitor29"))
        /// Logs a user in and out (a session end, when due memories go) until `done`.
        func sessionEndsUntil(_ done: () -> Bool) async throws {
            _ = try await eventually(within: soon, every: .milliseconds(20)) {
                if done() { return true }
                let (probe, _) = try await Harness.client("probe", port: harness.port)
                await probe.logout()
                return false
            }
        }
        // After the window: only the one still logged in keeps its ids; the mailbox forgets a
        // sender when its connection detaches.
        try await sessionEndsUntil { remembered() == ["stays"] }
        #expect(remembered() == ["stays"])
        #expect(await eventually(within: soon, every: .milliseconds(5)) { hub.mailbox.rememberedSenders == 0 })
        await stay.logout()
        try await sessionEndsUntil { hub.read { $0.resends.ids.isEmpty } }
        #expect(hub.read { $0.resends.ids.isEmpty && $0.resends.retention.pending == 0 })
    }
}
