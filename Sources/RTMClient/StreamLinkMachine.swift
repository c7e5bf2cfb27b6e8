import NIOCore
import RTMProtocol

/// The link state of one stream channel's STREAM connection (SPEC K-3, H-3; AGORA_REFERENCE
/// §2.1): idle → connecting → connected, back to connecting while it rejoins by itself, failed
/// after `rejoinWindow` (20 min) of failed rejoins or a fatal rejection, idle after leave.
///
/// A plain value: every event returns the actions for its owner (`StreamCore`) to perform.
struct StreamLinkMachine: Sendable {
    enum Timer: Hashable, Sendable, CaseIterable {
        /// Next ping (every 0.5 s, H-3).
        case heartbeat
        /// No reply to a ping in time.
        case pong
        /// One connection attempt took too long.
        case attempt
        /// Next rejoin attempt.
        case retry
    }

    enum Action: Equatable, Sendable {
        /// Open a connection and send `join`.
        case open(attempt: UInt64)
        /// Close that connection; first send `leave` if asked.
        case close(attempt: UInt64, sendLeave: Bool)
        case sendPing(attempt: UInt64)
        case schedule(Timer, after: Double)
        case cancel(Timer)
        /// Emit a link-state event (serviceType stream).
        case link(LinkStateMachine.Transition)
        /// Re-join the topics and subscriptions after a rejoin.
        case restoreTopics
        /// Complete pending `join` calls (nil: success).
        case completeJoin(RTMError?)
        /// Fail the requests that were sent and not answered, or all of them.
        case failRequests(RTMError, all: Bool)
    }

    /// Timings in seconds.
    struct Timing: Sendable {
        /// Ping period (H-3: 0.5 s, fixed for applications).
        var heartbeat = 0.5
        /// No inbound frame this long after a ping: the link is lost (about 1 s, H-3).
        var pongTimeout = 1.0
        /// One connection attempt (TCP + upgrade + join reply).
        var attemptTimeout = 10.0
        /// First rejoin delay; doubles up to `backoffMax`, jittered.
        var backoffInitial = 0.5
        var backoffMax = 16.0
        /// Rejoining gives up after this long (§2.1: 20 min).
        var rejoinWindow = 1200.0
    }

    enum State: Equatable, Sendable {
        case idle
        /// Joining (first time: `lostAt` nil) or rejoining since `lostAt`.
        case connecting(attempt: UInt64, lostAt: NIODeadline?, tries: Int)
        case connected(attempt: UInt64, pingSince: NIODeadline?)
        case failed
    }

    private(set) var state: State = .idle
    /// Joined at least once since `join`: later connections are rejoins.
    private var hasJoined = false
    private var nextAttempt: UInt64 = 1
    private var backoff: Backoff
    let timing: Timing

    init(timing: Timing, seed: UInt64) {
        self.timing = timing
        self.backoff = Backoff(initial: timing.backoffInitial, cap: timing.backoffMax, seed: seed)
    }

    var linkState: LinkState {
        switch state {
        case .idle: .idle
        case .connecting: .connecting
        case .connected: .connected
        case .failed: .failed
        }
    }

    var currentAttempt: UInt64? {
        switch state {
        case .connecting(let a, _, _), .connected(let a, _): a
        default: nil
        }
    }

    // MARK: application

    /// `join`: from idle or failed. Joining while already joining or joined does nothing.
    mutating func join() -> [Action] {
        switch state {
        case .idle, .failed:
            let previous = linkState
            let attempt = takeAttempt()
            hasJoined = false
            state = .connecting(attempt: attempt, lostAt: nil, tries: 1)
            return [.link(.init(previous: previous, current: .connecting, operation: .join, reason: .join, message: "joining")),
                    .open(attempt: attempt), .schedule(.attempt, after: timing.attemptTimeout)]
        default:
            return []
        }
    }

    /// `leave`, or logout (K-4): back to idle at once (H-4).
    mutating func leave(logout: Bool) -> [Action] {
        let previous = linkState
        guard previous != .idle else { return [] }
        var actions: [Action] = Timer.allCases.map { .cancel($0) }
        if let attempt = currentAttempt { actions.append(.close(attempt: attempt, sendLeave: true)) }
        state = .idle
        let error = RTMError(.channelNotJoined, operation: "join", logout ? "logged out" : "left the channel")
        actions += [.link(.init(previous: previous, current: .idle, operation: logout ? .logout : .leave,
                                reason: logout ? .logout : .leave, message: logout ? "logout" : "left")),
                    .completeJoin(error), .failRequests(error, all: true)]
        return actions
    }

    // MARK: connection

    /// The server accepted `join` on `attempt`.
    mutating func joined(attempt: UInt64) -> [Action] {
        guard case .connecting(attempt, _, _) = state else { return [] }
        state = .connected(attempt: attempt, pingSince: nil)
        let rejoin = hasJoined
        hasJoined = true
        var actions: [Action] = [.cancel(.attempt), .cancel(.retry),
                                 .link(.init(previous: .connecting, current: .connected, operation: rejoin ? .reconnected : .join,
                                             reason: rejoin ? .rejoin : .joinSuccess, message: rejoin ? "rejoined" : "joined")),
                                 .schedule(.heartbeat, after: timing.heartbeat)]
        actions.append(rejoin ? .restoreTopics : .completeJoin(nil))
        return actions
    }

    /// The server refused `join`. Fatal refusals (bad token, bad name, unknown app) fail the
    /// channel; others (the MESSAGE connection is not back yet) are retried.
    mutating func joinRejected(attempt: UInt64, code: RTMErrorCode, reason: String, now: NIODeadline) -> [Action] {
        guard case .connecting(attempt, let lostAt, _) = state else { return [] }
        let fatal: LinkStateChangeReason? = switch code {
        case .tokenExpired: .tokenExpired
        case .invalidToken: .invalidToken
        case .invalidChannelName: .invalidChannelName
        case .invalidAppId: .inconsistentAppId
        case .invalidUserId: .invalidUserId
        case .notPermitted: .joinFailed   // the capability token does not grant stream.join
        default: nil
        }
        guard let fatal else {
            return [.close(attempt: attempt, sendLeave: false)] + retryLater(lostAt: lostAt ?? now, now: now, message: reason)
        }
        state = .failed
        let error = RTMError(code, operation: "join", reason)
        return Timer.allCases.map { .cancel($0) } + [
            .close(attempt: attempt, sendLeave: false),
            .link(.init(previous: .connecting, current: .failed, operation: .serverReject, reason: fatal, message: reason)),
            .completeJoin(error), .failRequests(error, all: true),
        ]
    }

    /// The server ended the stream session (`kicked`, e.g. its token expired).
    mutating func kicked(attempt: UInt64, reason: LinkStateChangeReason, message: String) -> [Action] {
        guard currentAttempt == attempt else { return [] }
        let previous = linkState
        state = .failed
        let error = RTMError(.channelNotJoined, operation: "stream", message)
        return Timer.allCases.map { .cancel($0) } + [
            .close(attempt: attempt, sendLeave: false),
            .link(.init(previous: previous, current: .failed, operation: .serverReject, reason: reason, message: message)),
            .completeJoin(error), .failRequests(error, all: true),
        ]
    }

    /// The connection of `attempt` closed or could not open.
    mutating func connectionClosed(attempt: UInt64, message: String, now: NIODeadline) -> [Action] {
        switch state {
        case .connecting(attempt, let lostAt, _):
            return retryLater(lostAt: lostAt ?? now, now: now, message: message)
        case .connected(attempt, _):
            return lost(now: now, operation: .serverTimeout, reason: .connectionError, message: message)
        default:
            return []
        }
    }

    /// Any frame arrived on `attempt`: the link is alive.
    mutating func inbound(attempt: UInt64) -> [Action] {
        guard case .connected(attempt, .some) = state else { return [] }
        state = .connected(attempt: attempt, pingSince: nil)
        return [.cancel(.pong)]
    }

    /// A timer fired.
    mutating func timerFired(_ timer: Timer, now: NIODeadline) -> [Action] {
        switch (timer, state) {
        case (.heartbeat, .connected(let attempt, let since)):
            var actions: [Action] = [.sendPing(attempt: attempt), .schedule(.heartbeat, after: timing.heartbeat)]
            if since == nil {
                state = .connected(attempt: attempt, pingSince: now)
                actions.append(.schedule(.pong, after: timing.pongTimeout))
            }
            return actions
        case (.pong, .connected):
            return lost(now: now, operation: .heartbeatTimeout, reason: .keepAliveTimeout, message: "no reply to ping within \(timing.pongTimeout) s")
        case (.attempt, .connecting(let attempt, let lostAt, _)):
            return [.close(attempt: attempt, sendLeave: false)] + retryLater(lostAt: lostAt ?? now, now: now, message: "join attempt timed out")
        case (.retry, .connecting(_, let lostAt, let tries)):
            let attempt = takeAttempt()
            state = .connecting(attempt: attempt, lostAt: lostAt, tries: tries + 1)
            return [.open(attempt: attempt), .schedule(.attempt, after: timing.attemptTimeout)]
        default:
            return []
        }
    }

    // MARK: private

    private mutating func lost(now: NIODeadline, operation: LinkOperation, reason: LinkStateChangeReason, message: String) -> [Action] {
        guard case .connected(let attempt, _) = state else { return [] }
        state = .connecting(attempt: attempt, lostAt: now, tries: 0)
        var actions: [Action] = [.cancel(.heartbeat), .cancel(.pong), .close(attempt: attempt, sendLeave: false),
                                 .link(.init(previous: .connected, current: .connecting, operation: operation, reason: reason, message: message)),
                                 .failRequests(RTMError(.channelNotConnected, operation: "stream", "connection lost: \(message)"), all: false)]
        // The first rejoin goes at once; later ones back off.
        actions.append(.schedule(.retry, after: 0))
        return actions
    }

    private mutating func retryLater(lostAt: NIODeadline, now: NIODeadline, message: String) -> [Action] {
        guard case .connecting(let attempt, _, let tries) = state else { return [] }
        // The first join fails at once (the caller is waiting); rejoins go on for the window.
        if !hasJoined || now - lostAt >= .fractionalSeconds(timing.rejoinWindow) {
            state = .failed
            let error = RTMError(.channelJoinFailed, operation: "join",
                                 hasJoined ? "could not rejoin within \(timing.rejoinWindow) s: \(message)" : "join failed: \(message)")
            return Timer.allCases.map { .cancel($0) } + [
                .link(.init(previous: .connecting, current: .failed, operation: .autoReconnect, reason: .joinFailed, message: error.reason)),
                .completeJoin(error), .failRequests(error, all: true),
            ]
        }
        state = .connecting(attempt: attempt, lostAt: lostAt, tries: tries)
        return [.cancel(.attempt), .schedule(.retry, after: backoff.delay(attempt: max(1, tries)))]
    }

    private mutating func takeAttempt() -> UInt64 {
        defer { nextAttempt += 1 }
        return nextAttempt
    }
}
