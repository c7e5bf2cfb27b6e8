import NIOCore
import NIOWebSocket
import RTMProtocol

/// The life of one server connection, from the TCP accept to the close, as a plain value
/// (the model is the SDK's `LinkStateMachine`). `ConnectionHandler` owns one, feeds it
/// events and performs the actions it returns; the machine never touches a socket or the clock.
///
/// ```
///  accepted ──upgrade──▶ upgraded ──login──▶ loggedIn (MESSAGE) ──┐
///     │                     ├──login (cluster)──▶ awaitingCluster ─┤ (then loggedIn)
///     │                     └──────join───▶ joined (STREAM) ─────┤
///     │                                                          ▼
///     └──HTTP request answered / deadline / error ─────────▶ ending ──socket closed──▶ closed
/// ```
///
/// **Every connection in every state has a deadline**, checked by its event loop's sweep
/// (`LoopLiveness`, every `livenessCheckInterval`):
///
/// | state      | requests allowed                          | deadline                                        | when it passes                                 |
/// |------------|-------------------------------------------|-------------------------------------------------|------------------------------------------------|
/// | `accepted` | an HTTP request (upgrade, /health, /metrics) | accept + `loginDeadline` (however slowly bytes trickle in) | socket closed (no WebSocket to speak on) |
/// | `upgraded` | `login`, `join`, `ping`; anything else `-10002` notLogin | accept + `loginDeadline` (pings do not extend it) | close frame 1008 "login deadline passed" |
/// | `awaitingCluster` | `ping`; `login` `-10015` loginCanceled; anything else `-10002` notLogin | accept + `loginDeadline` | close frame 1008 "login deadline passed"; the admitted session gets its grace window |
/// | `loggedIn` | everything but `login` (`-10017`) and `join` | last read + heartbeat + `heartbeatSlack` (SPEC H-2), or the token's expiry if earlier | socket closed; the session enters its grace window. At the token's expiry: `kicked` (tokenExpired), the session ends |
/// | `joined`   | the stream requests (§10), `ping`           | last read + `streamIdleTimeout` (SPEC H-3), or the token's expiry if earlier | socket closed; the member leaves. At the token's expiry: `kicked`, the member leaves |
/// | `ending`   | none: ignored, nothing is sent after a close frame (RFC 6455 §5.5.1) | entered + `closeTimeout` | socket closed (a peer that does not read never holds it, SPEC T-2) |
///
/// **Each state carries its data**: the session and its grants (`SessionAccess`) while admitted
/// or logged in, the stream membership and its grants while joined, and in `ending` what the
/// close must still release (`Held`), so that the handler derives them from the state instead
/// of keeping copies that could disagree with it.
///
/// When the socket of a logged-in connection closes, the hub is told the connection was lost
/// and the session gets its grace window (SPEC P-1), unless the session already ended or moved
/// on (logout, kick, token expiry, a resume on another connection): the hub ignores a lost
/// connection that is no longer its session's. So a client's close frame without `logout`, a
/// heartbeat timeout, an I/O error or a close for abuse all leave a grace window.
struct ServerConnectionStateMachine {
    enum State: Equatable {
        /// TCP accepted; the HTTP request (upgrade or not) has not been taken yet.
        case accepted
        /// A WebSocket; no `login` or `join` yet.
        case upgraded
        /// Cluster mode: a `login` the hub admitted, whose reply waits until the user's sessions
        /// on other nodes have ended (C-6 across nodes). Not logged in yet, but the session
        /// exists: losing the connection now gives it its grace window.
        case awaitingCluster(UserKey, access: SessionAccess)
        /// A MESSAGE connection with its session, what it may do, and its silence (§1.7).
        case loggedIn(UserKey, access: SessionAccess, silence: Silence)
        /// A STREAM connection, member of one stream channel, and what it may do.
        case joined(StreamMembership, access: SessionAccess)
        /// Closing: the last frames are being flushed. `lostSession` is the logged-in session
        /// whose connection was lost (it gets its grace window once the socket is closed);
        /// `held`, what the close releases; `cause`, why it ends (`rtm_disconnects_total`: the
        /// first cause wins, so the close frame answering a client's is not a second one).
        case ending(since: NIODeadline, lostSession: UserKey?, held: Held?, cause: DisconnectReason)
        /// The socket is closed.
        case closed
    }

    /// A logged-in session's silence, for the peer online status (AGORA_REFERENCE §1.7): no
    /// whole frame for longer than `threshold` and the user is reported unreachable (once);
    /// online again when it speaks.
    struct Silence: Equatable {
        let threshold: TimeAmount
        /// Reported unreachable, and to be reported online when it speaks again.
        var reported = false
    }

    /// What a logged-in or joined connection holds in the server until its socket is closed:
    /// the session's connection counter, mailbox attachment and fan-out entries, or the stream
    /// channel membership and its counter. Kept through `ending`, released once (`socketClosed`).
    enum Held: Equatable {
        /// A session, and the silence after which its user is unreachable (§1.7) once the
        /// connection is lost.
        case session(UserKey, unreachableAfter: TimeAmount)
        case member(StreamMembership)

        /// The app it belongs to.
        var appId: String {
            switch self {
            case .session(let key, _): key.appId
            case .member(let membership): membership.channel.appId
            }
        }
    }

    /// What the socket's close leaves to do (`socketClosed`).
    struct Closed: Equatable {
        /// The session whose connection was lost: it gets its grace window (SPEC P-1).
        var lostSession: UserKey?
        /// What to release.
        var held: Held?
        /// Why the connection ended (`connectionLost`: its socket closed before anything else).
        var cause: DisconnectReason = .connectionLost
    }

    /// What the handler must do.
    enum Action: Equatable {
        case none
        /// Close the socket now, without a close frame.
        case dropConnection
        /// Send a WebSocket close frame, then close the socket once it is written (the
        /// `ending` deadline closes it anyway if the peer does not read).
        case closeWebSocket(code: WebSocketErrorCode, reason: String)
        /// Close the socket once what was written before has gone out (an HTTP answer).
        case closeAfterFlush
        /// The token expired without a renewal (§2.13): end the session or membership, tell the
        /// client (`kicked`, tokenExpired) and close. The state is unchanged until that close.
        case tokenExpired
    }

    /// Whether a request may run in the current state.
    enum Admission: Equatable {
        case allowed
        /// Answer with this error (the request's `id` attached).
        case rejected(RequestRefusal)
        /// Closing: no answer (nothing is sent after the close frame).
        case ignored
    }

    /// The configured timeouts the deadlines are made of.
    struct Timeouts: Equatable {
        /// From accept to `login`/`join` (`ServerConfiguration.loginDeadline`).
        var login: TimeAmount
        /// From the start of a close to the socket being closed (`closeTimeout`).
        var close: TimeAmount
    }

    private(set) var state: State = .accepted {
        didSet { phase = Phase(state) }
    }
    /// What the deadlines, the sweep and every read ask of the state, kept beside it as plain
    /// values (set at each change of state): reading a state's payload (a session's key and
    /// grants) copies and retains it, and the loop's sweep and each read batch ask these of
    /// every connection, idle ones included.
    private var phase = Phase(.accepted)

    /// The state's kind and the plain values of its payload that the deadlines depend on.
    private struct Phase {
        enum Kind { case accepted, upgraded, awaitingCluster, loggedIn, joined, ending, closed }
        var kind: Kind
        /// `ending`: since when.
        var endingSince: NIODeadline?
        /// `loggedIn`: its silence (§1.7).
        var silence: Silence?

        init(_ state: State) {
            switch state {
            case .accepted: kind = .accepted
            case .upgraded: kind = .upgraded
            case .awaitingCluster: kind = .awaitingCluster
            case .loggedIn(_, _, let silence): kind = .loggedIn; self.silence = silence
            case .joined: kind = .joined
            case .ending(let since, _, _, _): kind = .ending; endingSince = since
            case .closed: kind = .closed
            }
        }
    }
    let acceptedAt: NIODeadline
    let timeouts: Timeouts
    /// Logged in or joined: the read timeout (heartbeat + slack, or the stream timeout).
    private var readTimeout: TimeAmount = .zero
    /// Logged in or joined: when the token (or the capability token, whichever is first)
    /// expires unless renewed; nil: it does not.
    private(set) var tokenExpiry: NIODeadline?
    /// The channels this connection is entered for in its event loop's fan-out table (its
    /// subscriptions; a STREAM connection's channel), until the close takes them out
    /// (`leaveFanout()`). None is entered once the connection is closing: channel messages go
    /// straight from the table to the socket, and nothing may follow the close frame.
    private(set) var fanoutChannels: Set<String> = []
    /// When the last whole frame arrived (`read(at:)`): the liveness deadline counts from it.
    private(set) var lastRead: NIODeadline
    /// The publish rate and the error-reply budget (`ServerConnectionStateMachine+Budgets`).
    var budgets: Budgets
    /// The code of the last error reply sent (a refused login's, for `rtm_logins_total`).
    var lastErrorCode: Int?

    init(acceptedAt: NIODeadline, timeouts: Timeouts, rates: ConnectionRates) {
        self.acceptedAt = acceptedAt
        self.timeouts = timeouts
        self.budgets = Budgets(rates, start: acceptedAt)
        self.lastRead = acceptedAt
    }

    /// The logged-in session, if any.
    var session: UserKey? {
        if case .loggedIn(let key, _, _) = state { return key }
        return nil
    }

    /// Logged in (a session whose silence the loop's sweep watches).
    @inline(__always)
    var isLoggedIn: Bool { phase.kind == .loggedIn }

    /// The session the hub holds for this connection: logged in, or admitted and waiting for
    /// the cluster (losing the connection gives it its grace window).
    private var admittedSession: UserKey? {
        switch state {
        case .loggedIn(let key, _, _), .awaitingCluster(let key, _): key
        default: nil
        }
    }

    /// The stream membership, if joined.
    var membership: StreamMembership? {
        if case .joined(let membership, _) = state { return membership }
        return nil
    }

    /// What the connection holds now, or, closing, what its close will release.
    var held: Held? {
        switch state {
        case .loggedIn(let key, _, let silence): .session(key, unreachableAfter: silence.threshold)
        case .joined(let membership, _): .member(membership)
        case .ending(_, _, let held, _): held
        case .accepted, .upgraded, .awaitingCluster, .closed: nil
        }
    }

    /// What the session or membership may do (admitted, logged in or joined); nil otherwise.
    var access: SessionAccess? {
        switch state {
        case .awaitingCluster(_, let access), .loggedIn(_, let access, _), .joined(_, let access): access
        case .accepted, .upgraded, .ending, .closed: nil
        }
    }

    /// New grants for the session or membership (a renewal, reloaded namespaces); ignored in
    /// any other state.
    mutating func grant(_ access: SessionAccess) {
        switch state {
        case .awaitingCluster(let key, _): state = .awaitingCluster(key, access: access)
        case .loggedIn(let key, _, let silence): state = .loggedIn(key, access: access, silence: silence)
        case .joined(let membership, _): state = .joined(membership, access: access)
        case .accepted, .upgraded, .ending, .closed: break
        }
    }

    /// `ending` from the current state, keeping what the close releases.
    private func ending(since now: NIODeadline, lostSession: UserKey?, cause: DisconnectReason) -> State {
        .ending(since: now, lostSession: lostSession, held: held, cause: cause)
    }

    // MARK: deadlines

    /// A whole frame arrived at `now` (SPEC T-3: every inbound frame is a sign of life; bytes
    /// of a frame still open are not, so a peer that trickles a frame it never finishes is not
    /// alive).
    mutating func read(at now: NIODeadline) {
        lastRead = now
    }

    /// When the connection is due, given when it last read a whole frame; nil once closed.
    @inline(__always)
    var deadline: NIODeadline? {
        switch phase.kind {
        case .accepted, .upgraded, .awaitingCluster: acceptedAt + timeouts.login
        case .loggedIn, .joined: tokenExpiry.map { min($0, lastRead + readTimeout) } ?? lastRead + readTimeout
        case .ending: phase.endingSince.map { $0 + timeouts.close }
        case .closed: nil
        }
    }

    /// Until when nothing can come due as long as the state does not change: the deadline, or
    /// when the silence of a logged-in session passes its threshold (§1.7), whichever is first;
    /// nil once closed.
    @inline(__always)
    var nextCheck: NIODeadline? {
        guard let silence = phase.silence, !silence.reported else { return deadline }
        let silent = lastRead + silence.threshold
        return deadline.map { min($0, silent) } ?? silent
    }

    /// The sweep found the deadline passed (`now` ≥ `deadline`).
    mutating func deadlinePassed(now: NIODeadline) -> Action {
        switch state {
        case .accepted:
            state = ending(since: now, lostSession: nil, cause: .timeout)
            return .dropConnection
        case .upgraded:
            // T-1 on the server side: no login (or join) within the login deadline.
            state = ending(since: now, lostSession: nil, cause: .timeout)
            return .closeWebSocket(code: .policyViolation, reason: "login deadline passed")
        case .awaitingCluster(let key, _):
            // The cluster did not confirm in time: no reply; the admitted session is lost.
            state = ending(since: now, lostSession: key, cause: .timeout)
            return .closeWebSocket(code: .policyViolation, reason: "login deadline passed")
        case .loggedIn where tokenExpired(now), .joined where tokenExpired(now):
            tokenExpiry = nil
            return .tokenExpired
        case .loggedIn(let key, _, _):
            // SPEC H-2: the peer is presumed gone; a close frame would only sit in its buffer.
            state = ending(since: now, lostSession: key, cause: .timeout)
            return .dropConnection
        case .joined:
            state = ending(since: now, lostSession: nil, cause: .timeout)
            return .dropConnection
        case .ending:
            // SPEC T-2 on the server side: a peer that does not read never holds the socket.
            return .dropConnection
        case .closed:
            return .none   // benign: the sweep raced with the close
        }
    }

    private func tokenExpired(_ now: NIODeadline) -> Bool { tokenExpiry.map { $0 <= now } ?? false }

    /// Login, join or a renewal: the session (or membership) ends at `deadline` unless renewed
    /// again (nil: the token does not expire).
    mutating func tokenExpires(at deadline: NIODeadline?) {
        tokenExpiry = deadline
    }

    // MARK: transitions

    /// The HTTP request was a WebSocket upgrade, and it is done.
    mutating func upgraded() {
        guard case .accepted = state else { return }   // benign: closed during the upgrade
        state = .upgraded
    }

    /// A plain HTTP request was answered: by our `NotUpgradedHandler`, which closes the socket
    /// once its answer is written (`closesItself`), or with NIO's 400 after a malformed request,
    /// which does not.
    mutating func httpAnswered(now: NIODeadline, closesItself: Bool) -> Action {
        guard case .accepted = state else { return .none }   // benign: already closing
        state = ending(since: now, lostSession: nil, cause: .normal)   // plain HTTP: not counted
        return closesItself ? .none : .closeAfterFlush
    }

    /// Cluster mode: the hub admitted `login`; its reply waits for the cluster.
    mutating func awaitCluster(_ key: UserKey, access: SessionAccess) {
        guard case .upgraded = state else { preconditionFailure("invalid state: login in \(state)") }
        state = .awaitingCluster(key, access: access)
    }

    /// `login` succeeded (at once, or once the cluster confirmed it, keeping the grants it was
    /// admitted with): from now on the deadline follows the client's heartbeat, and a silence
    /// past `unreachableAfter` makes the user unreachable (§1.7).
    mutating func loggedIn(_ key: UserKey, access: SessionAccess, readTimeout: TimeAmount, unreachableAfter: TimeAmount) {
        let granted: SessionAccess
        switch state {
        case .upgraded: granted = access
        case .awaitingCluster(let admitted, let admittedAccess) where admitted == key: granted = admittedAccess
        default: preconditionFailure("invalid state: login in \(state)")
        }
        self.readTimeout = readTimeout
        state = .loggedIn(key, access: granted, silence: Silence(threshold: unreachableAfter))
    }

    /// `join` succeeded: from now on the deadline is the stream timeout.
    mutating func joined(_ membership: StreamMembership, access: SessionAccess, readTimeout: TimeAmount) {
        guard case .upgraded = state else { preconditionFailure("invalid state: join in \(state)") }
        self.readTimeout = readTimeout
        state = .joined(membership, access: access)
    }

    /// The server closes the connection (logout, leave, kick, token expiry, goaway, takeover,
    /// the client's close frame, a protocol violation, abuse). `code` nil: no close frame (the
    /// socket is dropped). A logged-in session is handed to the hub as lost when the socket
    /// closes; the hub ignores it if the session already ended or moved on. `cause`: why,
    /// when it is not the close code's (the client's own close frame, answered).
    mutating func close(code: WebSocketErrorCode?, reason: String = "", now: NIODeadline, cause: DisconnectReason? = nil) -> Action {
        let cause = cause ?? code.map { DisconnectReason(serverCloseCode: Int(UInt16(webSocketErrorCode: $0))) } ?? .connectionLost
        switch state {
        case .accepted:
            state = ending(since: now, lostSession: nil, cause: cause)
            return .dropConnection
        case .upgraded, .awaitingCluster, .loggedIn, .joined:
            state = ending(since: now, lostSession: admittedSession, cause: cause)
            guard let code else { return .dropConnection }
            return .closeWebSocket(code: code, reason: reason)
        case .ending, .closed:
            return .none   // already closing
        }
    }

    /// The WebSocket layer answered a protocol violation with a close frame and closes the socket
    /// itself: nothing more is sent; a logged-in session is lost (grace window).
    mutating func violationAnswered(now: NIODeadline) {
        switch state {
        case .upgraded, .awaitingCluster, .loggedIn, .joined:
            state = ending(since: now, lostSession: admittedSession, cause: .protocolViolation)
        case .accepted, .ending, .closed:
            break   // benign: already closing
        }
    }

    /// The connection is lost (an I/O error, a slow consumer cut off, the peer's TCP close): a
    /// logged-in session keeps its grace window. `cause`: `slowConsumer` when it was cut off
    /// for its backlog.
    mutating func lost(now: NIODeadline, cause: DisconnectReason = .connectionLost) -> Action {
        switch state {
        case .loggedIn(let key, _, _), .awaitingCluster(let key, _):
            state = ending(since: now, lostSession: key, cause: cause)
            return .dropConnection
        case .accepted, .upgraded, .joined:
            state = ending(since: now, lostSession: nil, cause: cause)
            return .dropConnection
        case .ending, .closed:
            return .none
        }
    }

    /// The socket is closed. Returns the session whose connection was lost (it gets its grace
    /// window, SPEC P-1; nil if the session ended or there was none) and what the connection
    /// held, to release; both once (closed again: nothing).
    mutating func socketClosed() -> Closed {
        defer { state = .closed }
        switch state {
        case .loggedIn(let key, _, let silence): return Closed(lostSession: key, held: .session(key, unreachableAfter: silence.threshold))
        case .awaitingCluster(let key, _): return Closed(lostSession: key, held: nil)
        case .joined(let membership, _): return Closed(lostSession: nil, held: .member(membership))
        case .ending(_, let lost, let held, let cause): return Closed(lostSession: lost, held: held, cause: cause)
        case .accepted, .upgraded, .closed: return Closed()
        }
    }

    // MARK: peer online status (§1.7)

    /// The loop's sweep: a logged-in user silent for longer than its threshold since its last read
    /// is to be reported unreachable (returned, once).
    mutating func silent(now: NIODeadline) -> UserKey? {
        // The plain values first: the sweep asks this of every logged-in connection it looks at.
        guard let watched = phase.silence, !watched.reported, now - lastRead > watched.threshold,
              case .loggedIn(let key, let access, var silence) = state else { return nil }
        silence.reported = true
        state = .loggedIn(key, access: access, silence: silence)
        return key
    }

    /// Whether the user was reported unreachable (cheap: checked at every read batch).
    @inline(__always)
    var isReportedSilent: Bool { phase.silence?.reported ?? false }

    /// A read batch ended: a user reported unreachable spoke again and is to be reported
    /// online (returned, once).
    mutating func spoke() -> UserKey? {
        guard phase.silence?.reported == true, case .loggedIn(let key, let access, var silence) = state else { return nil }
        silence.reported = false
        state = .loggedIn(key, access: access, silence: silence)
        return key
    }

    // MARK: requests

    /// Whether anything may still be sent: not once closing (RFC 6455 §5.5.1: nothing after a
    /// close frame; and nothing to a socket being dropped).
    @inline(__always)
    var maySend: Bool {
        switch phase.kind {
        case .ending, .closed: false
        case .accepted, .upgraded, .awaitingCluster, .loggedIn, .joined: true
        }
    }

    // MARK: fan-out

    /// `channel` is to be entered in the fan-out table (again: its options change): false once
    /// the connection is closing (the subscription's reply came too late; nothing is entered).
    mutating func enterFanout(_ channel: String) -> Bool {
        guard maySend else { return false }
        fanoutChannels.insert(channel)
        return true
    }

    /// `channel` is to leave the fan-out table: false if it is not entered.
    mutating func leaveFanout(_ channel: String) -> Bool {
        fanoutChannels.remove(channel) != nil
    }

    /// Every channel entered, taken out (the close frame is going out, or the session ended).
    mutating func leaveFanout() -> Set<String> {
        defer { fanoutChannels = [] }
        return fanoutChannels
    }

    /// Whether a request of this kind may run now: the first step of the connection's gate
    /// (`ConnectionHandler.pass`).
    func admit(_ type: RequestKind) -> Admission {
        switch (state, type) {
        case (.upgraded, .ping), (.upgraded, .login), (.upgraded, .join):
            return .allowed
        case (.awaitingCluster, .ping):
            return .allowed
        case (.awaitingCluster, .login):
            return .rejected(RequestRefusal(code: .loginCanceled, reason: "a login on this connection is still waiting for the cluster"))
        case (.upgraded, _), (.accepted, _), (.awaitingCluster, _):
            return .rejected(RequestRefusal(code: .notLogin, reason: "'\(type)' needs a login first"))
        case (.loggedIn, .login):
            return .rejected(RequestRefusal(code: .duplicateOperation, reason: "already logged in on this connection"))
        case (.loggedIn, .join):
            return .rejected(RequestRefusal(code: .invalidFrame, reason: "'join' opens a STREAM connection: it must be the first request of a new connection"))
        case (.loggedIn, _) where type.onStreamConnection && type != .ping && type != .renewToken:
            return .rejected(RequestRefusal(code: .invalidFrame, reason: "'\(type)' is a request of a STREAM connection (after its join)"))
        case (.joined, _) where !type.onStreamConnection:
            return .rejected(RequestRefusal(code: .invalidFrame, reason: "'\(type)' is not a stream-connection operation"))
        case (.joined, .join):
            return .rejected(RequestRefusal(code: .duplicateOperation, reason: "already joined on this connection; one stream channel per connection"))
        case (.loggedIn, _), (.joined, _):
            return .allowed
        case (.ending, _), (.closed, _):
            return .ignored
        }
    }
}
