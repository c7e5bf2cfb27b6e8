import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// The hub's events as one transaction each, time passed in: what each event returns for the
/// hub to do after its lock (`HubAction`), timers asked for and handed back as events
/// (`HubTimer`), and the webhook events queued in order (SPEC P-1, P-2, C-6, §1.7, §1.8, §2.12).
struct HubStateEventTests {
    private let alice = UserKey(appId: "app", userId: "alice")
    private let bob = UserKey(appId: "app", userId: "bob")
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private static func connection(_ id: UInt64, loop: Int = 0) -> ConnectionRef {
        ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: loop)
    }

    private static func state(webhooks: Bool = true, _ change: (inout ServerConfiguration) -> Void = { _ in }) -> HubState {
        var configuration = ServerConfiguration()
        configuration.heartbeatSlack = .seconds(10)
        change(&configuration)
        var state = HubState(configuration: configuration)
        state.webhooks.isEnabled = webhooks
        return state
    }

    /// Logs in (5 s heartbeat, 15 s presence timeout). A single node's new session is
    /// confirmed as a cluster node's is, by its own `started` read back from its log: the
    /// in-memory log (`LocalNodeLink`) applies it at once, and the reply is answered then.
    private func login(_ state: inout HubState, _ key: UserKey, _ connection: ConnectionRef, token: String? = nil,
                       at now: NIODeadline? = nil) -> (HubState.Admission?, [HubAction]) {
        let loop = EmbeddedEventLoop()
        var (decision, confirmed, actions) = state.onLogin(
            key: key, connection: connection, resumeToken: token, heartbeat: .seconds(5), presenceTimeout: .seconds(15),
            now: now ?? start, wallMillis: 1_000, makePromise: { loop.makePromise() })
        let applied = state.applyOwnClusterEvents(now: now ?? start, wallMillis: 1_000)
        var answered = false
        for case .answerLogin(let promise) in applied {
            promise.succeed()
            answered = true
        }
        guard case .admitted(let admission) = decision else { return (nil, actions + applied) }
        // C-6: a new session's reply waits for its own `started` and is answered once it came back.
        #expect(admission.resumed ? confirmed == nil : (confirmed != nil && answered))
        actions += applied
        return (admission, actions)
    }

    /// alice on `first` and bob on `watcher`, both logged in and subscribed to "room".
    private func aliceAndBobInRoom(_ state: inout HubState, _ first: ConnectionRef, _ watcher: ConnectionRef,
                                   watcherFeatures: ChannelFeatures = .presence) {
        _ = login(&state, alice, first)
        _ = login(&state, bob, watcher)
        _ = state.onSubscribe(first, channel: "room", quiet: false, features: .presence, wallMillis: 1_000)
        _ = state.onSubscribe(watcher, channel: "room", quiet: false, features: watcherFeatures, wallMillis: 1_000)
    }

    private static func webhookLines(_ state: inout HubState) -> [String] {
        state.webhooks.take().map { "\($0.userId) \($0.eventType.rawValue) \($0.channelName ?? "-") \($0.reason ?? "-")" }
    }

    private static func broadcasts(_ actions: [HubAction]) -> [String] {
        actions.compactMap {
            guard case .broadcast(let b) = $0 else { return nil }
            return "\(b.frame.userId ?? "-") \(b.frame.event ?? "-") \(b.frame.channel ?? "-")"
        }
    }

    private static func timers(_ actions: [HubAction]) -> [(timer: HubTimer, at: NIODeadline, loop: Int)] {
        actions.compactMap { if case .schedule(let timer, let at, let loop) = $0 { (timer, at, loop) } else { nil } }
    }

    @Test("P-1, P-2: a lost connection asks for its grace timer at the window's end, on the connection's loop; handed back then, the session times out: members told, STREAM connections closed, webhooks leave and offline (connectionTimeout) in order; handed back again it does nothing")
    func graceTimerEndsTheSession() throws {
        var state = Self.state()
        let first = Self.connection(1, loop: 1), watcher = Self.connection(2)
        aliceAndBobInRoom(&state, first, watcher)
        #expect(Self.webhookLines(&state) == ["alice userOnline - login", "bob userOnline - login",
                                               "alice joinChannel room -", "bob joinChannel room -"])

        let lost = state.onConnectionLost(first, lastSeen: start, now: start + .seconds(2))
        let scheduled = try #require(Self.timers(lost).first)
        guard case .grace(let grace) = scheduled.timer else { Issue.record("not a grace timer: \(scheduled.timer)"); return }
        #expect(scheduled.at == start + .seconds(5 + 10 + 15) && scheduled.loop == 1)
        #expect(lost.contains { if case .lockOwner(alice, .lost(first)) = $0 { true } else { false } })

        let fired = state.timerFired(scheduled.timer, now: grace.deadline, wallMillis: 31_000)
        #expect(Self.broadcasts(fired) == ["alice remoteTimeout room"])
        #expect(fired.contains { if case .closeStreams(alice, _) = $0 { true } else { false } })
        #expect(Self.webhookLines(&state) == ["alice leaveChannel room connectionTimeout", "alice userOffline - connectionTimeout"])
        #expect(state.sessions[alice] == nil)

        let again = state.timerFired(scheduled.timer, now: grace.deadline + .seconds(1), wallMillis: 32_000)
        #expect(Self.broadcasts(again).isEmpty && Self.webhookLines(&state).isEmpty)
    }

    @Test("P-1: a resume within the window makes the grace timer stale: handed back, it changes nothing")
    func resumeMakesTheGraceTimerStale() throws {
        var state = Self.state()
        let first = Self.connection(1)
        let (session, _) = login(&state, alice, first)
        _ = state.onSubscribe(first, channel: "room", quiet: false, features: .presence, wallMillis: 1_000)
        let timer = try #require(Self.timers(state.onConnectionLost(first, lastSeen: start, now: start)).first)
        let (resumed, actions) = login(&state, alice, Self.connection(2), token: session?.resumeToken, at: start + .seconds(3))
        #expect(resumed?.resumed == true && Self.broadcasts(actions).isEmpty)
        _ = Self.webhookLines(&state)
        let fired = state.timerFired(timer.timer, now: timer.at, wallMillis: 31_000)
        #expect(Self.broadcasts(fired).isEmpty && Self.webhookLines(&state).isEmpty)
        #expect(state.whereNow(alice) == ["room"])
    }

    @Test("C-6: a second client's login returns the kick of the first connection before the leave events; the webhooks end the old session (remoteLogin) before the new one's userOnline")
    func secondLoginActionsAndWebhooks() throws {
        var state = Self.state()
        let first = Self.connection(1), second = Self.connection(2), watcher = Self.connection(3)
        aliceAndBobInRoom(&state, first, watcher)
        _ = Self.webhookLines(&state)
        let (_, actions) = login(&state, alice, second)
        let kick = try #require(actions.firstIndex { if case .kick(first, alice, .sameUidLogin, _) = $0 { true } else { false } })
        let leave = try #require(actions.firstIndex { if case .broadcast = $0 { true } else { false } })
        #expect(kick < leave && Self.broadcasts(actions) == ["alice remoteLeave room"])
        #expect(Self.webhookLines(&state) == ["alice leaveChannel room remoteLogin", "alice userOffline - remoteLogin", "alice userOnline - login"])
    }

    @Test("Without a webhook URL the outbox keeps nothing, whatever happens")
    func disabledOutboxKeepsNothing() {
        var state = Self.state(webhooks: false)
        let first = Self.connection(1)
        _ = login(&state, alice, first)
        _ = state.onSubscribe(first, channel: "room", quiet: false, features: .presence, wallMillis: 1_000)
        _ = state.onLogout(first, now: start, wallMillis: 2_000)
        #expect(state.webhooks.events.isEmpty)
    }

    @Test("H-4, P-4, §1.7: logout tells members at once, has the lock store release the user's locks, and queues leave and offline (logout)")
    func logoutActions() throws {
        var state = Self.state()
        let first = Self.connection(1), watcher = Self.connection(2)
        aliceAndBobInRoom(&state, first, watcher, watcherFeatures: [.presence, .lock])
        _ = Self.webhookLines(&state)
        let actions = state.onLogout(first, now: start, wallMillis: 2_000)
        #expect(Self.broadcasts(actions).contains("alice remoteLeave room"))
        #expect(actions.contains { if case .lockOwner(alice, .loggedOut(first)) = $0 { true } else { false } })
        #expect(Self.webhookLines(&state) == ["alice leaveChannel room logout", "alice userOffline - logout"])
    }

    @Test("P-4: an unsubscribe tells the channel's members at once (remoteLeave), queues leaveChannel (leave), and takes the user's state in that channel with it")
    func unsubscribeActions() throws {
        var state = Self.state()
        let first = Self.connection(1), watcher = Self.connection(2)
        aliceAndBobInRoom(&state, first, watcher)
        _ = state.changeState(first, channel: "room", set: ["mood": "x"], remove: [], limits: ServerConfiguration().limits, wallMillis: 1_000)
        _ = Self.webhookLines(&state)
        let unsubscribed = state.onUnsubscribe(first, channel: "room", wallMillis: 2_000)
        let actions = try #require(unsubscribed)
        #expect(Self.broadcasts(actions) == ["alice remoteLeave room"])
        #expect(Self.webhookLines(&state) == ["alice leaveChannel room leave"])
        #expect(state.state(of: "alice", appId: "app", channel: "room") == nil)
        #expect(state.whoNow(appId: "app", channel: "room", after: nil, pageSize: 10).snapshot.users == ["bob"])
    }

    @Test("§1.8: an invitation's timer is asked for and handed back as an event: to an offline callee it fails remoteOffline after 30 s, the caller is told, and a forget timer follows; forgotten, the id is unknown")
    func invitationTimers() throws {
        var state = Self.state()
        let caller = Self.connection(1)
        _ = login(&state, alice, caller)
        let invite = Frame(type: .invite, userId: "bob", text: "hi").with { $0.invitationId = "call-1" }
        let (reply, actions) = state.invitationRequest(invite, user: alice, now: start)
        #expect((try? reply.get()) != nil)
        let ring = try #require(Self.timers(actions).first)
        #expect(ring.timer == .invitation(InvitationTable.Key(appId: "app", id: "call-1")) && ring.at == start + .seconds(30))

        let fired = state.timerFired(ring.timer, now: ring.at, wallMillis: 31_000)
        let toCaller = fired.compactMap { if case .send(let frame, caller) = $0 { frame } else { nil } }
        #expect(toCaller.count == 1)
        let forget = try #require(Self.timers(fired).first)
        #expect(forget.timer == .forgetInvitation(InvitationTable.Key(appId: "app", id: "call-1")))
        #expect(state.invitations.invitations.count == 1)
        // Forgotten: nobody is told; only the store deletes it.
        let forgotten = state.timerFired(forget.timer, now: forget.at, wallMillis: 91_000)
        #expect(forgotten.count == 1)
        if case .storeInvitation(let change)? = forgotten.first { #expect(change.invitation == nil && change.key.id == "call-1") } else { Issue.record("no deletion for the store") }
        #expect(state.invitations.invitations.isEmpty)
    }

    @Test("§1.7: a lost connection's peers see it unreachable when its timer, asked for at last sign of life + threshold, comes back; a resume first makes it stale")
    func peerUnreachableTimer() throws {
        var state = Self.state()
        let first = Self.connection(1, loop: 1)
        let (session, _) = login(&state, alice, first)
        let asked = state.peerConnectionLost(alice, lastSeen: start, threshold: .seconds(6), now: start + .seconds(1), loop: 1)
        let timer = try #require(Self.timers(asked).first)
        #expect(timer.at == start + .seconds(6) && timer.loop == 1)
        guard case .peerUnreachable(alice, let generation) = timer.timer else { Issue.record("\(timer.timer)"); return }
        #expect(generation == state.sessionGeneration(alice))
        _ = state.onConnectionLost(first, lastSeen: start, now: start + .seconds(1))
        _ = login(&state, alice, Self.connection(2), token: session?.resumeToken, at: start + .seconds(2))
        #expect(state.timerFired(timer.timer, now: timer.at, wallMillis: 7_000).isEmpty)
    }

    @Test("The periodic timers come back and ask for themselves again: sweep, interval presence (on the last loop), history trimming with the retention's cutoff; none for history kept for ever; the lock sweep every lockSweepInterval")
    func periodicTimers() throws {
        var state = Self.state { $0.historyRetention = .seconds(60); $0.channelReplayWindow = .seconds(30); $0.presenceInterval = .seconds(2) }
        let first = Self.timers(state.periodicTimers(now: start))
        #expect(first.map(\.timer) == [.sweep, .presenceInterval, .historyTrim, .lockSweep])
        #expect(first.map(\.at) == [start + .seconds(30), start + .seconds(2), start, start + .seconds(1)])
        #expect(first[1].loop == Int.max)

        let trim = state.timerFired(.historyTrim, now: start, wallMillis: 100_000)
        guard case .trimHistory(let cutoff) = trim.first else { Issue.record("\(trim)"); return }
        #expect(cutoff == 40_000)
        #expect(Self.timers(trim).map(\.at) == [start + .seconds(30)])
        #expect(Self.timers(state.timerFired(.sweep, now: start, wallMillis: 0)).map(\.at) == [start + .seconds(30)])
        #expect(Self.timers(state.timerFired(.presenceInterval, now: start, wallMillis: 0)).map(\.at) == [start + .seconds(2)])

        var forever = Self.state { $0.historyRetention = nil }
        #expect(Self.timers(forever.periodicTimers(now: start)).map(\.timer) == [.sweep, .presenceInterval, .lockSweep])
        let sweep = forever.timerFired(.lockSweep, now: start, wallMillis: 0)
        guard case .sweepLocks = sweep.first else { Issue.record("\(sweep)"); return }
        #expect(Self.timers(sweep).map(\.at) == [start + .seconds(1)])
        #expect(forever.timerFired(.historyTrim, now: start, wallMillis: 0).isEmpty)
    }

    @Test("C-6 across nodes: a cluster login's timeout handed back after the cluster answered it finds no waiter and does nothing")
    func clusterLoginTimeoutWithoutWaiter() {
        var state = Self.state()
        #expect(state.timerFired(.clusterLogin(session: 42, user: alice), now: start, wallMillis: 0).isEmpty)
    }

    @Test("Admin kick (ban, revoke): members told, MESSAGE connection kicked with the admin's code, STREAM connections closed, peers told offline at once (§1.7), webhooks leave and userOffline with reason kicked; nil without a session")
    func adminEndsASession() throws {
        var state = Self.state()
        let first = Self.connection(1), watcher = Self.connection(2)
        aliceAndBobInRoom(&state, first, watcher)
        _ = try state.subscribePeers(bob, users: ["alice"], limits: Limits(), now: start).get()
        _ = Self.webhookLines(&state)
        let ended = state.onEndSessionByAdmin(alice, code: .kickedOutByServer, reason: "spam", now: start, wallMillis: 2_000)
        let actions = try #require(ended)
        #expect(Self.broadcasts(actions) == ["alice remoteLeave room"])
        #expect(actions.contains { if case .kick(first, alice, .kickedOutByServer, "spam") = $0 { true } else { false } })
        #expect(actions.contains { if case .closeStreams(alice, "spam") = $0 { true } else { false } })
        let toBob = actions.compactMap { if case .send(let frame, watcher) = $0 { frame } else { nil } }
        #expect(toBob.count == 1 && toBob.first?.type == .peersOnlineStatus && toBob.first?.peers?.first?.state == .offline)
        #expect(Self.webhookLines(&state) == ["alice leaveChannel room kicked", "alice userOffline - kicked"])
        let again = state.onEndSessionByAdmin(alice, code: .kickedOutByServer, reason: "again", now: start, wallMillis: 3_000)
        #expect(again == nil)
    }

    @Test("§1.8: the callee's session ends (logout; grace window over) → its live invitations fail at once, remoteOffline to the caller; a new login of the callee gets them again instead")
    func calleeGoneEndsInvitations() throws {
        var state = Self.state()
        let caller = Self.connection(1), callee = Self.connection(2)
        _ = login(&state, alice, caller)
        _ = login(&state, bob, callee)
        let invite = { (id: String) in Frame(type: .invite, userId: "bob", text: "hi").with { $0.invitationId = id } }
        _ = state.invitationRequest(invite("kept"), user: alice, now: start)
        // A new login of bob (another client): it gets "kept" again, which stays live.
        let (_, relogin) = login(&state, bob, Self.connection(3), at: start + .seconds(1))
        #expect(relogin.contains { if case .send(let frame, _) = $0 { frame.invitationId == "kept" && frame.type == .remoteInvitation } else { false } })
        _ = state.invitationRequest(invite("ended"), user: alice, now: start + .seconds(2))
        // bob logs out: both fail at once, told to alice.
        let actions = state.onLogout(try #require(state.connection(of: bob)), now: start + .seconds(3), wallMillis: 3_000)
        let toAlice = actions.compactMap { if case .send(let frame, caller) = $0, frame.type == .localInvitation { frame } else { nil } }
        #expect(toAlice.map { $0.invitationId ?? "" }.sorted() == ["ended", "kept"])
        #expect(toAlice.allSatisfy { $0.event == LocalInvitationState.failure.name && $0.code == LocalInvitationError.remoteOffline.rawValue })
        #expect(Self.timers(actions).map(\.timer).contains(.forgetInvitation(InvitationTable.Key(appId: "app", id: "kept"))))
    }
}
