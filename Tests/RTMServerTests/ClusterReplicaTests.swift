import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// The cluster's session and presence events applied to `HubState` as a
/// pure value: the log's one order decides every race the same way on every node.
struct ClusterReplicaTests {
    static let app = "app"
    let now = NIODeadline.now()

    /// A node's state with its instance name set (cluster mode).
    static func node(_ instance: String) -> HubState {
        var state = HubState(configuration: ServerConfiguration())
        state.cluster = ClusterReplica(instance: instance, clusterNode: String(ClusterEvent.node(of: instance)))
        return state
    }

    static func session(_ user: String, id: UInt64, channels: [String: [String: String]] = [:], quiet: Bool = false) -> ClusterSession {
        ClusterSession(appId: app, userId: user, id: id, resumeToken: "t\(id)", heartbeatMillis: 100, presenceTimeoutMillis: 600,
                       members: channels.mapValues { ClusterMember(quiet: quiet, features: 1, state: $0) })
    }

    static func event(_ from: String, _ kind: ClusterEvent.Kind) -> ClusterEvent { ClusterEvent(from: from, kind: kind) }

    static func presence(_ outcome: HubState.ClusterOutcome) -> [String] {
        outcome.broadcasts.map { "\($0.frame.userId ?? "-") \($0.frame.event ?? "-") \($0.frame.channel ?? "-")" }
    }

    /// A connection for a local session (never written to here).
    static func connection(_ id: UInt64) -> ConnectionRef { ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0) }

    @Test("P-3: another node's session and members join this node's channels; its leave, state and end are applied in log order")
    func remoteSessionLifecycle() {
        var b = Self.node("b#1")
        let key = UserKey(appId: Self.app, userId: "alice")
        var out = b.applyCluster([Self.event("a#1", .started(Self.session("alice", id: 7)))], now: now, wallMillis: 0)
        #expect(out.broadcasts.isEmpty && b.cluster.remote[key]?.owner == "a#1")
        out = b.applyCluster([
            Self.event("a#1", .member(appId: Self.app, userId: "alice", session: 7, channel: "room",
                                      change: .join(ClusterMember(quiet: false, features: 1, state: [:])))),
            Self.event("a#1", .member(appId: Self.app, userId: "alice", session: 7, channel: "room", change: .state(["k": "v"]))),
        ], now: now, wallMillis: 0)
        #expect(Self.presence(out) == ["alice remoteJoin room", "alice remoteStateChanged room"])
        #expect(b.whoNow(appId: Self.app, channel: "room", after: nil, pageSize: 10).snapshot.users == ["alice"])
        #expect(b.state(of: "alice", appId: Self.app, channel: "room") == ["k": "v"])
        #expect(b.whereNow(key) == ["room"])
        // A stale member event of another session of the user changes nothing.
        out = b.applyCluster([Self.event("a#1", .member(appId: Self.app, userId: "alice", session: 99, channel: "room", change: .leave))],
                             now: now, wallMillis: 0)
        #expect(out.broadcasts.isEmpty && b.whereNow(key) == ["room"])
        out = b.applyCluster([Self.event("a#1", .ended(appId: Self.app, userId: "alice", session: 7, timedOut: true))], now: now, wallMillis: 0)
        #expect(Self.presence(out) == ["alice remoteTimeout room"])
        #expect(b.cluster.remote[key] == nil && b.whereNow(key) == nil)
        // The same end again (a second survivor's): nothing.
        out = b.applyCluster([Self.event("c#1", .ended(appId: Self.app, userId: "alice", session: 7, timedOut: true))], now: now, wallMillis: 0)
        #expect(out.broadcasts.isEmpty)
    }

    @Test("C-6: a newer login in the log ends the user's earlier session, local (kicked) or remote (leave); a local login not yet confirmed is the newer one and stays")
    func laterLoginInTheLogWins() {
        var a = Self.node("a#1")
        let key = UserKey(appId: Self.app, userId: "alice")
        let local = Self.connection(1)
        guard case .admitted(let admission) = a.login(key: key, connection: local, resumeToken: nil, heartbeat: .milliseconds(100),
                                                      presenceTimeout: .milliseconds(600), now: now, wallMillis: 0) else {
            Issue.record("login refused")
            return
        }
        let announced = a.cluster.takeOutbox()
        guard case .started(let mine)? = announced.first?.kind else {
            Issue.record("no started event: \(announced)")
            return
        }
        #expect(mine.id == admission.sessionID)
        // Node b's login came earlier in the log than ours: ours is newer and stays.
        var out = a.applyCluster([Self.event("b#1", .started(Self.session("alice", id: 5)))], now: now, wallMillis: 0)
        #expect(out.kicked.isEmpty && a.sessions[key]?.id == mine.id)
        // Ours comes back: it ends b's (a remote end: no kick here).
        out = a.applyCluster([Self.event("a#1", .started(mine))], now: now, wallMillis: 0)
        #expect(out.kicked.isEmpty && a.cluster.remote[key] == nil && a.cluster.confirmed.contains(mine.id))
        // Then a newer login on c: ours is kicked.
        out = a.applyCluster([Self.event("c#1", .started(Self.session("alice", id: 9)))], now: now, wallMillis: 0)
        #expect(out.kicked.map(\.key) == [key] && out.kicked.first?.connection == local)
        #expect(a.sessions[key] == nil && a.cluster.remote[key]?.session.id == 9)
    }

    @Test("C-6: a new login's reply waits until its own started came back and the user's session on another node ended there (or the node is gone)")
    func loginWaitsForTheOtherNodesKick() {
        var a = Self.node("a#1"), b = Self.node("b#1")
        let key = UserKey(appId: Self.app, userId: "alice")
        // alice is logged in on a, and b knows it.
        guard case .admitted(let first) = a.login(key: key, connection: Self.connection(1), resumeToken: nil, heartbeat: .milliseconds(100),
                                                  presenceTimeout: .milliseconds(600), now: now, wallMillis: 0) else { return }
        let started = a.cluster.takeOutbox()
        _ = a.applyCluster(started, now: now, wallMillis: 0)
        _ = b.applyCluster(started, now: now, wallMillis: 0)
        #expect(a.cluster.takeReadyLogins() == [first.sessionID])   // no earlier session anywhere
        // alice logs in on b: not answered yet.
        guard case .admitted(let second) = b.login(key: key, connection: Self.connection(2), resumeToken: nil, heartbeat: .milliseconds(100),
                                                   presenceTimeout: .milliseconds(600), now: now, wallMillis: 0) else { return }
        let login = b.cluster.takeOutbox()
        #expect(b.cluster.pendingLogins[key]?.session == second.sessionID)
        // Its started comes back on b: still waiting, for a's session to end.
        _ = b.applyCluster(login, now: now, wallMillis: 0)
        #expect(b.cluster.takeReadyLogins().isEmpty && b.cluster.pendingLogins[key]?.waitingFor?.session == first.sessionID)
        // a reads it: kicks its client and says so (ended).
        let kick = a.applyCluster(login, now: now, wallMillis: 0)
        #expect(kick.kicked.map(\.key) == [key])
        let ended = a.cluster.takeOutbox()
        guard case .ended(_, "alice", first.sessionID, false)? = ended.first?.kind else {
            Issue.record("no ended event: \(ended)")
            return
        }
        // b reads the ended: the login is answered.
        _ = b.applyCluster(ended, now: now, wallMillis: 0)
        #expect(b.cluster.takeReadyLogins() == [second.sessionID] && b.cluster.pendingLogins.isEmpty)

        // The same with a's node dead before it could answer: answered when it is declared dead.
        var c = Self.node("c#1")
        _ = c.applyCluster(started, now: now, wallMillis: 0)
        guard case .admitted(let third) = c.login(key: key, connection: Self.connection(3), resumeToken: nil, heartbeat: .milliseconds(100),
                                                  presenceTimeout: .milliseconds(600), now: now, wallMillis: 0) else { return }
        _ = c.applyCluster(c.cluster.takeOutbox(), now: now, wallMillis: 0)
        #expect(c.cluster.takeReadyLogins().isEmpty)
        #expect(c.cluster.pendingLogins[key]?.session == third.sessionID)
        _ = c.nodeDied("a", now: now)   // the event itself takes the logins it made ready (their replies are its actions)
        #expect(c.cluster.pendingLogins.isEmpty)
    }

    @Test("P-1: a session moves here with its token (channels and states kept, no event); the node that had it lets it go quietly")
    func resumeMovesTheSession() {
        var b = Self.node("b#1")
        var a = Self.node("a#1")
        let key = UserKey(appId: Self.app, userId: "carol")
        let remote = Self.session("carol", id: 3, channels: ["room": ["seat": "3"]])
        _ = b.applyCluster([Self.event("a#1", .started(remote))], now: now, wallMillis: 0)
        #expect(b.resumeFromCluster(key, token: "wrong", connection: Self.connection(1), heartbeat: .seconds(1), presenceTimeout: .seconds(1)) == nil)
        let admission = b.resumeFromCluster(key, token: "t3", connection: Self.connection(2), heartbeat: .seconds(1), presenceTimeout: .seconds(1))
        #expect(admission?.resumed == true && admission?.channels == ["room"] && admission?.sessionID == 3)
        #expect(b.state(of: "carol", appId: Self.app, channel: "room") == ["seat": "3"])
        let moved = b.cluster.takeOutbox()
        guard case .moved(let described)? = moved.first?.kind else {
            Issue.record("no moved event: \(moved)")
            return
        }
        // On the old node: carol's local session (same id) is dropped without a leave.
        let old = Self.connection(7)
        guard case .admitted = a.login(key: key, connection: old, resumeToken: nil, heartbeat: .seconds(1), presenceTimeout: .seconds(1),
                                       now: now, wallMillis: 0) else { return }
        a.sessions.put(HubState.Session(id: 3, key: key, resumeToken: "t3", connection: old, channels: ["room"],
                                        heartbeat: .seconds(1), presenceTimeout: .seconds(1)))
        let out = a.applyCluster([Self.event("b#1", .moved(described))], now: now, wallMillis: 0)
        #expect(out.broadcasts.isEmpty && out.movedAway.map(\.connection) == [old])
        #expect(a.sessions[key] == nil && a.cluster.remote[key]?.owner == "b#1")
    }

    /// The orphan timers among a node-death event's actions.
    private static func orphanTimers(_ actions: [HubAction]) -> [ClusterReplica.OrphanTimer] {
        actions.compactMap { action in
            if case .schedule(.orphan(let timer), _, _) = action { return timer }
            return nil
        }
    }

    @Test("P-2: a dead node's sessions get their grace window; at its end they time out unless they moved or the node came back")
    func deadNodeSessionsTimeOut() {
        var b = Self.node("b#1")
        _ = b.applyCluster([Self.event("a#1", .started(Self.session("dave", id: 1))),
                            Self.event("a#1", .started(Self.session("erin", id: 2)))], now: now, wallMillis: 0)
        let timers = Self.orphanTimers(b.nodeDied("a", now: now))
        #expect(timers.count == 2)
        // window: heartbeat 0.1 + slack + presence timeout 0.6
        #expect(timers.allSatisfy { $0.deadline == now + .milliseconds(700) + b.heartbeatSlack })
        #expect(b.nodeDied("a", now: now).isEmpty)   // told once
        // erin resumed on c meanwhile.
        _ = b.applyCluster([Self.event("c#1", .moved(Self.session("erin", id: 2)))], now: now, wallMillis: 0)
        for timer in timers { _ = b.orphanExpired(timer, now: now, wallMillis: 0) }
        let sent = b.cluster.takeOutbox().compactMap { event -> String? in
            if case .ended(_, let user, _, true) = event.kind { return user }
            return nil
        }
        #expect(sent == ["dave"])
        // A node that came back keeps its sessions.
        var c = Self.node("c#1")
        _ = c.applyCluster([Self.event("a#1", .started(Self.session("dave", id: 1)))], now: now, wallMillis: 0)
        let later = Self.orphanTimers(c.nodeDied("a", now: now))
        #expect(!c.nodeReturned("a").isEmpty)   // logged once
        #expect(c.nodeReturned("a").isEmpty)
        for timer in later { _ = c.orphanExpired(timer, now: now, wallMillis: 0) }
        #expect(c.cluster.takeOutbox().isEmpty)
        // A restarted node (a new instance says hello): its earlier instance's sessions are orphans.
        let restart = c.applyCluster([Self.event("a#2", .hello)], now: now, wallMillis: 0)
        #expect(restart.orphans.map(\.session) == [1])
    }
}
