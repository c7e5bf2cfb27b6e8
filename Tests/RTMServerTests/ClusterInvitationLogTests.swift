import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// Call invitations across nodes as pure values (§1.8): two nodes' `HubState`s apply the same
/// invitation log, each event at its writer's time, and reach the same invitations and
/// outcomes; a request is answered when its own event comes back, or told its outcome is
/// unknown.
struct ClusterInvitationLogTests {
    static let app = "app"
    let loop = EmbeddedEventLoop()
    let now = NIODeadline.now()
    let alice = UserKey(appId: app, userId: "alice")
    let bob = UserKey(appId: app, userId: "bob")

    /// A node in cluster mode whose log history has been applied.
    static func node(_ instance: String) -> HubState {
        var state = ClusterReplicaTests.node(instance)
        _ = state.replayInvitations([], now: .now(), wallMillis: 0)
        return state
    }

    /// The node's invitation events waiting to be written, numbered from `seq`.
    static func written(_ state: inout HubState, from seq: inout UInt64) -> [(seq: UInt64, event: ClusterEvent)] {
        state.cluster.takeOutbox().filter { $0.logChannel == InvitationEvent.channel }.map { event in
            seq += 1
            return (seq, event)
        }
    }

    /// The replies among `actions`, their promises completed.
    static func answers(_ actions: [HubAction]) -> [InvitationReply] {
        actions.compactMap { action in
            guard case .answerInvitation(let promise, let reply) = action else { return nil }
            promise.succeed(reply)
            return reply
        }
    }

    static func states(_ state: HubState) -> [String: InvitationStateMachine.State] {
        Dictionary(uniqueKeysWithValues: state.invitations.invitations.map { ($0.key.id, $0.value.machine.state) })
    }

    static func frame(_ type: FrameType, _ id: String, callee: String? = nil, text: String? = nil) -> Frame {
        Frame(type: type, userId: callee, text: text).with { $0.invitationId = id }
    }

    @Test("§1.8 across nodes: a request is written to the log and answered when its event comes back; both nodes hold the same invitation; an accept and a cancel sent at once on two nodes have one outcome everywhere, the log's first")
    func oneOrderOneOutcome() throws {
        var a = Self.node("a#1"), b = Self.node("b#1")
        var seq: UInt64 = 0
        let invite = loop.makePromise(of: InvitationReply.self)
        let asked = a.invitationRequest(Self.frame(.invite, "call", callee: "bob", text: "video?"), user: alice, now: now,
                                        wallMillis: 1_000, reply: invite)
        #expect(Self.answers(asked).isEmpty)   // not before the log
        #expect(asked.contains { if case .schedule(.invitationReply, _, _) = $0 { true } else { false } })
        let log = Self.written(&a, from: &seq)
        #expect(log.count == 1)
        let onA = a.applyInvitationLog(log, now: now, wallMillis: 1_010)
        _ = Self.answers(b.applyInvitationLog(log, now: now, wallMillis: 1_020))
        #expect(try Self.answers(onA).first?.get().event == "sentToRemote")
        #expect(Self.states(a) == ["call": .pending(delivered: false)] && Self.states(b) == Self.states(a))

        // bob accepts on b while alice cancels on a: the log has the accept first.
        _ = b.invitationRequest(Self.frame(.acceptInvitation, "call", text: "on my way"), user: bob, now: now, wallMillis: 2_000,
                                reply: loop.makePromise())
        _ = a.invitationRequest(Self.frame(.cancelInvitation, "call"), user: alice, now: now, wallMillis: 2_000, reply: loop.makePromise())
        let race = Self.written(&b, from: &seq) + Self.written(&a, from: &seq)
        let cancelOnA = a.applyInvitationLog(race, now: now, wallMillis: 2_010)
        let acceptOnB = b.applyInvitationLog(race, now: now, wallMillis: 2_010)
        #expect(Self.answers(cancelOnA).map(\.failureCode) == [.invitationAlreadyAccept])
        #expect(try Self.answers(acceptOnB).first?.get().event == "accepted")
        #expect(Self.states(a) == ["call": .accepted(response: "on my way")] && Self.states(b) == Self.states(a))
    }

    @Test("§1.8 across nodes: a timer decides by its event's time, the same on every node: one written early changes nothing anywhere, one at the deadline fails the invitation everywhere once")
    func timersByEventTime() {
        var a = Self.node("a#1"), b = Self.node("b#1")
        var seq: UInt64 = 0
        _ = a.invitationRequest(Self.frame(.invite, "call", callee: "bob"), user: alice, now: now, wallMillis: 10_000, reply: loop.makePromise())
        let log = Self.written(&a, from: &seq)
        _ = Self.answers(a.applyInvitationLog(log, now: now, wallMillis: 10_000))
        _ = Self.answers(b.applyInvitationLog(log, now: now, wallMillis: 10_000))
        let early = [(seq: seq + 1, event: ClusterEvent(from: "b#1", kind: .invitation(
            InvitationEvent(appId: Self.app, user: "alice", op: .timer(id: "call"), atMillis: 39_999))))]
        seq += 1
        _ = a.applyInvitationLog(early, now: now, wallMillis: 40_000)
        _ = b.applyInvitationLog(early, now: now, wallMillis: 40_000)
        #expect(Self.states(a) == ["call": .pending(delivered: false)] && Self.states(b) == Self.states(a))
        // The timer as a node writes it: at the deadline (remoteOffline 30 s after the invite).
        let key = InvitationTable.Key(appId: Self.app, id: "call")
        let due = b.invitationTimerFired(key, now: now, wallMillis: 40_000)
        #expect(due.contains { if case .wakeCluster = $0 { true } else { false } })
        let fired = Self.written(&b, from: &seq)
        _ = a.applyInvitationLog(fired, now: now, wallMillis: 40_005)
        _ = b.applyInvitationLog(fired, now: now, wallMillis: 40_005)
        #expect(Self.states(a) == ["call": .failed(.remoteOffline)] && Self.states(b) == Self.states(a))
    }

    @Test("§1.8 across nodes: a request whose event does not come back within clusterLoginTimeout is refused saying the outcome is unknown; the event applied later answers nobody twice")
    func unknownOutcome() throws {
        var a = Self.node("a#1")
        var seq: UInt64 = 0
        let asked = a.invitationRequest(Self.frame(.invite, "call", callee: "bob"), user: alice, now: now, wallMillis: 1_000,
                                        reply: loop.makePromise())
        let timer = try #require(asked.compactMap { if case .schedule(let timer, let at, _) = $0 { (timer, at) } else { nil } }.first)
        #expect(timer.1 == now + a.timing.clusterLoginTimeout)
        let refused = Self.answers(a.timerFired(timer.0, now: timer.1, wallMillis: 4_000))
        #expect(refused.map(\.failureCode) == [.requestTimeout])
        if case .failure(let refusal)? = refused.first { #expect(refusal.reason.contains("the outcome is unknown")) }
        // The commit happened after all: applied, answered to nobody (already answered).
        let late = a.applyInvitationLog(Self.written(&a, from: &seq), now: now, wallMillis: 4_500)
        #expect(Self.answers(late).isEmpty)
        #expect(Self.states(a) == ["call": .pending(delivered: false)])
        // A request refused before the log (an invalid field) is answered at once.
        let invalid = a.invitationRequest(Self.frame(.invite, "", callee: "bob"), user: alice, now: now, wallMillis: 5_000,
                                          reply: loop.makePromise())
        #expect(Self.answers(invalid).map(\.failureCode) == [.invitationInvalidArgument])
        #expect(a.cluster.takeOutbox().isEmpty)
    }

    @Test("§1.8 across nodes: a starting node applies the invitation channel's history up to where it began following, then the live events held meanwhile, and awaits the open invitations' callers")
    func replayThenLive() {
        var a = Self.node("a#1")
        var seq: UInt64 = 0
        _ = a.invitationRequest(Self.frame(.invite, "old", callee: "bob"), user: alice, now: now, wallMillis: 1_000, reply: loop.makePromise())
        let history = Self.written(&a, from: &seq)
        _ = a.invitationRequest(Self.frame(.ackInvitation, "old"), user: bob, now: now, wallMillis: 1_500, reply: loop.makePromise())
        let live = Self.written(&a, from: &seq)
        _ = Self.answers(a.applyInvitationLog(history + live, now: now, wallMillis: 1_600))
        var c = ClusterReplicaTests.node("c#1")
        c.invitationLogStarts(BackplanePositions(channels: [.init(appId: "", channel: InvitationEvent.channel, epoch: "e", seq: 1)],
                                                 firstEpoch: "e"))
        #expect(c.applyInvitationLog(live, now: now, wallMillis: 1_600).isEmpty)   // held
        let replayed = c.replayInvitations(history + live, now: now, wallMillis: 2_000)
        #expect(Self.states(c) == ["old": .received])
        #expect(!replayed.contains { $0.isSend })
        #expect(replayed.contains { if case .schedule(.invitationCaller(alice), _, _) = $0 { true } else { false } })
        // A node that joined a running cluster learns that alice is logged in elsewhere (a's
        // answer to its hello): she was not cut by a restart, and a new login of hers on c
        // ends her calls as anywhere (C-6), instead of keeping them.
        _ = c.applyCluster([ClusterReplicaTests.event("a#1", .sync(to: "c#1", sessions: [ClusterReplicaTests.session("alice", id: 3)]))],
                           now: now, wallMillis: 2_100)
        let stillAwaited = c.invitations.takeAwaited(alice)
        #expect(!stillAwaited)
    }

    @Test("C-6/§1.8 across nodes: a login on node B that ends alice's session on node A cancels her calls from B, in the log before anything her new session does; A, kicking her, writes no cancel of its own (it could land after her new session's invites)")
    func newLoginCancelsFromItsOwnNode() {
        var a = Self.node("a#1"), b = Self.node("b#1")
        var seq: UInt64 = 0
        guard case .admitted = a.login(key: alice, connection: ClusterReplicaTests.connection(1), resumeToken: nil, heartbeat: .milliseconds(100),
                                       presenceTimeout: .milliseconds(600), now: now, wallMillis: 0),
              case .started(let first)? = a.cluster.takeOutbox().first?.kind else {
            Issue.record("alice was not logged in on a")
            return
        }
        let firstStarted = [ClusterReplicaTests.event("a#1", .started(first))]
        _ = a.applyCluster(firstStarted, now: now, wallMillis: 0)   // confirmed: a newer login kicks it
        _ = b.applyCluster(firstStarted, now: now, wallMillis: 0)
        _ = a.invitationRequest(Self.frame(.invite, "call", callee: "bob"), user: alice, now: now, wallMillis: 1_000, reply: loop.makePromise())
        let log = Self.written(&a, from: &seq)
        _ = Self.answers(a.applyInvitationLog(log, now: now, wallMillis: 1_000))
        _ = b.applyInvitationLog(log, now: now, wallMillis: 1_000)

        guard case .admitted = b.login(key: alice, connection: ClusterReplicaTests.connection(2), resumeToken: nil, heartbeat: .milliseconds(100),
                                       presenceTimeout: .milliseconds(600), now: now, wallMillis: 2_000) else {
            Issue.record("alice was not logged in on b")
            return
        }
        _ = b.signalingNewSession(alice, now: now, wallMillis: 2_000)
        let fromB = b.cluster.takeOutbox()
        guard case .started(let second)? = fromB.first?.kind else { Issue.record("no started from b: \(fromB)"); return }
        let written = fromB.compactMap { event -> InvitationEvent.Op? in if case .invitation(let logged) = event.kind { logged.op } else { nil } }
        #expect(written == [.callerGone])

        let kicked = a.applyCluster([ClusterReplicaTests.event("b#1", .started(second))], now: now, wallMillis: 2_010)
        #expect(kicked.kicked.map(\.key) == [alice])
        _ = a.clusterActions(kicked, now: now)
        #expect(!a.cluster.takeOutbox().contains { $0.logChannel == InvitationEvent.channel })

        let cancel = fromB.filter { $0.logChannel == InvitationEvent.channel }.map { event in
            seq += 1
            return (seq: seq, event: event)
        }
        _ = a.applyInvitationLog(cancel, now: now, wallMillis: 2_020)
        _ = b.applyInvitationLog(cancel, now: now, wallMillis: 2_020)
        #expect(Self.states(a) == ["call": .canceled] && Self.states(b) == Self.states(a))
    }
}
