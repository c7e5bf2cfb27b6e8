import Foundation
import NIOCore
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Peer online status end to end (AGORA_REFERENCE §1.7), with real sockets and the fault proxy.
/// Timings scaled: unreachable after 500 ms of silence (6 s in production; 5 heartbeats, so a
/// loaded machine does not make a healthy client look unreachable), the server's heartbeat
/// deadline 100 ms + 800 ms, the grace window per test.
@Suite(.realTime, .serialized)
struct PeerStatusTests {
    static let unreachableAfter = TimeAmount.milliseconds(500)

    static func start(_ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> Harness {
        try await Harness.start { config in
            config.peerUnreachableAfter = unreachableAfter
            config.heartbeatSlack = .milliseconds(800)
            configure(&config)
        }
    }

    /// A status event saying `user` is `state`.
    static func status(_ user: String, _ state: PeerOnlineState) -> @Sendable (RTMEvent) -> Bool {
        { event in
            guard case .peersOnlineStatus(let statuses) = event else { return false }
            return statuses.contains(PeerOnlineStatus(userId: user, state: state))
        }
    }

    static func statuses(_ recorder: AsyncRecorder<RTMEvent>) async -> [PeerOnlineStatus] {
        await recorder.all.flatMap { event -> [PeerOnlineStatus] in
            if case .peersOnlineStatus(let statuses) = event { statuses } else { [] }
        }
    }

    @Test("§1.7/H-2: silent past the threshold → unreachable (a query still says online); speaking again → online")
    func unreachableThenOnline() async throws {
        let harness = try await Self.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (bob, _) = try await Harness.client("bob", port: proxy.port) { $0.presenceTimeout = 3 }
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        try await alice.subscribePeersOnlineStatus(["bob", "carol"])
        // The full status on the first subscribe.
        #expect(await aliceEvents.first(within: soon, where: Self.status("bob", .online)) != nil)
        #expect(await aliceEvents.first(within: soon, where: Self.status("carol", .offline)) != nil)
        #expect(await alice.subscribedPeers == ["bob", "carol"])

        let silentSince = ContinuousClock.now
        var mark = await aliceEvents.mark()
        proxy.setMode(.blackhole)
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("bob", .unreachable)) != nil)
        // The threshold counts from the last frame, a ping sent at most one heartbeat (100 ms) before.
        #expect(ContinuousClock.now - silentSince >= .milliseconds(400))
        // A query never says unreachable (§1.7): the session lives.
        #expect(try await alice.queryPeersOnlineStatus(["bob"]) == [PeerOnlineStatus(userId: "bob", state: .online)])
        mark = await aliceEvents.mark()
        proxy.setMode(.pass)
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("bob", .online)) != nil)
        #expect(await aliceEvents.matching(Self.status("bob", .offline)).isEmpty)
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("P-2/T-8: offline when the grace window ends (heartbeat + slack + presenceTimeout after the last frame), and at once on logout (H-4)")
    func offlineAtGraceEndAndOnLogout() async throws {
        let harness = try await Self.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (bob, _) = try await Harness.client("bob", port: proxy.port)   // grace 0.1 + 0.8 + 0.6 s
        let (carol, _) = try await Harness.client("carol", port: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        try await alice.subscribePeersOnlineStatus(["bob", "carol"])
        #expect(await aliceEvents.first(within: soon, where: Self.status("bob", .online)) != nil)

        let cutAt = ContinuousClock.now
        var mark = await aliceEvents.mark()
        proxy.setRefuseNew(true)
        proxy.cutAll()
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("bob", .unreachable)) != nil)
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("bob", .offline)) != nil)
        #expect(ContinuousClock.now - cutAt >= .milliseconds(1400))   // 1.5 s from the last frame, sent ≤ 100 ms before the cut

        let logoutAt = ContinuousClock.now
        mark = await aliceEvents.mark()
        await carol.logout()   // its event may arrive before logout() returns: look from the mark
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("carol", .offline)) != nil)
        #expect(ContinuousClock.now - logoutAt < .milliseconds(1000))
        #expect(await aliceEvents.matching(Self.status("carol", .unreachable)).isEmpty)

        // Bob comes back: online again, and it is one event per change.
        mark = await aliceEvents.mark()
        proxy.setRefuseNew(false)
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("bob", .online)) != nil)
        #expect(await Self.statuses(aliceEvents).filter { $0.userId == "bob" }.map(\.state) == [.online, .unreachable, .offline, .online])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("§1.7/C-5: after the subscriber reconnects its subscriptions are restored and it is told what changed while it was away, nothing else")
    func restoredAfterSubscriberReconnects() async throws {
        // Unreachable is not under test here: a long threshold keeps a busy machine from adding changes.
        let harness = try await Self.start { $0.peerUnreachableAfter = .seconds(3) }
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port) { $0.presenceTimeout = 3 }
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let (carol, _) = try await Harness.client("carol", port: harness.port)
        try await alice.subscribePeersOnlineStatus(["bob", "carol", "dave"])
        #expect(await aliceEvents.first(within: soon, where: Self.status("dave", .offline)) != nil)

        proxy.setRefuseNew(true)
        proxy.cutAll()
        #expect(await aliceEvents.first(within: soon) { $0.link?.currentState == .disconnected } != nil)
        let mark = await aliceEvents.mark()
        // While alice is away: carol logs out, dave logs in.
        await carol.logout()
        let (dave, _) = try await Harness.client("dave", port: harness.port)
        proxy.setRefuseNew(false)
        #expect(await aliceEvents.first(since: mark, within: soon) { $0.link?.operation == .reconnected } != nil)
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("carol", .offline)) != nil)
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("dave", .online)) != nil)
        // Restored: a change after the return arrives live.
        await bob.logout()
        #expect(await aliceEvents.first(since: mark, within: soon, where: Self.status("bob", .offline)) != nil)
        let since = await aliceEvents.all[mark...].flatMap { event -> [PeerOnlineStatus] in
            if case .peersOnlineStatus(let statuses) = event { statuses } else { [] }
        }
        #expect(since.filter { $0.userId == "bob" }.map(\.state) == [.offline])   // bob did not change while alice was away
        #expect(since.filter { $0.userId == "carol" }.count == 1)
        await alice.logout()
        await dave.logout()
        try? await proxy.stop()
    }

    @Test("§1.7: a query naming a user twice answers for it twice, in request order, and both count toward the per-call limit; a subscription names each user once")
    func userNamedTwice() async throws {
        let harness = try await Self.start { $0.peerStatusMaxUsersPerCall = 3 }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let peers = try await alice.queryPeersOnlineStatus(["bob", "carol", "bob"])
        #expect(peers == [PeerOnlineStatus(userId: "bob", state: .online), PeerOnlineStatus(userId: "carol", state: .offline),
                          PeerOnlineStatus(userId: "bob", state: .online)])
        do {
            _ = try await alice.queryPeersOnlineStatus(["bob", "bob", "bob", "bob"])
            Issue.record("four entries naming one user passed a limit of three")
        } catch { #expect(error.code == .invalidParameter) }
        try await alice.subscribePeersOnlineStatus(["bob", "bob"])
        #expect(await alice.subscribedPeers == ["bob"])
        await bob.logout()
        await alice.logout()
    }

    @Test("§1.7 limits: users per call, subscribed peers, call rate (reference error codes); logout clears subscriptions")
    func limitsAndLogout() async throws {
        let harness = try await Self.start { config in
            config.peerStatusMaxUsersPerCall = 3
            config.peerStatusMaxSubscribed = 4
            config.peerStatusRatePerSecond = 0.01
            config.peerStatusBurst = 4
        }
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let tooMany = (0...PeerStatusLimits.maxUsersPerCall).map { "u\($0)" }
        await #expect(throws: RTMError.self) { _ = try await alice.queryPeersOnlineStatus(tooMany) }
        do {
            _ = try await alice.queryPeersOnlineStatus(["a", "b", "c", "d"])
            Issue.record("the server let a query pass its user limit")
        } catch { #expect(error.code == .invalidParameter) }
        do {
            try await alice.subscribePeersOnlineStatus(["null"])
            Issue.record("an invalid user id was accepted")
        } catch { #expect(error.code == .invalidUserId) }
        try await alice.subscribePeersOnlineStatus(["a", "b", "c"])
        do {
            try await alice.subscribePeersOnlineStatus(["c", "d", "e"])
            Issue.record("the server let a subscription pass its peer limit")
        } catch { #expect(error.code == .peerSubscriptionOverflow) }
        try await alice.subscribePeersOnlineStatus(["a", "d"])   // subscribing twice is not an error
        try await alice.unsubscribePeersOnlineStatus(["b"])   // the fourth call of the burst
        do {
            try await alice.subscribePeersOnlineStatus(["b"])
            Issue.record("the rate limit let a fifth call through")
        } catch { #expect(error.code == .operationRateExceedLimitation) }
        #expect(await alice.subscribedPeers == ["a", "c", "d"])

        await alice.logout()
        #expect(await alice.subscribedPeers == [])
        try await alice.login(token: Harness.token("alice"))
        await aliceEvents.clear()
        let (peer, _) = try await Harness.client("a", port: harness.port)
        #expect(await aliceEvents.first(within: .milliseconds(500), where: Self.status("a", .online)) == nil)
        await peer.logout()
        await alice.logout()
    }

    @Test("§1.5: getChannelMemberCount counts visible members of up to 32 channels without joining; 0 for unknown channels")
    func channelMemberCount() async throws {
        let harness = try await Self.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let (carol, _) = try await Harness.client("carol", port: harness.port)
        try await bob.subscribe("room")
        try await carol.subscribe("room")
        try await carol.subscribe("lobby", options: SubscribeOptions(beQuiet: true))
        #expect(try await alice.getChannelMemberCount(["room", "lobby", "nowhere"]) == ["room": 2, "lobby": 0, "nowhere": 0])
        do {
            _ = try await alice.getChannelMemberCount(["room"])
            Issue.record("a second call within a second was accepted")
        } catch { #expect(error.code == .operationRateExceedLimitation) }
        do {
            _ = try await alice.getChannelMemberCount((0...32).map { "c\($0)" })
            Issue.record("33 channels were accepted")
        } catch { #expect(error.code == .invalidParameter) }
        for client in [alice, bob, carol] { await client.logout() }
    }
}
