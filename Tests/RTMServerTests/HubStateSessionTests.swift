import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// A user's session on one node as a value, time passed in: login, kick, resume, the grace
/// window after a lost connection, its expiry, logout, admission control (SPEC C-6, P-1, P-2,
/// P-4, T-8, T-9). No socket, no clock.
struct HubStateSessionTests {
    private let alice = UserKey(appId: "app", userId: "alice")
    private let bob = UserKey(appId: "app", userId: "bob")
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let heartbeat = TimeAmount.seconds(5)
    private let presenceTimeout = TimeAmount.seconds(15)

    private static func connection(_ id: UInt64) -> ConnectionRef { ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0) }

    private static func state(_ change: (inout ServerConfiguration) -> Void = { _ in }) -> HubState {
        var configuration = ServerConfiguration()
        change(&configuration)
        return HubState(configuration: configuration)
    }

    private func login(_ state: inout HubState, _ key: UserKey, _ connection: ConnectionRef, token: String? = nil,
                       at now: NIODeadline? = nil) -> HubState.Admission? {
        guard case .admitted(let admission) = state.login(key: key, connection: connection, resumeToken: token, heartbeat: heartbeat,
                                                          presenceTimeout: presenceTimeout, now: now ?? start, wallMillis: 0) else { return nil }
        return admission
    }

    private func subscribe(_ state: inout HubState, _ connection: ConnectionRef, _ channel: String) {
        _ = state.subscribe(connection, channel: channel, quiet: false, features: .presence, wallMillis: 0)
    }

    private static func events(_ broadcasts: [HubState.Broadcast]) -> [String] {
        broadcasts.map { "\($0.frame.userId ?? "-") \($0.frame.event ?? "-") \($0.frame.channel ?? "-")" }
    }

    @Test("C-6: a second login of the same user (another client, no resume token) kicks the first; its channels are left")
    func secondLoginKicks() throws {
        var state = Self.state()
        let first = Self.connection(1), second = Self.connection(2), watcher = Self.connection(3)
        let session = try #require(login(&state, alice, first))
        #expect(!session.resumed && session.kicked == nil)
        _ = try #require(login(&state, bob, watcher))
        subscribe(&state, first, "room")
        subscribe(&state, watcher, "room")
        let again = try #require(login(&state, alice, second))
        #expect(again.kicked == first && !again.resumed && again.sessionID != session.sessionID)
        #expect(Self.events(again.broadcasts) == ["alice remoteLeave room"])
        #expect(state.userKey(of: first) == nil && state.connection(of: alice) == second)
        #expect(state.whoNow(appId: "app", channel: "room", after: nil, pageSize: 10).snapshot.users == ["bob"])
    }

    @Test("P-1: a login with the session's resume token resumes it on the new connection: same session, its channels, the old connection replaced quietly")
    func resumeKeepsTheSession() throws {
        var state = Self.state()
        let first = Self.connection(1), second = Self.connection(2)
        let session = try #require(login(&state, alice, first))
        subscribe(&state, first, "room")
        let resumed = try #require(login(&state, alice, second, token: session.resumeToken))
        #expect(resumed.resumed && resumed.sessionID == session.sessionID && resumed.channels == ["room"])
        #expect(resumed.replaced == first && resumed.kicked == nil && resumed.broadcasts.isEmpty)
        // A wrong token is another client: a new session, the first kicked.
        let other = try #require(login(&state, alice, Self.connection(3), token: "not-the-token"))
        #expect(!other.resumed && other.kicked == second)
    }

    @Test("P-1, T-8: a lost connection opens the grace window, heartbeat + slack + presence timeout from the last sign of life; a resume within it keeps the member and its temporary state; the stale timer does nothing")
    func graceWindowAndResume() throws {
        var state = Self.state { $0.heartbeatSlack = .seconds(10) }
        let first = Self.connection(1)
        let session = try #require(login(&state, alice, first))
        subscribe(&state, first, "room")
        _ = state.changeState(first, channel: "room", set: ["mood": "x"], remove: [], limits: ServerConfiguration().limits, wallMillis: 0)
        let lastSeen = start + .seconds(1)
        let lost = state.connectionLost(first, lastSeen: lastSeen, now: start + .seconds(3))
        let timer = try #require(lost)
        #expect(timer.deadline == lastSeen + .seconds(5 + 10 + 15))
        // Still a member everywhere meanwhile.
        #expect(state.whoNow(appId: "app", channel: "room", after: nil, pageSize: 10).snapshot.users == ["alice"])
        let resumed = try #require(login(&state, alice, Self.connection(2), token: session.resumeToken, at: start + .seconds(20)))
        #expect(resumed.resumed && resumed.replaced == nil)
        #expect(state.graceExpired(timer, wallMillis: 0).isEmpty)   // its generation is gone
        #expect(state.whoNow(appId: "app", channel: "room", after: nil, pageSize: 10).snapshot.users == ["alice"])
        #expect(state.state(of: "alice", appId: "app", channel: "room") == ["mood": "x"])   // its temporary state too
    }

    @Test("P-2: a grace window that ends without a resume times the user out of every channel")
    func graceExpiryTimesOut() throws {
        var state = Self.state()
        let first = Self.connection(1), watcher = Self.connection(2)
        _ = try #require(login(&state, alice, first))
        _ = try #require(login(&state, bob, watcher))
        subscribe(&state, first, "room")
        subscribe(&state, first, "lobby")
        subscribe(&state, watcher, "room")
        let lost = state.connectionLost(first, lastSeen: start, now: start)
        let timer = try #require(lost)
        #expect(Self.events(state.graceExpired(timer, wallMillis: 0)) == ["alice remoteTimeout lobby", "alice remoteTimeout room"])
        #expect(state.connection(of: alice) == nil && state.sessions[alice] == nil)
        // The connection that was lost again later (another close of the same ref) opens nothing.
        #expect(state.connectionLost(first, lastSeen: start, now: start) == nil)
    }

    @Test("P-4: logout ends the session at once: its channels get a leave, not a timeout")
    func logoutLeaves() throws {
        var state = Self.state()
        let first = Self.connection(1)
        _ = try #require(login(&state, alice, first))
        subscribe(&state, first, "room")
        #expect(Self.events(state.logout(first, wallMillis: 0)) == ["alice remoteLeave room"])
        #expect(state.sessions[alice] == nil && state.logout(first, wallMillis: 0).isEmpty)
    }

    @Test("P-3: a user back after timing out rejoins visibly: its old resume token resumes nothing, its subscribe is a remoteJoin with an empty state (the old one is not resurrected), its setState is broadcast")
    func backAfterTimeout() throws {
        var state = Self.state()
        let first = Self.connection(1), watcher = Self.connection(2), back = Self.connection(3)
        let session = try #require(login(&state, alice, first))
        _ = try #require(login(&state, bob, watcher))
        subscribe(&state, first, "room")
        subscribe(&state, watcher, "room")
        let limits = ServerConfiguration().limits
        _ = state.changeState(first, channel: "room", set: ["mood": "x"], remove: [], limits: limits, wallMillis: 0)
        #expect(state.state(of: "alice", appId: "app", channel: "room") == ["mood": "x"])
        let lost = state.connectionLost(first, lastSeen: start, now: start)
        let timer = try #require(lost)
        #expect(Self.events(state.graceExpired(timer, wallMillis: 0)) == ["alice remoteTimeout room"])
        #expect(state.state(of: "alice", appId: "app", channel: "room") == nil)   // P-2: its state went with it

        let again = try #require(login(&state, alice, back, token: session.resumeToken, at: start + .seconds(60)))
        #expect(!again.resumed && again.channels.isEmpty && again.kicked == nil)   // the SDK restores: a new session
        let joined = state.subscribe(back, channel: "room", quiet: false, features: .presence, wallMillis: 0)
        guard case .subscribed(_, let join) = joined else { Issue.record("not subscribed: \(joined)"); return }
        #expect(join.map { Self.events([$0]) } == ["alice remoteJoin room"])
        #expect(state.state(of: "alice", appId: "app", channel: "room") == [:])
        let changed = state.changeState(back, channel: "room", set: ["mood": "y"], remove: [], limits: limits, wallMillis: 0)
        guard case .changed(let now, let broadcast) = changed else { Issue.record("not changed: \(changed)"); return }
        #expect(now == ["mood": "y"])
        #expect(broadcast?.frame.event == "remoteStateChanged" && broadcast?.except == back)
    }

    @Test("T-9: logins beyond the per-second budget are refused with loginNoServerResources; the budget refills with time")
    func loginAdmission() throws {
        var state = Self.state { $0.loginRatePerSecond = 2 }
        #expect(login(&state, alice, Self.connection(1)) != nil)
        #expect(login(&state, bob, Self.connection(2)) != nil)
        guard case .rejected(let refusal) = state.login(key: UserKey(appId: "app", userId: "carol"), connection: Self.connection(3),
                                                        resumeToken: nil, heartbeat: heartbeat, presenceTimeout: presenceTimeout,
                                                        now: start, wallMillis: 0) else {
            Issue.record("a third login in the same instant was admitted")
            return
        }
        #expect(refusal.code == .loginNoServerResources)
        #expect(login(&state, UserKey(appId: "app", userId: "carol"), Self.connection(3), at: start + .seconds(1)) != nil)
    }
}
