import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// Counts delegate callbacks (SPEC L-2, T-6).
final class CountingDelegate: RTMClientDelegate {
    let messages = NIOLockedValueBox<[String]>([])
    let links = NIOLockedValueBox<[LinkState]>([])
    func rtmClient(_ client: RTMClient, didReceiveMessageEvent event: MessageEvent) {
        messages.withLockedValue { $0.append(event.text ?? "") }
    }
    func rtmClient(_ client: RTMClient, didReceiveLinkStateEvent event: LinkStateEvent) {
        links.withLockedValue { $0.append(event.currentState) }
    }
}

/// Connection behaviour end to end, through the fault proxy where a fault is needed.
@Suite(.realTime, .serialized)
struct ConnectionTests {
    @Test("T-6/L-2: after three reconnections a message reaches each stream and the delegate exactly once")
    func oneRegistrationOneDelivery() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, first) = try await Harness.client("alice", port: proxy.port)
        let second = AsyncRecorder(alice.events())
        let delegate = CountingDelegate()
        await alice.setDelegate(delegate)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.subscribe("room")
        for _ in 0..<3 {
            await first.clear()
            proxy.cutAll()
            #expect(await first.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        }
        try await bob.publish(channel: "room", message: "once")
        #expect(await first.first(within: soon) { $0.messageEvent?.text == "once" } != nil)
        #expect(await second.first(within: soon) { $0.messageEvent?.text == "once" } != nil)
        // Give a duplicate the time to show up (it would arrive right behind the first copy).
        try await bob.publish(channel: "room", message: "marker")
        _ = await second.first(within: soon) { $0.messageEvent?.text == "marker" }
        #expect(await first.matching { $0.messageEvent?.text == "once" }.count == 1)
        #expect(await second.matching { $0.messageEvent?.text == "once" }.count == 1)
        #expect(delegate.messages.withLockedValue { $0.filter { $0 == "once" }.count } == 1)
        // Both views saw the same link transitions, in the same order (L-2).
        let streamed = await second.matching { $0.link != nil }.compactMap { $0.link?.currentState }
        let delegated = delegate.links.withLockedValue { $0 }
        #expect(delegated.suffix(streamed.count) == streamed[...])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("Fault proxy delay: a slow link below the pong timeout stays connected and delivers in order")
    func delayedLinkStaysUp() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.subscribe("room")
        proxy.setMode(.delay(.milliseconds(120)))   // 240 ms round trip; pong timeout is 300 ms
        for i in 1...5 { try await bob.publish(channel: "room", message: "m\(i)") }
        _ = await aliceEvents.first(within: soon) { $0.messageEvent?.text == "m5" }
        let texts = await aliceEvents.matching { $0.messageEvent != nil }.compactMap { $0.messageEvent?.text }
        #expect(texts == ["m1", "m2", "m3", "m4", "m5"])
        // Several heartbeat rounds pass on the slow link without a false alarm.
        #expect(await aliceEvents.next(within: .seconds(1)) { $0.link?.currentState == .disconnected } == nil)
        #expect(await alice.linkState == .connected)
        proxy.setMode(.pass)
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("T-7: a token provider is asked at every (re)login; renewToken replaces the token in-band without reconnecting")
    func tokenProviderAndRenew() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, events) = try await Harness.client("alice", port: proxy.port, login: false)
        let calls = NIOLockedValueBox(0)
        try await alice.login(tokenProvider: {
            calls.withLockedValue { $0 += 1 }
            return Harness.token("alice")
        })
        #expect(calls.withLockedValue { $0 } == 1)
        proxy.cutAll()
        #expect(await events.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        #expect(calls.withLockedValue { $0 } == 2)

        let connections = proxy.acceptedConnections
        await events.clear()
        try await alice.renewToken(Harness.token("alice", expiresIn: 7200))
        do {
            try await alice.renewToken("006garbage")
            Issue.record("a garbage token was accepted by renewToken")
        } catch {
            #expect(error.code == .invalidToken)
        }
        #expect(proxy.acceptedConnections == connections)   // no new connection
        #expect(await events.matching { $0.link != nil }.isEmpty)
        #expect(await alice.linkState == .connected)
        await alice.logout()
        try? await proxy.stop()
    }

    @Test("R-4: a client dropped without logout closes its connection and finishes its event streams")
    func deinitReleasesEverything() async throws {
        let harness = try await Harness.start()
        var client: RTMClient? = try await Harness.client("alice", port: harness.port).0
        try await client?.subscribe("room")
        let stream = client!.events()
        #expect(harness.server.connectionCount == 1)
        let finished = Task {
            for await _ in stream {}
            return true
        }
        client = nil
        let done = await withDeadline(soon) {
            await withTaskCancellationHandler { await finished.value } onCancel: { finished.cancel() }
        } ?? false
        #expect(done, "the event stream did not finish after the client was released")
        #expect(await waitUntil { harness.server.connectionCount == 0 })
        finished.cancel()
    }

    @Test("A consumer that cannot keep up is disconnected instead of growing server memory; others are unaffected")
    func slowConsumerIsCut() async throws {
        let harness = try await Harness.start {
            $0.maxOutboundBytes = 256 * 1024
            // The raw reader never pings: its silence deadline (5 s + slack) must not be what
            // cuts it when publishing is slow (the Thread Sanitizer build took over 5 s here).
            $0.heartbeatSlack = .seconds(60)
        }
        let raw = try await RawConnection.open(port: harness.port)
        #expect(await raw.login("sloth")?.type == .ok)
        raw.send(Frame(type: .subscribe, id: 2, channel: "room"))
        #expect(await raw.reply(2)?.type == .ok)
        try await raw.channel.setOption(.autoRead, value: false).get()   // stops reading: the socket fills up
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let payload = String(repeating: "x", count: 30 * 1024)
        #expect(harness.server.connectionCount == 3)
        var sent = 0
        // (The raw side does not read, so it cannot notice the cut itself: watch the server.)
        // Each message once bob has it: bob, who reads, is never more than one message (30 KB)
        // behind, so only the reader that stopped can pass the 256 KB bound, however slowly a
        // loaded machine runs bob's side (bob was cut too when alice published freely beside
        // other builds).
        while harness.server.connectionCount == 3 && sent < 2000 {
            let tag = "n\(sent)"
            try await alice.publish(channel: "room", message: payload, customType: tag)
            sent += 1
            #expect(await bobEvents.first(within: soon) { $0.messageEvent?.customType == tag } != nil)
        }
        // The server cut the slow reader long before 2000 messages (60 MB).
        #expect(await waitUntil { harness.server.connectionCount == 2 })
        #expect(sent < 2000)
        // Bob, who reads, got every message.
        let last = "n\(sent - 1)"
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.customType == last } != nil)
        #expect(await bobEvents.matching { $0.messageEvent != nil }.count == sent)
        // counted, once, with its disconnect reason.
        let metrics = try await MetricsTests.scrape(harness.port)
        #expect(metrics["rtm_slow_consumers_dropped_total"] == 1)
        #expect(metrics["rtm_disconnects_total{reason=\"slow_consumer\"}"] == 1)
        await alice.logout()
        await bob.logout()
    }
}
