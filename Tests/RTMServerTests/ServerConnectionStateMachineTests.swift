import NIOCore
import NIOWebSocket
import RTMAuth
import RTMProtocol
import Testing
@testable import RTMServer

/// The server connection's life as a pure value: every state's deadline, what it admits, and
/// how it ends. No sockets, no clock: time is passed in.
struct ServerConnectionStateMachineTests {
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let timeouts = ServerConnectionStateMachine.Timeouts(login: .seconds(12), close: .seconds(1))
    static let alice = UserKey(appId: "app", userId: "alice")
    static let access = SessionAccess(userId: "alice", capabilities: nil, namespaces: [])
    static let unreachable = TimeAmount.seconds(30)

    static let limits = ConnectionLimits(publishRatePerSecond: 0, errorReplyRatePerSecond: 0, errorReplyBurst: 0)

    func machine(limits: ConnectionLimits = Self.limits) -> ServerConnectionStateMachine {
        ServerConnectionStateMachine(acceptedAt: Self.t0, timeouts: Self.timeouts, rates: ConnectionRates(limits))
    }

    @Test("Before login the deadline is counted from the accept, whatever is read meanwhile (silent, slowloris, pings)")
    func loginDeadlineFromAccept() {
        var m = machine()
        // Bytes trickling in (a slowloris) or pings move the last read, not the deadline.
        m.read(at: Self.t0 + .seconds(11))
        #expect(m.deadline == Self.t0 + .seconds(12))
        m.upgraded()
        #expect(m.state == .upgraded)
        m.read(at: Self.t0 + .seconds(11))
        #expect(m.deadline == Self.t0 + .seconds(12))
        #expect(m.admit(.ping) == .allowed)
        let action = m.deadlinePassed(now: Self.t0 + .seconds(12))
        #expect(action == .closeWebSocket(code: .policyViolation, reason: "login deadline passed"))
        // Ending: the close deadline; a peer that does not read is dropped then (T-2).
        m.read(at: Self.t0)
        #expect(m.deadline == Self.t0 + .seconds(13))
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(13)) == .dropConnection)
        #expect(m.socketClosed().lostSession == nil)
        m.read(at: Self.t0)
        #expect(m.deadline == nil)
    }

    @Test("A connection that never finishes its HTTP request is dropped at the login deadline")
    func httpDeadline() {
        var m = machine()
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(12)) == .dropConnection)
        #expect(m.socketClosed().lostSession == nil)
    }

    @Test("A plain HTTP answer moves to ending; NIO's 400 for a malformed request needs the close, ours closes itself")
    func httpAnswered() {
        var ours = machine()
        #expect(ours.httpAnswered(now: Self.t0, closesItself: true) == .none)
        ours.read(at: Self.t0)
        #expect(ours.deadline == Self.t0 + .seconds(1))
        var malformed = machine()
        #expect(malformed.httpAnswered(now: Self.t0, closesItself: false) == .closeAfterFlush)
        #expect(malformed.httpAnswered(now: Self.t0, closesItself: false) == .none)
    }

    @Test("SPEC H-2: logged in, the deadline follows the last read; on it the socket is dropped and the session gets its grace window")
    func heartbeatDeadline() {
        var m = machine()
        m.upgraded()
        #expect(m.admit(.publish) == .rejected(RequestRefusal(code: .notLogin, reason: "'publish' needs a login first")))
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.session == Self.alice)
        m.read(at: Self.t0 + .seconds(100))
        #expect(m.deadline == Self.t0 + .seconds(115))
        #expect(m.admit(.publish) == .allowed)
        #expect(m.admit(.login) == .rejected(RequestRefusal(code: .duplicateOperation, reason: "already logged in on this connection")))
        if case .rejected(let refusal) = m.admit(.join) { #expect(refusal.code == .invalidFrame) } else { Issue.record("join admitted") }
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(115)) == .dropConnection)
        #expect(m.socketClosed().lostSession == Self.alice)   // lost: grace window (P-1)
    }

    @Test("§2.13: the token's expiry is the connection's deadline when it comes first; at it the session is ended by will (tokenExpired), not lost; a renewal moves it")
    func tokenExpiry() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        m.tokenExpires(at: Self.t0 + .seconds(5))
        m.read(at: Self.t0)
        #expect(m.deadline == Self.t0 + .seconds(5))
        // A renewal pushes it past the heartbeat deadline: that one is due first again.
        m.tokenExpires(at: Self.t0 + .seconds(60))
        m.read(at: Self.t0 + .seconds(10))
        #expect(m.deadline == Self.t0 + .seconds(25))
        m.read(at: Self.t0 + .seconds(50))
        #expect(m.deadline == Self.t0 + .seconds(60))
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(60)) == .tokenExpired)
        // Still logged in: the handler ends the session and closes (a close by will, no grace window).
        #expect(m.session == Self.alice && m.tokenExpiry == nil)
        #expect(m.close(code: .policyViolation, reason: "token expired", now: Self.t0 + .seconds(60))
                == .closeWebSocket(code: .policyViolation, reason: "token expired"))
        // A STREAM member's token too.
        var stream = machine()
        stream.upgraded()
        stream.joined(Self.room, access: Self.access, readTimeout: .seconds(2))
        stream.tokenExpires(at: Self.t0 + .seconds(1))
        stream.read(at: Self.t0)
        #expect(stream.deadline == Self.t0 + .seconds(1))
        #expect(stream.deadlinePassed(now: Self.t0 + .seconds(1)) == .tokenExpired)
        // Without an expiry the heartbeat deadline alone.
        stream.read(at: Self.t0)
        #expect(stream.deadline == Self.t0 + .seconds(2))
        #expect(stream.deadlinePassed(now: Self.t0 + .seconds(2)) == .dropConnection)
    }

    @Test("RFC 6455 §5.5.1: a subscription entered in the fan-out table while open; none once the close frame is going out, and the close takes every one out")
    func fanoutChannels() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        let entered = [m.enterFanout("a"), m.enterFanout("b"), m.enterFanout("a")]   // again: options change
        #expect(entered == [true, true, true])
        let left = [m.leaveFanout("b"), m.leaveFanout("b")]
        #expect(left == [true, false])
        #expect(m.fanoutChannels == ["a"])
        _ = m.close(code: .normalClosure, now: Self.t0)
        let late = m.enterFanout("late")   // a subscribe answered after the close frame: not entered
        #expect(!late)
        let taken = m.leaveFanout()
        #expect(taken == ["a"])
        #expect(m.fanoutChannels.isEmpty)
    }

    @Test("rtm_disconnects_total: why a connection ended is the first cause that closed it (a client's close frame answered is not a server close)")
    func disconnectCause() {
        func loggedIn() -> ServerConnectionStateMachine {
            var m = machine()
            m.upgraded()
            m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
            return m
        }
        var client = loggedIn()
        _ = client.close(code: .normalClosure, now: Self.t0, cause: .clientClose)
        _ = client.close(code: .policyViolation, now: Self.t0)   // a later close: not a second cause
        #expect(client.socketClosed().cause == .clientClose)
        var server = loggedIn()
        _ = server.close(code: .goingAway, now: Self.t0)
        #expect(server.socketClosed().cause == .goingAway)
        var kicked = loggedIn()
        _ = kicked.close(code: .policyViolation, now: Self.t0)
        #expect(kicked.socketClosed().cause == .policy)
        var silent = loggedIn()
        _ = silent.deadlinePassed(now: Self.t0 + .seconds(15))
        #expect(silent.socketClosed().cause == .timeout)
        var slow = loggedIn()
        _ = slow.lost(now: Self.t0, cause: .slowConsumer)
        #expect(slow.socketClosed().cause == .slowConsumer)
        var violating = loggedIn()
        violating.violationAnswered(now: Self.t0)
        #expect(violating.socketClosed().cause == .protocolViolation)
        var vanished = loggedIn()
        #expect(vanished.socketClosed().cause == .connectionLost)
        var failed = loggedIn()
        _ = failed.lost(now: Self.t0)
        #expect(failed.socketClosed().cause == .connectionLost)
    }

    @Test("A close by the server: a close frame, then nothing more is sent or answered; the hub decides about the grace window (none after logout, kick, expiry)")
    func endedByWill() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.close(code: .normalClosure, now: Self.t0 + .seconds(1)) == .closeWebSocket(code: .normalClosure, reason: ""))
        #expect(m.close(code: .normalClosure, now: Self.t0 + .seconds(1)) == .none)   // already closing
        #expect(m.admit(.publish) == .ignored)
        #expect(m.admit(.ping) == .ignored)
        #expect(!m.maySend)
        m.read(at: Self.t0)
        #expect(m.deadline == Self.t0 + .seconds(2))
        // Handed to the hub as lost; the hub ignores it when the session already ended (logout).
        #expect(m.socketClosed().lostSession == Self.alice)
    }

    @Test("A lost connection (I/O error, slow consumer) keeps the session's grace window; a STREAM member just leaves")
    func lost() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.lost(now: Self.t0) == .dropConnection)
        #expect(m.lost(now: Self.t0) == .none)
        #expect(m.socketClosed().lostSession == Self.alice)

        var s = machine()
        s.upgraded()
        let membership = StreamMembership(channel: ChannelKey(appId: "app", name: "s"), userId: "alice")
        s.joined(membership, access: Self.access, readTimeout: .seconds(2))
        #expect(s.membership == membership)
        #expect(s.admit(.publishTopic) == .allowed)
        s.read(at: Self.t0)
        #expect(s.deadline == Self.t0 + .seconds(2))
        #expect(s.deadlinePassed(now: Self.t0 + .seconds(2)) == .dropConnection)
        #expect(s.socketClosed().lostSession == nil)
    }

    @Test("A protocol violation answered by the WebSocket layer: nothing more is sent, the session is lost (grace window)")
    func violation() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        m.violationAnswered(now: Self.t0)
        #expect(!m.maySend)
        #expect(m.admit(.publish) == .ignored)
        m.read(at: Self.t0)
        #expect(m.deadline == Self.t0 + .seconds(1))
        #expect(m.socketClosed().lostSession == Self.alice)
    }

    @Test("A socket closed by the peer while logged in is a lost connection (grace window); before login it is nothing")
    func peerClose() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.socketClosed().lostSession == Self.alice)
        #expect(m.deadlinePassed(now: Self.t0) == .none)   // a sweep racing the close

        var early = machine()
        #expect(early.socketClosed().lostSession == nil)
    }

    @Test("C-6 across nodes: a login waiting for the cluster admits only pings, refuses a second login, keeps the login deadline, and its admitted session gets its grace window if the connection goes")
    func awaitingCluster() {
        var m = machine()
        m.upgraded()
        m.awaitCluster(Self.alice, access: Self.access)
        #expect(m.state == .awaitingCluster(Self.alice, access: Self.access))
        #expect(m.session == nil)   // not logged in: no request of a session runs yet
        #expect(m.admit(.ping) == .allowed)
        #expect(m.admit(.login) == .rejected(RequestRefusal(code: .loginCanceled, reason: "a login on this connection is still waiting for the cluster")))
        #expect(m.admit(.subscribe) == .rejected(RequestRefusal(code: .notLogin, reason: "'subscribe' needs a login first")))
        m.read(at: Self.t0 + .seconds(11))
        #expect(m.deadline == Self.t0 + .seconds(12))
        // The cluster never confirmed within the login deadline: a close frame, and the session
        // the hub admitted is handed over as lost when the socket closes.
        var late = m
        #expect(late.deadlinePassed(now: Self.t0 + .seconds(12)) == .closeWebSocket(code: .policyViolation, reason: "login deadline passed"))
        #expect(late.socketClosed().lostSession == Self.alice)
        // The peer went away meanwhile: the same.
        var gone = m
        #expect(gone.socketClosed().lostSession == Self.alice)
        // Confirmed: logged in.
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.session == Self.alice)
    }
}

extension ServerConnectionStateMachineTests {
    static let room = StreamMembership(channel: ChannelKey(appId: "app", name: "room"), userId: "alice")

    @Test("SPEC K-3, H-3: a STREAM connection is joined by its first request; it admits stream requests, never a login; silence for its idle timeout drops it with no session grace window")
    func streamConnection() {
        var m = machine()
        m.upgraded()
        #expect(m.admit(.join) == .allowed)
        m.joined(Self.room, access: Self.access, readTimeout: .seconds(2))
        #expect(m.session == nil)   // K-3: no session, no PCU: a stream member only
        #expect(m.admit(.publishTopic) == .allowed)
        // A MESSAGE session's requests are not a STREAM connection's, and the reverse.
        if case .rejected(let refusal) = m.admit(.publish) { #expect(refusal.code == .invalidFrame) } else { Issue.record("publish admitted on a STREAM connection") }
        #expect(m.admit(.ping) == .allowed)
        // H-3: the deadline follows the last read by the stream's short timeout.
        m.read(at: Self.t0 + .seconds(30))
        #expect(m.deadline == Self.t0 + .seconds(32))
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(32)) == .dropConnection)
        #expect(m.socketClosed().lostSession == nil)   // the member just leaves: nothing to wait for
    }

    @Test("SPEC K-2: one MESSAGE session per connection: a second login on it is refused with duplicateOperation, and a join (a STREAM connection's first request) with invalidFrame, whatever the order")
    func oneSessionPerConnection() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        for _ in 0..<2 {
            #expect(m.admit(.login) == .rejected(RequestRefusal(code: .duplicateOperation, reason: "already logged in on this connection")))
            if case .rejected(let refusal) = m.admit(.join) { #expect(refusal.code == .invalidFrame) } else { Issue.record("join admitted") }
        }
        #expect(m.session == Self.alice)
    }

    @Test("SPEC H-4: an explicit close ends the connection at once: nothing is admitted afterwards and no deadline but the close's remains")
    func explicitCloseIsImmediate() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        _ = m.close(code: .normalClosure, now: Self.t0 + .seconds(3))
        #expect(m.admit(.publish) == .ignored)
        m.read(at: Self.t0 + .seconds(3))
        #expect(m.deadline == Self.t0 + .seconds(4))
    }

    @Test("P-1: each state carries its data: what a closing connection holds (a logged-in session: its counter, mailbox and fan-out; a stream membership) stays in ending and is released once when the socket closes; a login still waiting for the cluster holds nothing yet")
    func closeReleasesWhatWasHeld() {
        var m = machine()
        m.upgraded()
        #expect(m.held == nil)
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.held == .session(Self.alice, unreachableAfter: Self.unreachable) && m.held?.appId == "app")
        _ = m.close(code: .normalClosure, now: Self.t0)
        #expect(m.held == .session(Self.alice, unreachableAfter: Self.unreachable))   // ending: still to release
        #expect(m.access == nil && m.session == nil)   // nothing runs under it any more
        #expect(m.socketClosed() == .init(lostSession: Self.alice, held: .session(Self.alice, unreachableAfter: Self.unreachable), cause: .normal))
        #expect(m.socketClosed() == .init())   // once

        var stream = machine()
        stream.upgraded()
        stream.joined(Self.room, access: Self.access, readTimeout: .seconds(2))
        #expect(stream.deadlinePassed(now: Self.t0 + .seconds(2)) == .dropConnection)
        #expect(stream.held == .member(Self.room))
        #expect(stream.socketClosed() == .init(lostSession: nil, held: .member(Self.room), cause: .timeout))

        var waiting = machine()
        waiting.upgraded()
        waiting.awaitCluster(Self.alice, access: Self.access)
        #expect(waiting.held == nil && waiting.access == Self.access)
        #expect(waiting.lost(now: Self.t0) == .dropConnection)
        #expect(waiting.socketClosed() == .init(lostSession: Self.alice, held: nil))   // grace window; nothing was attached
    }

    @Test("SPEC C-7: new grants (a renewal, reloaded namespaces) replace the state's; a login confirmed by the cluster keeps the grants it was admitted with; nothing is granted once closing")
    func grants() {
        let narrower = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["room.*": [.subscribe]]), namespaces: [])
        var m = machine()
        m.upgraded()
        m.grant(narrower)   // not logged in: nothing to grant
        #expect(m.access == nil)
        m.awaitCluster(Self.alice, access: narrower)
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        #expect(m.access == narrower)   // admitted with these
        m.grant(Self.access)
        #expect(m.access == Self.access && m.state == .loggedIn(Self.alice, access: Self.access, silence: .init(threshold: Self.unreachable)))
        _ = m.lost(now: Self.t0)
        m.grant(narrower)
        #expect(m.access == nil)
    }

    @Test("§1.7: a logged-in user silent past its threshold is reported unreachable once, and online once when it speaks again; nothing before login or once closing; a lost connection hands the threshold over")
    func silence() {
        var m = machine()
        m.upgraded()
        var key = m.silent(now: Self.t0 + .seconds(100))
        #expect(key == nil)   // not logged in
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: .seconds(20))
        #expect(m.isLoggedIn && !m.isReportedSilent)
        key = m.silent(now: Self.t0 + .seconds(20))
        #expect(key == nil)   // not past it yet
        key = m.silent(now: Self.t0 + .seconds(21))
        #expect(key == Self.alice && m.isReportedSilent)
        key = m.silent(now: Self.t0 + .seconds(40))
        #expect(key == nil)   // once
        key = m.spoke()
        #expect(key == Self.alice && !m.isReportedSilent)
        key = m.spoke()
        #expect(key == nil)   // once
        _ = m.lost(now: Self.t0 + .seconds(50))
        key = m.silent(now: Self.t0 + .seconds(100))
        #expect(key == nil && !m.isLoggedIn)
        #expect(m.socketClosed() == .init(lostSession: Self.alice, held: .session(Self.alice, unreachableAfter: .seconds(20))))
    }

    @Test("SPEC §8: publishes over the rate are refused (a second's worth at once, then the rate); a reload gives new, full buckets")
    func publishRate() {
        var m = machine(limits: ConnectionLimits(publishRatePerSecond: 2, errorReplyRatePerSecond: 0, errorReplyBurst: 0))
        m.upgraded()
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        let first = [m.admitPublish(now: Self.t0), m.admitPublish(now: Self.t0), m.admitPublish(now: Self.t0)]
        #expect(first == [true, true, false])
        let later = [m.admitPublish(now: Self.t0 + .milliseconds(500)), m.admitPublish(now: Self.t0 + .milliseconds(500))]
        #expect(later == [true, false])   // one token in half a second
        // Read late because the server was busy: the bucket holds that much more.
        let late = (0..<3).map { _ in m.admitPublish(now: Self.t0 + .seconds(2), lateness: .milliseconds(500)) }
        #expect(late == [true, true, true])
        m.reload(ConnectionRates(ConnectionLimits(publishRatePerSecond: 0, errorReplyRatePerSecond: 0, errorReplyBurst: 0)), now: Self.t0 + .seconds(2))
        let unlimited = (0..<100).allSatisfy { _ in m.admitPublish(now: Self.t0 + .seconds(2)) }
        #expect(unlimited)
    }

    @Test("SPEC §8: a connection that keeps sending rejected requests is closed (1008) once its error budget is spent, instead of answered; the last error's code is kept for the login count")
    func errorBudget() {
        var m = machine(limits: ConnectionLimits(publishRatePerSecond: 0, errorReplyRatePerSecond: 1, errorReplyBurst: 3))
        m.upgraded()
        m.loginAttempted()
        #expect(m.lastErrorCode == nil)
        m.loggedIn(Self.alice, access: Self.access, readTimeout: .seconds(15), unreachableAfter: Self.unreachable)
        let answered = (0..<3).map { _ in m.errorReply(code: -11006, now: Self.t0) }
        #expect(answered == [nil, nil, nil])
        #expect(m.lastErrorCode == -11006)
        #expect(m.errorReply(code: -11006, now: Self.t0 + .seconds(1)) == nil)   // the rate refills it
        let spent = m.errorReply(code: -10001, now: Self.t0 + .seconds(1))
        #expect(spent == .closeWebSocket(code: .policyViolation, reason: ServerConnectionStateMachine.floodReason))
        #expect(m.lastErrorCode == -10001)
        #expect(!m.maySend)
        #expect(m.admit(.publish) == .ignored)
    }
}
