import Foundation
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Sessions and presence across nodes over a real PostgreSQL, real nodes
/// on loopback (in-process, and `rtm serve` processes for kill -9), real SDK clients.
extension ClusterTests {
    @Test("P-3: presence is cluster-wide: joins, states and leaves on node B reach subscribers on node A; whoNow, whereNow and getState answer the same on both nodes")
    func presenceAcrossNodes() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        try await alice.subscribe("room")
        // Node B applies alice's join when its follower reads it (a few ms after her reply).
        #expect(await waitUntil { b.server.members(appId: Harness.appId, channel: "room") == ["alice"] })
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        try await bob.subscribe("room")
        #expect(await aliceEvents.first(within: soon, where: RTMEvent.isPresence(of: "bob", [.remoteJoin])) != nil)
        try await bob.setState(channel: "room", ["mood": "ok"])
        let changed = await aliceEvents.first(within: soon, where: RTMEvent.isPresence(of: "bob", [.remoteStateChanged]))
        #expect(changed?.presenceEvent?.state == ["mood": "ok"])
        for client in [alice, bob] {
            let who = try await client.whoNow(channel: "room", includeState: true)
            #expect(who.users == ["alice", "bob"] && who.totalCount == 2)
            #expect(who.states["bob"] == ["mood": "ok"])
            #expect(try await client.whereNow(userId: "bob") == ["room"])
            #expect(try await client.whereNow(userId: "alice") == ["room"])
            #expect(try await client.getState(channel: "room", userId: "bob") == ["mood": "ok"])
        }
        // A late subscriber on A gets both in its snapshot: B's member is A's too.
        let (carol, _) = try await ClusterTests.client("carol", port: a.port)
        try await carol.subscribe("room")
        #expect(a.server.members(appId: Harness.appId, channel: "room") == ["alice", "bob", "carol"])
        try await bob.unsubscribe("room")
        #expect(await aliceEvents.first(within: soon, where: RTMEvent.isPresence(of: "bob", [.remoteLeave])) != nil)
        #expect(try await alice.whereNow(userId: "bob") == [])
        try await bob.subscribe("room")
        _ = await aliceEvents.next(within: soon, where: RTMEvent.isPresence(of: "bob", [.remoteJoin]))
        // Logout (P-4): the leave at once, not after a grace window (whose end is a
        // remoteTimeout: the kind tells them apart, however late this test sees it).
        let out = await aliceEvents.mark()
        await bob.logout()
        let leave = await aliceEvents.first(since: out, within: soon, where: RTMEvent.isPresence(of: "bob", [.remoteLeave, .remoteTimeout]))
        #expect(leave?.presenceEvent?.kind == .remoteLeave)
        #expect(await aliceEvents.matching(RTMEvent.isPresence(of: "bob", [.remoteTimeout])).isEmpty)
        #expect(try await alice.whoNow(channel: "room").users == ["alice", "carol"])
        await alice.logout()
        await carol.logout()
    }

    @Test("C-6: a login on node B kicks the same user's session on node A (told sameUidLogin, never back by itself) before B answers it; others see it leave, then the new one join")
    func crossNodeKick() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (observer, observerEvents) = try await ClusterTests.client("observer", port: b.port)
        try await observer.subscribe("room")
        let (first, firstEvents) = try await ClusterTests.client("alice", port: a.port)
        try await first.subscribe("room")
        #expect(await observerEvents.first(within: soon, where: RTMEvent.isPresence(of: "alice", [.remoteJoin])) != nil)
        let mark = await observerEvents.mark()
        let (second, secondEvents) = try await ClusterTests.client("alice", port: b.port)
        // No moment with both logged in: when b answers the login, a has ended the first.
        #expect(a.server.sessionCount == 0)
        let kicked = await firstEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(kicked?.link?.reasonCode == .sameUidLogin)
        let leave = await observerEvents.first(since: mark, within: soon, where: RTMEvent.isPresence(of: "alice", [.remoteLeave]))
        #expect(leave != nil)
        let joined = await observerEvents.mark()
        try await second.subscribe("room")
        #expect(await observerEvents.first(since: joined, within: soon, where: RTMEvent.isPresence(of: "alice", [.remoteJoin])) != nil)
        // No kick loop: the kicked client stays down; the new one stays up.
        let flap = await secondEvents.next(within: .seconds(1)) { $0.link?.currentState == .failed }
        #expect(flap == nil)
        #expect(await first.linkState == .failed)
        #expect(await second.linkState == .connected)
        #expect(await waitUntil { a.server.sessionCount == 0 } && b.server.sessionCount == 2)
        #expect(try await observer.whoNow(channel: "room").users == ["alice", "observer"])
        #expect(a.server.members(appId: Harness.appId, channel: "room") == ["alice", "observer"])
        await second.logout()
        await observer.logout()
    }

    @Test("C-6: two logins of one user on two nodes at once: exactly one session survives, on both nodes' view")
    func concurrentLoginsOnTwoNodes() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        for round in 1...4 {
            let user = "racer\(round)"
            let (clientA, eventsA) = try await ClusterTests.client(user, port: a.port, login: false)
            let (clientB, eventsB) = try await ClusterTests.client(user, port: b.port, login: false)
            async let loginA: RTMError? = Self.loginError(clientA, user)
            async let loginB: RTMError? = Self.loginError(clientB, user)
            let refused = await [loginA, loginB]
            // The later login in the cluster's log wins. The other was either refused
            // (kicked before its login was answered: loginAborted) or kicked after it.
            #expect(refused.compactMap { $0 }.allSatisfy { $0.code == .loginAborted })
            var loser = refused.firstIndex { $0 != nil }
            let deadline = ContinuousClock.now + soon
            while loser == nil, ContinuousClock.now < deadline {
                for (index, events) in [eventsA, eventsB].enumerated() where loser == nil {
                    if await events.first(within: .milliseconds(50), where: { $0.link?.currentState == .failed }) != nil { loser = index }
                }
            }
            #expect(loser != nil)
            #expect(refused.compactMap { $0 }.count <= 1)
            let (winner, winnerEvents) = loser == 0 ? (clientB, eventsB) : (clientA, eventsA)
            #expect(await winnerEvents.next(within: .milliseconds(500)) { $0.link?.currentState == .failed } == nil)
            #expect(await winner.linkState == .connected)
            let sessions = [a, b].map { node in node.server.hub.read { $0.sessions[UserKey(appId: Harness.appId, userId: user)] != nil } }
            #expect(sessions.filter { $0 }.count == 1)
            await winner.logout()
        }
    }

    @Test("§1.7: peer online status is cluster-wide: a watcher on node A sees bob come online on node B and go offline at his logout; a query on A says the same")
    func peerStatusAcrossNodes() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        try await alice.subscribePeersOnlineStatus(["bob"])
        #expect(await aliceEvents.first(within: soon, where: PeerStatusTests.status("bob", .offline)) != nil)
        let mark = await aliceEvents.mark()
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        #expect(await aliceEvents.first(since: mark, within: soon, where: PeerStatusTests.status("bob", .online)) != nil)
        #expect(try await alice.queryPeersOnlineStatus(["bob"]) == [PeerOnlineStatus(userId: "bob", state: .online)])
        let out = await aliceEvents.mark()
        await bob.logout()
        #expect(await aliceEvents.first(since: out, within: soon, where: PeerStatusTests.status("bob", .offline)) != nil)
        #expect(try await alice.queryPeersOnlineStatus(["bob"]) == [PeerOnlineStatus(userId: "bob", state: .offline)])
        await alice.logout()
    }

    /// Logs in; the error if the login was refused.
    private static func loginError(_ client: RTMClient, _ user: String) async -> RTMError? {
        do {
            try await client.login(token: Harness.token(user))
            return nil
        } catch {
            return error
        }
    }

    @Test("P-1: a client that loses node A and reconnects to node B within its grace window resumes there (isResumed, channels and state kept); nobody sees it leave or join")
    func resumeOnAnotherNode() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let toA = try await FaultProxy.scoped(targetPort: a.port)
        let toB = try await FaultProxy.scoped(targetPort: b.port)
        toB.setRefuseNew(true)   // the first connection goes to node A
        let (observer, observerEvents) = try await ClusterTests.client("observer", port: b.port)
        try await observer.subscribe("room")
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: a.port) {
            $0.endpoints = ["ws://127.0.0.1:\(toA.port)", "ws://127.0.0.1:\(toB.port)"]
            $0.presenceTimeout = 30   // a window a loaded machine's reconnection fits in
        }
        try await carol.subscribe("room")
        try await carol.setState(channel: "room", ["seat": "3"])
        #expect(await observerEvents.first(within: soon, where: RTMEvent.isPresence(of: "carol", [.remoteStateChanged])) != nil)
        await observerEvents.clear()
        let mark = await carolEvents.mark()
        toA.setRefuseNew(true)
        toA.cutAll()
        toB.setRefuseNew(false)
        let back = await carolEvents.first(since: mark, within: .seconds(20)) { $0.link?.currentState == .connected }
        #expect(back?.link?.isResumed == true)
        #expect(back?.link?.unrestoredChannels == [])
        #expect(toB.openConnections == 1)
        // The session is B's now: A forgot it, B serves it.
        #expect(await waitUntil { a.server.sessionCount == 0 } && b.server.sessionCount == 2)
        let ghost = await observerEvents.next(within: .milliseconds(1500), where: RTMEvent.isPresence(of: "carol", [.remoteLeave, .remoteTimeout, .remoteJoin]))
        #expect(ghost == nil)
        let who = try await observer.whoNow(channel: "room", includeState: true)
        #expect(who.users == ["carol", "observer"] && who.states["carol"] == ["seat": "3"])
        // Its channel works on the new node, and a logout there is a leave for everyone.
        _ = try await observer.publish(channel: "room", message: "hello carol")
        #expect(await carolEvents.first(since: mark, within: soon) { $0.messageEvent?.text == "hello carol" } != nil)
        let out = await observerEvents.mark()
        await carol.logout()
        #expect(await observerEvents.first(since: out, within: soon, where: RTMEvent.isPresence(of: "carol", [.remoteLeave])) != nil)
        await observer.logout()
        try? await toA.stop()
        try? await toB.stop()
    }

    @Test("P-2: after kill -9 of a node, its users time out for the others after the grace window, unless they resumed on another node")
    func deadNodeUsersTimeOut() async throws {
        // A 1.5 s lease: the nodes renew in time on a loaded machine (until one is killed).
        let (_, nodes) = try await RTMProcess.clusterNodes(["n1", "n2"], extraArguments: ["--lease-seconds", "1.5", "--heartbeat-slack", "0.2"])   // stopped by the .realTime trait's scope
        let (first, second) = (nodes[0].port, nodes[1].port)
        let (observer, observerEvents) = try await ClusterTests.client("observer", port: second)
        try await observer.subscribe("room")
        // dave stays on the dead node (his only endpoint); erin has both and moves.
        let (dave, _) = try await ClusterTests.client("dave", port: first)
        let toSecond = try await FaultProxy.scoped(targetPort: second)
        toSecond.setRefuseNew(true)   // erin's first connection goes to the node that dies
        let (erin, erinEvents) = try await ClusterTests.client("erin", port: first) {
            $0.endpoints = ["ws://127.0.0.1:\(first)", "ws://127.0.0.1:\(toSecond.port)"]
        }
        try await dave.subscribe("room")
        try await erin.subscribe("room")
        for user in ["dave", "erin"] {
            #expect(await observerEvents.first(within: soon, where: RTMEvent.isPresence(of: user, [.remoteJoin])) != nil)
        }
        let mark = await erinEvents.mark()
        let killed = ContinuousClock.now
        await nodes[0].process.kill9()
        toSecond.setRefuseNew(false)
        let back = await erinEvents.first(since: mark, within: .seconds(20)) { $0.link?.currentState == .connected }
        #expect(back?.link?.isResumed == true)
        // Declared dead after its lease (1.5 s, within 1.8 s), then the window of a lost
        // connection: the heartbeat and presence timeout a process allows at least (5 s each)
        // + 0.2 s slack. Not before the window (it starts at the death's declaration, after the
        // kill: a sound lower bound however late this test looks); T-8's bound (12 s here) with
        // 8 s for a loaded machine's lateness above it.
        let timeout = await observerEvents.first(within: .seconds(30), where: RTMEvent.isPresence(of: "dave", [.remoteTimeout, .remoteLeave]))
        #expect(timeout?.presenceEvent?.kind == .remoteTimeout)
        let elapsed = ContinuousClock.now - killed
        #expect(elapsed > .seconds(10) && elapsed < .seconds(20), "timed out \(elapsed) after the kill")
        #expect(await observerEvents.matching(RTMEvent.isPresence(of: "erin", [.remoteTimeout, .remoteLeave])).isEmpty)
        #expect(try await observer.whoNow(channel: "room").users == ["erin", "observer"])
        await erin.logout()
        await observer.logout()
        await dave.logout()
        try? await toSecond.stop()
        // The survivor stops cleanly on SIGTERM (its last cluster events sent first).
        nodes[1].process.signal(SIGTERM)
        #expect(await nodes[1].process.waitForLine(containing: "stopped", within: .seconds(15)) != nil)
    }
}
