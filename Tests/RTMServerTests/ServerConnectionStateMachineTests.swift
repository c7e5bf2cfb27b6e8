import NIOCore
import NIOWebSocket
import RTMProtocol
import Testing
@testable import RTMServer

/// The server connection's life as a pure value: every state's deadline, what it admits, and
/// how it ends. No sockets, no clock: time is passed in.
struct ServerConnectionStateMachineTests {
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let timeouts = ServerConnectionStateMachine.Timeouts(login: .seconds(12), close: .seconds(1))
    static let alice = UserKey(appId: "app", userId: "alice")

    func machine() -> ServerConnectionStateMachine {
        ServerConnectionStateMachine(acceptedAt: Self.t0, timeouts: Self.timeouts)
    }

    @Test("Before login the deadline is counted from the accept, whatever is read meanwhile (silent, slowloris, pings)")
    func loginDeadlineFromAccept() {
        var m = machine()
        // Bytes trickling in (a slowloris) or pings move `lastRead`, not the deadline.
        #expect(m.deadline(lastRead: Self.t0 + .seconds(11)) == Self.t0 + .seconds(12))
        m.upgraded()
        #expect(m.state == .upgraded)
        #expect(m.deadline(lastRead: Self.t0 + .seconds(11)) == Self.t0 + .seconds(12))
        #expect(m.admit(.ping) == .allowed)
        let action = m.deadlinePassed(now: Self.t0 + .seconds(12))
        #expect(action == .closeWebSocket(code: .policyViolation, reason: "login deadline passed"))
        // Ending: the close deadline; a peer that does not read is dropped then (T-2).
        #expect(m.deadline(lastRead: Self.t0) == Self.t0 + .seconds(13))
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(13)) == .dropConnection)
        #expect(m.socketClosed() == nil)
        #expect(m.deadline(lastRead: Self.t0) == nil)
    }

    @Test("A connection that never finishes its HTTP request is dropped at the login deadline")
    func httpDeadline() {
        var m = machine()
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(12)) == .dropConnection)
        #expect(m.socketClosed() == nil)
    }

    @Test("A plain HTTP answer moves to ending; NIO's 400 for a malformed request needs the close, ours closes itself")
    func httpAnswered() {
        var ours = machine()
        #expect(ours.httpAnswered(now: Self.t0, closesItself: true) == .none)
        #expect(ours.deadline(lastRead: Self.t0) == Self.t0 + .seconds(1))
        var malformed = machine()
        #expect(malformed.httpAnswered(now: Self.t0, closesItself: false) == .closeAfterFlush)
        #expect(malformed.httpAnswered(now: Self.t0, closesItself: false) == .none)
    }

    @Test("SPEC H-2: logged in, the deadline follows the last read; on it the socket is dropped and the session gets its grace window")
    func heartbeatDeadline() {
        var m = machine()
        m.upgraded()
        #expect(m.admit(.publish) == .rejected(RequestRefusal(code: .notLogin, reason: "'publish' needs a login first")))
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
        #expect(m.session == Self.alice)
        #expect(m.deadline(lastRead: Self.t0 + .seconds(100)) == Self.t0 + .seconds(115))
        #expect(m.admit(.publish) == .allowed)
        #expect(m.admit(.login) == .rejected(RequestRefusal(code: .duplicateOperation, reason: "already logged in on this connection")))
        if case .rejected(let refusal) = m.admit(.join) { #expect(refusal.code == .invalidFrame) } else { Issue.record("join admitted") }
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(115)) == .dropConnection)
        #expect(m.socketClosed() == Self.alice)   // lost: grace window (P-1)
    }

    @Test("A close by the server: a close frame, then nothing more is sent or answered; the hub decides about the grace window (none after logout, kick, expiry)")
    func endedByWill() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
        #expect(m.close(code: .normalClosure, now: Self.t0 + .seconds(1)) == .closeWebSocket(code: .normalClosure, reason: ""))
        #expect(m.close(code: .normalClosure, now: Self.t0 + .seconds(1)) == .none)   // already closing
        #expect(m.admit(.publish) == .ignored)
        #expect(m.admit(.ping) == .ignored)
        #expect(!m.maySend)
        #expect(m.deadline(lastRead: Self.t0) == Self.t0 + .seconds(2))
        // Handed to the hub as lost; the hub ignores it when the session already ended (logout).
        #expect(m.socketClosed() == Self.alice)
    }

    @Test("A lost connection (I/O error, slow consumer) keeps the session's grace window; a STREAM member just leaves")
    func lost() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
        #expect(m.lost(now: Self.t0) == .dropConnection)
        #expect(m.lost(now: Self.t0) == .none)
        #expect(m.socketClosed() == Self.alice)

        var s = machine()
        s.upgraded()
        let membership = StreamMembership(channel: ChannelKey(appId: "app", name: "s"), userId: "alice")
        s.joined(membership, readTimeout: .seconds(2))
        #expect(s.membership == membership)
        #expect(s.admit(.publish) == .allowed)
        #expect(s.deadline(lastRead: Self.t0) == Self.t0 + .seconds(2))
        #expect(s.deadlinePassed(now: Self.t0 + .seconds(2)) == .dropConnection)
        #expect(s.socketClosed() == nil)
    }

    @Test("A protocol violation answered by the WebSocket layer: nothing more is sent, the session is lost (grace window)")
    func violation() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
        m.violationAnswered(now: Self.t0)
        #expect(!m.maySend)
        #expect(m.admit(.publish) == .ignored)
        #expect(m.deadline(lastRead: Self.t0) == Self.t0 + .seconds(1))
        #expect(m.socketClosed() == Self.alice)
    }

    @Test("A socket closed by the peer while logged in is a lost connection (grace window); before login it is nothing")
    func peerClose() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
        #expect(m.socketClosed() == Self.alice)
        #expect(m.deadlinePassed(now: Self.t0) == .none)   // a sweep racing the close

        var early = machine()
        #expect(early.socketClosed() == nil)
    }

    @Test("C-6 across nodes: a login waiting for the cluster admits only pings, refuses a second login, keeps the login deadline, and its admitted session gets its grace window if the connection goes")
    func awaitingCluster() {
        var m = machine()
        m.upgraded()
        m.awaitCluster(Self.alice)
        #expect(m.state == .awaitingCluster(Self.alice))
        #expect(m.session == nil)   // not logged in: no request of a session runs yet
        #expect(m.admit(.ping) == .allowed)
        #expect(m.admit(.login) == .rejected(RequestRefusal(code: .loginCanceled, reason: "a login on this connection is still waiting for the cluster")))
        #expect(m.admit(.subscribe) == .rejected(RequestRefusal(code: .notLogin, reason: "'subscribe' needs a login first")))
        #expect(m.deadline(lastRead: Self.t0 + .seconds(11)) == Self.t0 + .seconds(12))
        // The cluster never confirmed within the login deadline: a close frame, and the session
        // the hub admitted is handed over as lost when the socket closes.
        var late = m
        #expect(late.deadlinePassed(now: Self.t0 + .seconds(12)) == .closeWebSocket(code: .policyViolation, reason: "login deadline passed"))
        #expect(late.socketClosed() == Self.alice)
        // The peer went away meanwhile: the same.
        var gone = m
        #expect(gone.socketClosed() == Self.alice)
        // Confirmed: logged in.
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
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
        m.joined(Self.room, readTimeout: .seconds(2))
        #expect(m.session == nil)   // K-3: no session, no PCU: a stream member only
        #expect(m.admit(.publish) == .allowed)
        #expect(m.admit(.ping) == .allowed)
        // H-3: the deadline follows the last read by the stream's short timeout.
        #expect(m.deadline(lastRead: Self.t0 + .seconds(30)) == Self.t0 + .seconds(32))
        #expect(m.deadlinePassed(now: Self.t0 + .seconds(32)) == .dropConnection)
        #expect(m.socketClosed() == nil)   // the member just leaves: nothing to wait for
    }

    @Test("SPEC K-2: one MESSAGE session per connection: a second login on it is refused with duplicateOperation, and a join (a STREAM connection's first request) with invalidFrame, whatever the order")
    func oneSessionPerConnection() {
        var m = machine()
        m.upgraded()
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
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
        m.loggedIn(Self.alice, readTimeout: .seconds(15))
        _ = m.close(code: .normalClosure, now: Self.t0 + .seconds(3))
        #expect(m.admit(.publish) == .ignored)
        #expect(m.deadline(lastRead: Self.t0 + .seconds(3)) == Self.t0 + .seconds(4))
    }
}
