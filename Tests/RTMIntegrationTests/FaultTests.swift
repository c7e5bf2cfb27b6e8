import Foundation
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// Faults injected with a TCP proxy between the client and a real server: cut (RST),
/// black-hole (half-open: nothing flows, sockets stay open), refuse.
@Suite(.realTime, .serialized)
struct FaultTests {
    /// Server + proxy + a watcher (bob, direct) and a victim (alice, through the proxy), both in "room".
    struct Setup {
        let harness: Harness
        let proxy: FaultProxy
        let alice: RTMClient
        let aliceEvents: AsyncRecorder<RTMEvent>
        let bob: RTMClient
        let bobEvents: AsyncRecorder<RTMEvent>

        static func make(configure: (inout RTMClientConfig) -> Void = { _ in }) async throws -> Setup {
            let harness = try await Harness.start()
            let proxy = try await FaultProxy.scoped(targetPort: harness.port)
            let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port, configure: configure)
            let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
            try await alice.subscribe("room")
            try await bob.subscribe("room")
            _ = await bobEvents.first(within: soon) { $0.presenceEvent?.kind == .snapshot }
            return Setup(harness: harness, proxy: proxy, alice: alice, aliceEvents: aliceEvents, bob: bob, bobEvents: bobEvents)
        }

        func tearDown() async {
            await alice.logout()
            await bob.logout()
            try? await proxy.stop()
            await harness.stop()
        }
    }

    static func isAlicePresence(_ kinds: Set<PresenceEventKind>) -> @Sendable (RTMEvent) -> Bool {
        RTMEvent.isPresence(of: "alice", kinds)
    }

    @Test("P-1/C-3: a short cut (RST) heals by itself: resumed, no presence event for others, no classic change")
    func shortCutIsInvisible() async throws {
        let s = try await Setup.make()
        await s.bobEvents.clear()
        // From a mark, not `next`: an RST is noticed, and healed, in milliseconds, possibly
        // before the test starts waiting.
        let mark = await s.aliceEvents.mark()
        s.proxy.cutAll()
        let lost = await s.aliceEvents.first(since: mark, within: soon) { $0.link?.currentState == .disconnected }
        #expect(lost?.link?.reasonCode == .connectionError)
        let back = await s.aliceEvents.first(since: mark, within: soon) { $0.link?.currentState == .connected }
        #expect(back?.link?.isResumed == true)
        #expect(back?.link?.operation == .reconnected)
        #expect(back?.link?.unrestoredChannels == [])
        // Wait out the whole grace window (0.1 + 0.2 + 0.6 s) and more: nothing for bob to see.
        let ghost = await s.bobEvents.next(within: .milliseconds(1500), where: Self.isAlicePresence([.remoteLeave, .remoteTimeout, .remoteJoin]))
        #expect(ghost == nil)
        #expect(await s.aliceEvents.matching { $0.classic != nil && $0.classic != .connecting && $0.classic != .connected }.isEmpty)
        // And the channel still works both ways after the cut.
        try await s.bob.publish(channel: "room", message: "after-cut")
        #expect(await s.aliceEvents.first(within: soon) { $0.messageEvent?.text == "after-cut" } != nil)
        #expect(s.harness.server.members(appId: Harness.appId, channel: "room") == ["alice", "bob"])
        await s.tearDown()
    }

    @Test("H-5/T-3: a half-open link (black-holed) is detected by heartbeat on the client and on the server")
    func halfOpenDetectedBothSides() async throws {
        let s = try await Setup.make()
        s.proxy.setMode(.blackhole)
        let start = ContinuousClock.now
        let lost = await s.aliceEvents.next(within: soon) { $0.link?.currentState == .disconnected }
        #expect(lost?.link?.reasonCode == .keepAliveTimeout)
        #expect(lost?.link?.operation == .heartbeatTimeout)
        // Detected by the client within heartbeat + pong timeout (0.1 + 0.3 s) plus scheduling slack.
        #expect(ContinuousClock.now - start < .seconds(2))
        // Server side: no frames from alice → after the grace window bob sees a timeout (P-2, T-8).
        let timeout = await s.bobEvents.first(within: soon, where: Self.isAlicePresence([.remoteTimeout]))
        #expect(timeout != nil)
        // Classic view: interrupted for more than 0.4 s → reconnecting (C-3).
        #expect(await s.aliceEvents.first(within: soon) { $0.classic == .reconnecting } != nil)
        // Heal: alice comes back as a new session, restores "room", and bob sees her join (P-3).
        s.proxy.setMode(.pass)
        s.proxy.cutAll()
        let back = await s.aliceEvents.first(within: soon) { $0.link?.currentState == .connected && $0.link?.operation == .reconnected }
        #expect(back != nil)
        let rejoin = await s.bobEvents.first(within: soon, where: Self.isAlicePresence([.remoteJoin]))
        #expect(rejoin != nil)
        #expect(await s.alice.subscribedChannels == ["room"])
        #expect(await s.aliceEvents.first(within: soon) { $0.classic == .connected && $0.link == nil } != nil)
        await s.tearDown()
    }

    @Test("P-2/P-3/C-5: a cut longer than the grace window: others see a timeout, then the rejoin; messages flow again")
    func longCutTimesOutThenRejoins() async throws {
        let s = try await Setup.make()
        s.proxy.setRefuseNew(true)
        s.proxy.cutAll()
        let timeout = await s.bobEvents.first(within: soon, where: Self.isAlicePresence([.remoteTimeout]))
        #expect(timeout != nil)
        #expect(s.harness.server.members(appId: Harness.appId, channel: "room") == ["bob"])
        s.proxy.setRefuseNew(false)
        let back = await s.aliceEvents.first(within: soon) { $0.link?.currentState == .connected && $0.link?.operation == .reconnected }
        #expect(back != nil)
        let join = await s.bobEvents.first(within: soon, where: Self.isAlicePresence([.remoteJoin]))
        #expect(join != nil)
        try await s.bob.publish(channel: "room", message: "welcome back")
        #expect(await s.aliceEvents.first(within: soon) { $0.messageEvent?.text == "welcome back" } != nil)
        await s.tearDown()
    }

    @Test("R-3: a publish made while reconnecting is queued and delivered after the reconnection")
    func publishDuringReconnect() async throws {
        let s = try await Setup.make()
        s.proxy.setRefuseNew(true)
        let mark = await s.aliceEvents.mark()
        s.proxy.cutAll()
        _ = await s.aliceEvents.first(since: mark, within: soon) { $0.link?.currentState == .disconnected }
        async let published = s.alice.publish(channel: "room", message: "queued")
        // Let the request sit in the queue a little, then let alice back in.
        _ = await s.aliceEvents.next(within: .milliseconds(300)) { $0.link?.currentState == .connected }
        s.proxy.setRefuseNew(false)
        let seq = try await published
        #expect(seq >= 1)
        let got = await s.bobEvents.first(within: soon) { $0.messageEvent?.text == "queued" }
        #expect(got?.messageEvent?.publisher == "alice")
        await s.tearDown()
    }

    @Test("R-3: a publish that cannot be delivered within the request timeout fails with a timeout error")
    func publishTimesOut() async throws {
        let s = try await Setup.make { $0.requestTimeout = 0.5 }
        s.proxy.setRefuseNew(true)
        let mark = await s.aliceEvents.mark()
        s.proxy.cutAll()
        _ = await s.aliceEvents.first(since: mark, within: soon) { $0.link?.currentState == .disconnected }
        do {
            try await s.alice.publish(channel: "room", message: "lost")
            Issue.record("publish succeeded while the server was unreachable")
        } catch {
            #expect(error.code == .channelPublishMessageTimeout)
        }
        s.proxy.setRefuseNew(false)
        await s.tearDown()
    }

    @Test("T-1: a connection attempt that never answers is abandoned; the initial login ends with loginTimeout")
    func blackHoledLoginTimesOut() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        proxy.setMode(.blackhole)
        let (client, events) = try await Harness.client("alice", port: proxy.port, configure: {
            $0.loginTimeout = 1.5
            $0.connectTimeout = 0.3
        }, login: false)
        let start = ContinuousClock.now
        do {
            try await client.login(token: Harness.token("alice"))
            Issue.record("login succeeded through a black hole")
        } catch {
            #expect(error.code == .loginTimeout)
        }
        #expect(ContinuousClock.now - start < .seconds(3))
        #expect(proxy.acceptedConnections >= 2)   // attempts were abandoned and retried
        #expect(await events.first(within: soon) { $0.link?.reasonCode == .loginTimeout } != nil)
        #expect(await client.connectionState == .disconnected)
        try? await proxy.stop()
    }

    @Test("T-2/R-4: logout on a black-holed link completes promptly and leaves no timer behind")
    func logoutNeverWedges() async throws {
        let s = try await Setup.make()
        s.proxy.setMode(.blackhole)
        let start = ContinuousClock.now
        await s.alice.logout()
        #expect(ContinuousClock.now - start < .seconds(1))
        #expect(await s.alice.linkState == .idle)
        let timers = try await s.alice.eventLoop.submit { [alice = s.alice] in alice.pendingTimerCount }.get()
        #expect(timers == 0)
        s.proxy.setMode(.pass)
        await s.tearDown()
    }

    @Test("T-12: after a server restart every client comes back by itself, with its subscriptions")
    func serverRestart() async throws {
        let harness = try await Harness.start()
        let port = harness.port
        let (alice, aliceEvents) = try await Harness.client("alice", port: port)
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        try await alice.subscribe("room")
        try await bob.subscribe("room")
        await harness.stop()
        let lost = await aliceEvents.first(within: soon) { $0.link?.currentState == .disconnected }
        #expect(lost?.link?.reason.contains("server going away") == true, "\(String(describing: lost))")
        var config = Harness.serverConfig(port: port)
        config.threads = 2
        let restarted = try RTMServer(configuration: config)
        try await restarted.start()
        let aliceBack = await aliceEvents.first(within: soon) { $0.link?.operation == .reconnected }
        let bobBack = await bobEvents.first(within: soon) { $0.link?.operation == .reconnected }
        #expect(aliceBack?.link?.isResumed == false)   // a new server session: the restart lost it
        #expect(bobBack != nil)
        // Subscriptions restored on the new server: a message reaches bob.
        let members = await waitUntil { restarted.members(appId: Harness.appId, channel: "room") == ["alice", "bob"] }
        #expect(members)
        try await alice.publish(channel: "room", message: "restarted")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "restarted" } != nil)
        await alice.logout()
        await bob.logout()
        try? await restarted.shutdown()
    }

    @Test("P-1: isResumed is the server's answer: back to the same server within the grace window → resumed; back to a restarted server, however quickly → not resumed")
    func isResumedFollowsTheServer() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, events) = try await Harness.client("alice", port: proxy.port)
        try await alice.subscribe("room")

        // A cut healed within the grace window: the server still holds the session.
        var mark = await events.mark()
        proxy.cutAll()
        let resumed = await events.first(since: mark, within: soon) { $0.link?.operation == .reconnected }
        #expect(resumed?.link?.isResumed == true)
        #expect(resumed?.link?.reason == "session resumed")

        // The server restarts between the loss and the return: the return is quick (well
        // within the SDK's 2-minute disconnected window) but the server answers resumed:false.
        mark = await events.mark()
        await harness.stop()
        let lost = await events.first(since: mark, within: soon) { $0.link?.currentState == .disconnected }
        #expect(lost != nil)
        let restarted = try RTMServer(configuration: Harness.serverConfig(port: harness.port))
        try await restarted.start()
        let fresh = await events.first(since: mark, within: soon) { $0.link?.operation == .reconnected }
        #expect(fresh?.link?.isResumed == false)
        #expect(fresh?.link?.reason == "new session")
        // The SDK subscribed again on the new session.
        #expect(await waitUntil { restarted.members(appId: Harness.appId, channel: "room") == ["alice"] })
        await alice.logout()
        try? await proxy.stop()
        try? await restarted.shutdown()
    }
}

import RTMServer

/// Polls a condition on the server's state until it holds or the deadline passes.
func waitUntil(_ deadline: Duration = soon, _ condition: @Sendable () -> Bool) async -> Bool {
    await eventually(within: deadline, condition)
}
