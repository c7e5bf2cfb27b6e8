import NIOCore
import RTMProtocol

/// The MESSAGE connection's lifecycle as a pure value (SPEC §2–4): events in, actions out, time
/// passed in. It never touches a socket, a timer or a clock; `RTMClient` runs its actions.
///
/// The classic connection state (1–5) is derived from the same transitions, so the two views
/// can never disagree (SPEC L-2).
struct LinkStateMachine: Sendable {
    /// Timers the machine asks its owner to run. Scheduling one that is running replaces it.
    enum Timer: Hashable, Sendable, CaseIterable {
        /// Next ping (H-1).
        case heartbeat
        /// No reply to a ping within `pongTimeout` (H-1, H-5).
        case pong
        /// One connection attempt took too long (T-1).
        case attempt
        /// Next reconnection attempt.
        case retry
        /// The initial login took too long (C-1).
        case loginDeadline
        /// An interruption lasted `interruptionThreshold` (C-3).
        case interruption
        /// `reconnectTimeout` passed since the loss (L-1).
        case reconnectDeadline
    }

    /// One link-state transition; the owner adds channels and a timestamp.
    struct Transition: Equatable, Sendable {
        let previous: LinkState
        let current: LinkState
        let operation: LinkOperation
        let reason: LinkStateChangeReason
        let message: String
        var isResumed = false
    }

    /// What the owner must do.
    enum Action: Equatable, Sendable {
        /// Open a connection (TCP, WebSocket upgrade) and send `login`; `resume` = offer the
        /// resume token of the previous session.
        case openConnection(attempt: UInt64, resume: Bool)
        /// Close that connection (within the close deadline, T-2); first send `logout` if asked.
        case closeConnection(attempt: UInt64, sendLogout: Bool)
        /// Send a ping on the current connection.
        case sendPing(attempt: UInt64)
        case schedule(Timer, at: NIODeadline)
        case cancel(Timer)
        /// Emit a link-state event.
        case link(Transition)
        /// Emit a classic connection-state change.
        case classic(ConnectionState, ConnectionChangeReason)
        /// Complete pending `login` calls (nil = success).
        case completeLogin(RTMError?)
        /// Logged in again: re-subscribe every channel and send queued requests (C-5, R-3).
        case restore(resumed: Bool)
        /// Fail every pending and queued request.
        case failRequests(RTMError)
        /// Forget subscriptions, cached state, queues and the resume token (K-4).
        case clearCaches
        /// The token expired while reconnecting (C-7): tell the application.
        case tokenExpired
    }

    /// Timing configuration, in seconds.
    struct Timing: Sendable {
        var heartbeat: Double = 5
        var pongTimeout: Double = 10
        var loginTimeout: Double = 12
        var connectTimeout: Double = 10
        var reconnectTimeout: Double = 0
        var backoffInitial: Double = 2
        var backoffMax: Double = 64
        var disconnectedWindow: Double = 120
        var suspendedRetry: Double = 30
        var interruptionThreshold: Double = 4
        /// A timer firing this late means the process was suspended (T-11).
        var lateThreshold: Double { max(1, heartbeat / 2) }
    }

    private struct Loss: Sendable {
        var lostAt: NIODeadline
        var retries: Int
        var suspended: Bool
    }

    private enum State: Sendable {
        case idle
        /// Initial login: an attempt in flight, or waiting `retries` to retry (still "connecting").
        case loggingIn(attempt: UInt64?, retries: Int)
        case connected(attempt: UInt64, pingSince: NIODeadline?)
        /// Reconnection attempt in flight.
        case reconnecting(attempt: UInt64, loss: Loss)
        /// Disconnected or suspended, waiting for the retry timer (or the network).
        case waiting(Loss)
        /// Failed; `tokenPause` keeps the loss when only a token renewal is needed (C-7).
        case failed(tokenPause: Loss?)
    }

    let timing: Timing
    private var state: State = .idle
    private(set) var classic: ConnectionState = .disconnected
    private var interruptionReported = false
    private(set) var networkAvailable = true
    private var nextAttempt: UInt64 = 1
    private var backoff: Backoff

    init(timing: Timing, seed: UInt64) {
        self.timing = timing
        self.backoff = Backoff(initial: timing.backoffInitial, cap: timing.backoffMax, seed: seed)
    }

    /// The link state as the application sees it.
    var linkState: LinkState {
        switch state {
        case .idle: .idle
        case .loggingIn, .reconnecting: .connecting
        case .connected: .connected
        case .waiting(let loss): loss.suspended ? .suspended : .disconnected
        case .failed: .failed
        }
    }

    /// The attempt whose connection is current, if any.
    var currentAttempt: UInt64? {
        switch state {
        case .loggingIn(let attempt, _): attempt
        case .connected(let attempt, _), .reconnecting(let attempt, _): attempt
        default: nil
        }
    }

    /// True when requests can be sent now.
    var isConnected: Bool { if case .connected = state { true } else { false } }

    /// True after a kick (classic aborted): only `logout` helps (C-6).
    var isAborted: Bool { classic == .aborted }

    // MARK: application events

    /// `login()` (C-1). From suspended/disconnected it forces an immediate retry.
    mutating func login(now: NIODeadline) -> [Action] {
        switch state {
        case .idle, .failed(tokenPause: nil):
            if isAborted {
                return [.completeLogin(RTMError(.loginAborted, operation: "login",
                    "kicked out (same user id logged in elsewhere); call logout() before login()"))]
            }
            let previous = linkState
            let attempt = takeAttempt()
            state = .loggingIn(attempt: attempt, retries: 0)
            var actions: [Action] = [.link(Transition(previous: previous, current: .connecting, operation: .login, reason: .login, message: "login"))]
            if classic != .connecting { classic = .connecting; actions.append(.classic(.connecting, .login)) }
            actions += [
                .schedule(.loginDeadline, at: now + .fractionalSeconds(timing.loginTimeout)),
                .openConnection(attempt: attempt, resume: false),
                .schedule(.attempt, at: now + .fractionalSeconds(timing.connectTimeout)),
            ]
            return actions
        case .failed(tokenPause: let loss?):
            return startReconnect(loss, operation: .login, reason: .relogin, message: "login after token renewal", now: now)
        case .waiting(let loss):
            return [.cancel(.retry)] + startReconnect(loss, operation: .login, reason: .relogin, message: "login forces a retry", now: now)
        case .loggingIn(nil, let retries):
            let attempt = takeAttempt()
            state = .loggingIn(attempt: attempt, retries: retries)
            return [.cancel(.retry), .openConnection(attempt: attempt, resume: false),
                    .schedule(.attempt, at: now + .fractionalSeconds(timing.connectTimeout))]
        case .loggingIn, .reconnecting:
            return []   // already in progress; the pending call completes with it
        case .connected:
            return [.completeLogin(nil)]
        }
    }

    /// `logout()` from any state (C-2, K-4, H-4): immediate, no timers.
    mutating func logout(now: NIODeadline) -> [Action] {
        var actions: [Action] = Timer.allCases.map { .cancel($0) }
        switch state {
        case .idle:
            if classic == .aborted { classic = .disconnected; return [.classic(.disconnected, .logout)] }
            return []
        case .connected(let attempt, _):
            actions.append(.closeConnection(attempt: attempt, sendLogout: true))
        case .loggingIn(let attempt?, _), .reconnecting(let attempt, _):
            actions.append(.closeConnection(attempt: attempt, sendLogout: false))
        default:
            break
        }
        if case .loggingIn = state {
            actions.append(.completeLogin(RTMError(.loginCanceled, operation: "login", "logout before login completed")))
        }
        let previous = linkState
        state = .idle
        interruptionReported = false
        actions.append(.link(Transition(previous: previous, current: .idle, operation: .logout, reason: .logout, message: "logout")))
        if classic != .disconnected { classic = .disconnected; actions.append(.classic(.disconnected, .logout)) }
        actions.append(.failRequests(RTMError(.notLogin, operation: "request", "logged out")))
        actions.append(.clearCaches)
        return actions
    }

    /// The application (or the system's path monitor) says the network went up or down (R-2, T-4).
    mutating func networkChanged(available: Bool, now: NIODeadline) -> [Action] {
        networkAvailable = available
        guard available else {
            if case .waiting = state { return [.cancel(.retry)] }   // don't hammer
            return []
        }
        switch state {
        case .waiting(let loss):
            return [.cancel(.retry)] + startReconnect(loss, operation: .networkChange, reason: .networkChange, message: "network available", now: now)
        case .loggingIn(nil, _):
            return login(now: now)
        default:
            return []
        }
    }

    /// A new token was supplied (`renewToken`). After a token-expired stop it resumes reconnecting (C-7).
    mutating func tokenRenewed(now: NIODeadline) -> [Action] {
        guard case .failed(tokenPause: let loss?) = state else { return [] }
        return startReconnect(loss, operation: .login, reason: .relogin, message: "token renewed", now: now)
    }

    // MARK: connection events

    /// The server accepted the login on `attempt`.
    mutating func loginSucceeded(attempt: UInt64, resumed: Bool, now: NIODeadline) -> [Action] {
        switch state {
        case .loggingIn(attempt, _):
            state = .connected(attempt: attempt, pingSince: nil)
            // `restore` comes first: the owner holds the events that follow until the
            // subscriptions are restored, so the connected event can list unrestored channels.
            var actions: [Action] = [.cancel(.loginDeadline), .cancel(.attempt), .cancel(.retry), .restore(resumed: resumed),
                                     .link(Transition(previous: .connecting, current: .connected, operation: .login, reason: .loginSuccess, message: "logged in"))]
            classic = .connected
            actions.append(.classic(.connected, .loginSuccess))
            actions += [.schedule(.heartbeat, at: now + .fractionalSeconds(timing.heartbeat)), .completeLogin(nil)]
            return actions
        case .reconnecting(attempt, _):
            state = .connected(attempt: attempt, pingSince: nil)
            // `isResumed` is the server's answer, not a guess from the time spent away: a
            // restarted server (or a session past its grace window) answers `resumed:false`
            // however quick the return was.
            var actions: [Action] = [.cancel(.attempt), .cancel(.retry), .cancel(.interruption), .cancel(.reconnectDeadline),
                                     .restore(resumed: resumed),
                                     .link(Transition(previous: .connecting, current: .connected, operation: .reconnected,
                                                      reason: .reconnectSuccess, message: resumed ? "session resumed" : "new session", isResumed: resumed))]
            if interruptionReported || classic != .connected {
                classic = .connected
                interruptionReported = false
                actions.append(.classic(.connected, .loginSuccess))   // C-4: no login completion fired again
            }
            actions += [.schedule(.heartbeat, at: now + .fractionalSeconds(timing.heartbeat)), .completeLogin(nil)]
            return actions
        default:
            return []   // stale attempt
        }
    }

    /// The server refused the login on `attempt`.
    mutating func loginRejected(attempt: UInt64, code: RTMErrorCode, reason: String, now: NIODeadline) -> [Action] {
        guard currentAttempt == attempt else { return [] }
        let error = RTMError(code, operation: "login", reason)
        if code == .loginNoServerResources || code == .operationRateExceedLimitation {
            // SPEC T-9: the server sheds load; back off like any failed attempt.
            return attemptFailed(now: now, reason: .loginTooFrequent, message: reason)
        }
        let linkReason: LinkStateChangeReason = switch code {
        case .tokenExpired: .tokenExpired
        case .invalidToken: .invalidToken
        case .invalidAppId: .inconsistentAppId
        case .invalidUserId: .invalidUserId
        default: .loginRejected
        }
        var actions: [Action] = [.cancel(.attempt), .cancel(.retry), .cancel(.loginDeadline), .cancel(.reconnectDeadline),
                                 .closeConnection(attempt: attempt, sendLogout: false)]
        switch state {
        case .reconnecting(_, let loss) where code == .tokenExpired:
            // C-7: token expired while reconnecting: an event, no classic change; renewal resumes.
            state = .failed(tokenPause: loss)
            actions += [.link(Transition(previous: .connecting, current: .failed, operation: .serverReject, reason: .tokenExpired, message: reason)),
                        .tokenExpired]
            return actions
        case .reconnecting:
            state = .failed(tokenPause: nil)
            actions += [.cancel(.interruption),
                        .link(Transition(previous: .connecting, current: .failed, operation: .serverReject, reason: linkReason, message: reason))]
        default:
            state = .failed(tokenPause: nil)
            actions.append(.link(Transition(previous: .connecting, current: .failed, operation: .login, reason: linkReason, message: reason)))
        }
        interruptionReported = false
        classic = .disconnected
        actions += [.classic(.disconnected, code == .tokenExpired ? .tokenExpired : .loginFailure),
                    .completeLogin(error), .failRequests(error)]
        return actions
    }

    /// The connection of `attempt` closed or failed (RST, EOF, upgrade refused, `goaway`).
    mutating func connectionClosed(attempt: UInt64, message: String, now: NIODeadline) -> [Action] {
        switch state {
        case .loggingIn(attempt, _), .reconnecting(attempt, _):
            return attemptFailed(now: now, reason: .connectionError, message: message)
        case .connected(attempt, _):
            return lost(now: now, operation: .serverTimeout, reason: .connectionError, message: message)
        default:
            return []
        }
    }

    /// The server sent `goaway` on the connected link (it drains or shuts down): lost, with
    /// reason `serverGoingAway`; the retry comes after a random delay within `spread` seconds
    /// (the server's pacing), or the usual backoff when it gave none. Not connected: [].
    mutating func goAway(attempt: UInt64, spread: Double?, message: String, now: NIODeadline) -> [Action] {
        guard case .connected(attempt, _) = state else { return [] }
        return lost(now: now, operation: .serverReject, reason: .serverGoingAway, message: message,
                    retryIn: spread.map { backoff.spread($0) })
    }

    /// An attempt failed for a reason retrying cannot fix (the server's TLS certificate is not
    /// trusted, TLS against a plain port or the reverse): the initial login fails at once with
    /// that error instead of retrying until its deadline (C-1); a reconnection goes on retrying
    /// like after any failed attempt (the server's certificate may be fixed meanwhile, T-5).
    mutating func connectionRefused(attempt: UInt64, error: RTMError, now: NIODeadline) -> [Action] {
        if case .loggingIn(attempt, _) = state {
            return loginRejected(attempt: attempt, code: error.code, reason: error.reason, now: now)
        }
        return connectionClosed(attempt: attempt, message: error.reason, now: now)
    }

    /// The server ended the session (`kicked`): no automatic login ever follows (C-6).
    mutating func kicked(attempt: UInt64, reason: LinkStateChangeReason, message: String, now: NIODeadline) -> [Action] {
        guard currentAttempt == attempt else { return [] }
        let previous = linkState
        let wasLoggingIn: Bool = if case .loggingIn = state { true } else { false }
        state = .failed(tokenPause: nil)
        interruptionReported = false
        var actions: [Action] = Timer.allCases.map { .cancel($0) }
        actions += [.closeConnection(attempt: attempt, sendLogout: false),
                    .link(Transition(previous: previous, current: .failed, operation: .serverReject, reason: reason, message: message))]
        classic = .aborted
        actions.append(.classic(.aborted, reason == .sameUidLogin ? .remoteLogin : reason == .tokenExpired ? .tokenExpired : .bannedByServer))
        let error = RTMError(.loginAborted, operation: "request", "kicked: \(message)")
        if wasLoggingIn { actions.append(.completeLogin(error)) }
        actions.append(.failRequests(error))
        return actions
    }

    /// Any frame arrived on `attempt` (T-3: every inbound frame refreshes liveness).
    mutating func inbound(attempt: UInt64, now: NIODeadline) -> [Action] {
        guard case .connected(attempt, let since?) = state else { return [] }
        _ = since
        state = .connected(attempt: attempt, pingSince: nil)
        return [.cancel(.pong)]
    }

    /// A timer the machine scheduled fired. `due` is when it was meant to fire.
    mutating func timerFired(_ timer: Timer, due: NIODeadline, now: NIODeadline) -> [Action] {
        let late = now - due > .fractionalSeconds(timing.lateThreshold)
        switch (timer, state) {
        case (.heartbeat, .connected(let attempt, let since)):
            var actions: [Action] = [.sendPing(attempt: attempt)]
            if since == nil || late {
                // T-11: after a suspension the old deadline is stale; probe afresh.
                state = .connected(attempt: attempt, pingSince: now)
                actions.append(.schedule(.pong, at: now + .fractionalSeconds(timing.pongTimeout)))
            }
            actions.append(.schedule(.heartbeat, at: now + .fractionalSeconds(timing.heartbeat)))
            return actions
        case (.pong, .connected(let attempt, _)):
            if late {
                // T-11: the process was stopped; a stale timer must not kill a healthy link.
                state = .connected(attempt: attempt, pingSince: now)
                return [.sendPing(attempt: attempt), .schedule(.pong, at: now + .fractionalSeconds(timing.pongTimeout))]
            }
            return lost(now: now, operation: .heartbeatTimeout, reason: .keepAliveTimeout,
                        message: "no reply to ping within \(timing.pongTimeout) s")
        case (.attempt, .loggingIn(_?, _)), (.attempt, .reconnecting):
            return attemptFailed(now: now, reason: .connectionError, message: "connection attempt timed out after \(timing.connectTimeout) s")
        case (.retry, .waiting(let loss)):
            return startReconnect(loss, operation: .autoReconnect, reason: .autoReconnect, message: "reconnecting", now: now)
        case (.retry, .loggingIn(nil, _)):
            return login(now: now)
        case (.loginDeadline, .loggingIn(let attempt, _)):
            state = .failed(tokenPause: nil)
            var actions: [Action] = [.cancel(.attempt), .cancel(.retry)]
            if let attempt { actions.append(.closeConnection(attempt: attempt, sendLogout: false)) }
            let error = RTMError(.loginTimeout, operation: "login", "not logged in within \(timing.loginTimeout) s")
            classic = .disconnected
            actions += [.link(Transition(previous: .connecting, current: .failed, operation: .login, reason: .loginTimeout, message: error.reason)),
                        .classic(.disconnected, .loginTimeout), .completeLogin(error), .failRequests(error)]
            return actions
        case (.interruption, .waiting), (.interruption, .reconnecting), (.interruption, .failed(tokenPause: _?)):
            guard classic == .connected else { return [] }
            classic = .reconnecting
            interruptionReported = true
            return [.classic(.reconnecting, .interrupted)]   // C-3
        case (.reconnectDeadline, .waiting), (.reconnectDeadline, .reconnecting):
            let previous = linkState
            var actions: [Action] = Timer.allCases.map { .cancel($0) }
            if case .reconnecting(let attempt, _) = state { actions.append(.closeConnection(attempt: attempt, sendLogout: false)) }
            state = .failed(tokenPause: nil)
            interruptionReported = false
            let error = RTMError(.loginTimeout, operation: "reconnect", "not reconnected within reconnectTimeout \(timing.reconnectTimeout) s")
            classic = .disconnected
            actions += [.link(Transition(previous: previous, current: .failed, operation: .autoReconnect, reason: .reconnectTimeout, message: error.reason)),
                        .classic(.disconnected, .loginTimeout), .failRequests(error)]
            return actions
        default:
            return []   // a timer for a state that has ended: benign
        }
    }

    // MARK: internals

    private mutating func takeAttempt() -> UInt64 {
        defer { nextAttempt += 1 }
        return nextAttempt
    }

    /// The connected link was lost: disconnected, backoff, classic timer (C-3).
    private mutating func lost(now: NIODeadline, operation: LinkOperation, reason: LinkStateChangeReason, message: String,
                               retryIn: Double? = nil) -> [Action] {
        guard case .connected(let attempt, _) = state else { return [] }
        var loss = Loss(lostAt: now, retries: 1, suspended: false)
        var actions: [Action] = [.cancel(.heartbeat), .cancel(.pong), .closeConnection(attempt: attempt, sendLogout: false),
                                 .link(Transition(previous: .connected, current: .disconnected, operation: operation, reason: reason, message: message)),
                                 .schedule(.interruption, at: now + .fractionalSeconds(timing.interruptionThreshold))]
        if timing.reconnectTimeout > 0 {
            actions.append(.schedule(.reconnectDeadline, at: now + .fractionalSeconds(timing.reconnectTimeout)))
        }
        if networkAvailable {
            // SPEC T-10: the only way back is this backoff timer, never a reconnect from the close path.
            actions.append(.schedule(.retry, at: now + .fractionalSeconds(retryIn ?? backoff.delay(attempt: loss.retries))))
        }
        loss.retries = 1
        state = .waiting(loss)
        return actions
    }

    private mutating func startReconnect(_ loss: Loss, operation: LinkOperation, reason: LinkStateChangeReason, message: String, now: NIODeadline) -> [Action] {
        let previous = linkState
        let attempt = takeAttempt()
        state = .reconnecting(attempt: attempt, loss: loss)
        return [.link(Transition(previous: previous, current: .connecting, operation: operation, reason: reason, message: message)),
                .openConnection(attempt: attempt, resume: true),
                .schedule(.attempt, at: now + .fractionalSeconds(timing.connectTimeout))]
    }

    private mutating func attemptFailed(now: NIODeadline, reason: LinkStateChangeReason, message: String) -> [Action] {
        switch state {
        case .loggingIn(let attempt?, let retries):
            // Initial login: keep trying within the login deadline, still "connecting" (C-1).
            state = .loggingIn(attempt: nil, retries: retries + 1)
            var actions: [Action] = [.cancel(.attempt), .closeConnection(attempt: attempt, sendLogout: false)]
            if networkAvailable {
                actions.append(.schedule(.retry, at: now + .fractionalSeconds(backoff.delay(attempt: retries + 1))))
            }
            return actions
        case .reconnecting(let attempt, var loss):
            loss.retries += 1
            loss.suspended = now - loss.lostAt >= .fractionalSeconds(timing.disconnectedWindow)
            state = .waiting(loss)
            var actions: [Action] = [.cancel(.attempt), .closeConnection(attempt: attempt, sendLogout: false),
                                     .link(Transition(previous: .connecting, current: loss.suspended ? .suspended : .disconnected,
                                                      operation: .autoReconnect, reason: reason, message: message))]
            if networkAvailable {
                let delay = loss.suspended ? timing.suspendedRetry : backoff.delay(attempt: loss.retries)
                actions.append(.schedule(.retry, at: now + .fractionalSeconds(delay)))
            }
            return actions
        default:
            return []
        }
    }
}
