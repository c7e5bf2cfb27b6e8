import Foundation
import Logging
import NIOCore
import RTMProtocol

/// The one owner of a client's mutable state: the link state machine, timers, the current
/// connection, requests and subscriptions. Confined to one event loop; every method must run
/// on it. It performs the machine's actions (`run`), and nothing else changes state.
final class ClientCore: @unchecked Sendable {
    typealias Machine = LinkStateMachine

    let loop: any EventLoop
    let config: RTMClientConfig
    /// The service's endpoints; each connection attempt takes the next (failover).
    var endpoints: EndpointRotation
    /// Where the current (or last) connection attempt went.
    var endpoint: ClientTransport.Endpoint { endpoints.current }
    let logger: Logger
    weak var owner: RTMClient?
    var delegate: (any RTMClientDelegate)?

    var machine: Machine
    var timers: [Machine.Timer: Scheduled<Void>] = [:]
    var connection: (attempt: UInt64, channel: (any Channel)?)?
    var loginRequestID: UInt64?
    /// Set by a `goaway` frame, so the loss it causes says why.
    var goAwayReason: String?
    var token: String?
    /// The capability token sent at every (re)login (nil: none).
    var capability: String?
    /// Asked for a fresh login token (and capability token) at every (re)login (SPEC T-7).
    var credentialsProvider: (@Sendable () async throws -> RTMCredentials)?
    var resumeToken: String?
    var serverChannels: [String] = []
    var loginWaiters: [EventLoopPromise<Void>] = []

    var nextRequestID: UInt64 = 1
    var requests = PendingRequests()

    /// Subscribed channels, in subscription order (restored after reconnect, C-5).
    var subscriptions: [String] = []
    /// Subscribe options per channel, restored with the subscription.
    var subscriptionOptions: [String: SubscribeOptions] = [:]
    /// Temporary state per channel, cached (also before subscribing) and re-applied after a
    /// reconnection that did not resume the session (P-3).
    var presenceStates: [String: [String: String]] = [:]
    /// Last position seen per channel: replay after a reconnection starts there, and replayed
    /// messages already seen are dropped (M-2, M-3).
    var positions: [String: ChannelPosition] = [:]
    /// User-message deduplication (M-1): the last id emitted per mailbox epoch. Kept across
    /// logout: a message whose acknowledgement was lost must not reach the application twice.
    var userMessageIDs = UserMessageIDs()
    /// Client message ids (M-3): a random start, so that another instance never reuses them.
    var nextMessageID = UInt64.random(in: 1...(UInt64.max / 2))
    var sinks: [UInt64: AsyncStream<RTMEvent>.Continuation] = [:]
    var nextSinkID: UInt64 = 1

    /// While subscriptions are being restored, the connected event and what follows it wait.
    var restoring: (remaining: Int, unrestored: [String])?
    /// Fires `tokenWillExpire` ahead of the login token's expiry.
    var tokenWarning: Scheduled<Void>?
    /// Locks this client holds: channel → lock name → fencing token (to report lockExpired).
    var heldLocks: [String: [String: UInt64]] = [:]
    /// Users whose metadata this client subscribed to (restored after a new session).
    var metadataWatches: Set<String> = []
    /// Peers whose online status this client watches (restored after reconnections, §1.7).
    var peerWatch = PeerWatchList()
    /// Call invitations sent and received (§1.8), until logout.
    var invitations = InvitationBook()
    /// Joined (or joining) stream channels by name.
    var streamChannels: [String: StreamCore] = [:]
    var held: [Machine.Action] = []
    var terminated = false

    init(config: RTMClientConfig, endpoints: EndpointRotation, loop: any EventLoop, logger: Logger) {
        self.config = config
        self.endpoints = endpoints
        self.loop = loop
        self.logger = logger
        var timing = Machine.Timing()
        timing.heartbeat = config.heartbeatInterval
        timing.pongTimeout = config.pongTimeout
        timing.loginTimeout = config.loginTimeout
        timing.connectTimeout = config.connectTimeout
        timing.reconnectTimeout = config.reconnectTimeout
        timing.backoffInitial = config.backoffInitial
        timing.backoffMax = config.backoffMax
        timing.disconnectedWindow = config.disconnectedWindow
        timing.suspendedRetry = config.suspendedRetryInterval
        timing.interruptionThreshold = config.interruptionThreshold
        self.machine = Machine(timing: timing, seed: config.jitterSeed ?? UInt64.random(in: 0...UInt64.max))
    }

    // MARK: running actions

    func run(_ actions: [Machine.Action]) {
        loop.assertInEventLoop()
        for action in actions {
            if restoring != nil, action.isEmission {
                held.append(action)
                continue
            }
            perform(action)
        }
    }

    private func perform(_ action: Machine.Action) {
        switch action {
        case .openConnection(let attempt, let resume):
            open(attempt: attempt, resume: resume)
        case .closeConnection(let attempt, let sendLogout):
            close(attempt: attempt, sendLogout: sendLogout)
        case .sendPing(let attempt):
            if connection?.attempt == attempt, let channel = connection?.channel {
                ClientTransport.send(Frame(type: .ping, ts: Self.wallMillis), on: channel)
            }
        case .schedule(let timer, let deadline):
            timers.removeValue(forKey: timer)?.cancel()
            timers[timer] = loop.scheduleTask(deadline: deadline) { [self] in
                timers[timer] = nil
                run(machine.timerFired(timer, due: deadline, now: .now()))
            }
        case .cancel(let timer):
            timers.removeValue(forKey: timer)?.cancel()
        case .link(let transition):
            emit(.linkState(makeEvent(transition, unrestored: [])))
        case .classic(let state, let reason):
            emit(.connectionState(state, reason))
        case .completeLogin(let error):
            let waiters = loginWaiters
            loginWaiters = []
            for waiter in waiters {
                if let error { waiter.fail(error) } else { waiter.succeed(()) }
            }
        case .restore(let resumed):
            restore(resumed: resumed)
        case .failRequests(let error):
            failAll(error)
        case .clearCaches:
            tokenWarning?.cancel()
            tokenWarning = nil
            heldLocks = [:]
            metadataWatches = []
            peerWatch = PeerWatchList()
            invitations = InvitationBook()
            for stream in streamChannels.values { stream.closeForLogout() }
            subscriptions = []
            subscriptionOptions = [:]
            presenceStates = [:]
            positions = [:]
            resumeToken = nil
            serverChannels = []
        case .tokenExpired:
            emit(.tokenExpired)
        }
    }

    static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    func makeEvent(_ t: Machine.Transition, unrestored: [String]) -> LinkStateEvent {
        LinkStateEvent(currentState: t.current, previousState: t.previous, serviceType: .message,
                       operation: t.operation, reasonCode: t.reason, reason: t.message,
                       affectedChannels: subscriptions, unrestoredChannels: unrestored,
                       isResumed: t.isResumed, timestamp: Self.wallMillis)
    }

    // MARK: events out

    func emit(_ event: RTMEvent) {
        for sink in sinks.values { sink.yield(event) }
        guard let delegate, let owner else { return }
        switch event {
        case .linkState(let e): delegate.rtmClient(owner, didReceiveLinkStateEvent: e)
        case .connectionState(let s, let r): delegate.rtmClient(owner, connectionChangedTo: s, reason: r)
        case .message(let m): delegate.rtmClient(owner, didReceiveMessageEvent: m)
        case .presence(let p): delegate.rtmClient(owner, didReceivePresenceEvent: p)
        case .tokenExpired: delegate.rtmClientTokenDidExpire(owner)
        case .gap(let g): delegate.rtmClient(owner, didReceiveGapEvent: g)
        case .userMessagesDropped(let count): delegate.rtmClient(owner, userMessagesDropped: count)
        case .userMessageEpochChanged(let epoch): delegate.rtmClient(owner, userMessageEpochChanged: epoch)
        case .member(let m): delegate.rtmClient(owner, didReceiveMemberEvent: m)
        case .tokenWillExpire(let channel): delegate.rtmClient(owner, tokenPrivilegeWillExpire: channel)
        case .storage(let s): delegate.rtmClient(owner, didReceiveStorageEvent: s)
        case .lock(let l): delegate.rtmClient(owner, didReceiveLockEvent: l)
        case .topic(let t): delegate.rtmClient(owner, didReceiveTopicEvent: t)
        case .peersOnlineStatus(let s): delegate.rtmClient(owner, peersOnlineStatusChanged: s)
        case .call(let c): delegate.rtmClient(owner, didReceiveCallEvent: c)
        case .unsubscribed(let e): delegate.rtmClient(owner, subscriptionEnded: e)
        case .watchEnded(let e): delegate.rtmClient(owner, watchEnded: e)
        }
    }

    func addSink(_ continuation: AsyncStream<RTMEvent>.Continuation) -> UInt64 {
        let id = nextSinkID
        nextSinkID += 1
        sinks[id] = continuation
        return id
    }

    // MARK: connections

    private func open(attempt: UInt64, resume: Bool) {
        connection = (attempt, nil)
        goAwayReason = nil
        if let provider = credentialsProvider {
            // SPEC T-7: ask for a fresh token at every (re)login.
            let loop = self.loop
            weak let weakSelf = self
            Task {
                let result: Result<RTMCredentials, any Error>
                do { result = .success(try await provider()) } catch { result = .failure(error) }
                loop.execute {
                    guard let self = weakSelf, self.connection?.attempt == attempt else { return }
                    switch result {
                    case .success(let credentials):
                        self.token = credentials.token
                        self.capability = credentials.capability
                        self.connectTransport(attempt: attempt, resume: resume)
                    case .failure(let error):
                        self.run(self.machine.connectionClosed(attempt: attempt, message: "token provider failed: \(error)", now: .now()))
                    }
                }
            }
        } else {
            connectTransport(attempt: attempt, resume: resume)
        }
    }

    private func connectTransport(attempt: UInt64, resume: Bool) {
        let endpoint = endpoints.nextAttempt()
        ClientTransport.connect(
            endpoint: endpoint, eventLoop: loop,
            connectTimeout: .fractionalSeconds(config.connectTimeout),
            maxFrameSize: Limits().maxFrameBytes,
            onReady: { [weak self] channel in
                guard let self else { channel.close(promise: nil); return }
                self.ready(channel, attempt: attempt, resume: resume)
            },
            onFrame: { [weak self] frame, problem in self?.received(frame, problem: problem, attempt: attempt) },
            onFailure: { [weak self] error in
                guard let self, self.connection?.attempt == attempt else { return }
                self.run(self.machine.connectionRefused(attempt: attempt, error: error, now: .now()))
            },
            onClose: { [weak self] message in self?.closed(attempt: attempt, message: message) })
    }

    private func ready(_ channel: any Channel, attempt: UInt64, resume: Bool) {
        guard connection?.attempt == attempt, !terminated else { channel.close(promise: nil); return }
        connection = (attempt, channel)
        let id = takeRequestID()
        loginRequestID = id
        let login = Frame(type: .login, id: id, appId: config.appId, userId: config.userId, token: token,
                          heartbeatInterval: config.heartbeatInterval, presenceTimeout: config.presenceTimeout,
                          resumeToken: resume ? resumeToken : nil,
                          positions: resume && resumeToken != nil ? positions(for: subscriptions) : nil)
            .with {
                $0.binaryUser = true   // user messages in the binary form (PROTOCOL.md §2.3)
                $0.capability = capability
            }
        ClientTransport.send(login, on: channel)
    }

    private func closed(attempt: UInt64, message: String) {
        guard connection?.attempt == attempt else { return }
        let message = goAwayReason ?? message
        goAwayReason = nil
        connection = nil
        loginRequestID = nil
        finishRestore()
        requeueSent()
        run(machine.connectionClosed(attempt: attempt, message: message, now: .now()))
    }

    private func close(attempt: UInt64, sendLogout: Bool) {
        guard let current = connection, current.attempt == attempt else { return }
        connection = nil
        loginRequestID = nil
        finishRestore()
        if !sendLogout { requeueSent() }
        guard let channel = current.channel else { return }
        if sendLogout {
            ClientTransport.send(Frame(type: .logout, id: takeRequestID()), on: channel)
        }
        // SPEC T-2: closing never wedges: a half-close, then a hard close by the deadline.
        let deadline = loop.scheduleTask(in: .fractionalSeconds(config.closeTimeout)) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in deadline.cancel() }
        if sendLogout {
            channel.close(mode: .output, promise: nil)
        } else {
            channel.close(promise: nil)
        }
    }

    // MARK: inbound

    private func received(_ frame: Frame?, problem: String?, attempt: UInt64) {
        guard connection?.attempt == attempt else { return }
        run(machine.inbound(attempt: attempt, now: .now()))
        guard let frame else {
            if let problem { logger.warning("ignoring undecodable frame from server", metadata: ["problem": "\(problem)"]) }
            return
        }
        switch frame.type {
        case .ok, .error:
            if let id = frame.id, id == loginRequestID {
                loginRequestID = nil
                loginReplied(frame, attempt: attempt)
            } else if let id = frame.id {
                reply(frame, id: id)
            } else {
                logger.warning("server reported a protocol error", metadata: ["code": "\(frame.code ?? 0)", "reason": "\(frame.reason ?? "")"])
            }
        case .pong:
            break
        case .message:
            receivedMessage(frame)
        case .gap:
            receivedGap(frame)
        case .dropped:
            emit(.userMessagesDropped(count: frame.count ?? 0))
        case .presence:
            receivedPresence(frame)
        case .storage:
            receivedStorage(frame)
        case .lock:
            receivedLock(frame)
        case .peersOnlineStatus:
            receivedPeerStatus(frame)
        case .localInvitation:
            applyLocalInvitation(frame)
        case .remoteInvitation:
            applyRemoteInvitation(frame)
        case .kicked:
            let reason = LinkStateChangeReason(rawValue: frame.code ?? LinkStateChangeReason.kickedOutByServer.rawValue)
            run(machine.kicked(attempt: attempt, reason: reason, message: frame.reason ?? "kicked by the server", now: .now()))
        case .unsubscribed:
            subscriptionEnded(frame)
        case .watchEnded:
            watchEnded(frame)
        case .goAway:
            // The server drains or shuts down: the link is lost with that reason, and the next
            // attempt goes to the next endpoint after the spread the server asked for (T-12).
            goAwayReason = "server going away: \(frame.reason ?? "shutting down")"
            goAway(frame, attempt: attempt)
        default:
            break   // tolerant reader: unknown frame types are ignored
        }
    }

    private func loginReplied(_ frame: Frame, attempt: UInt64) {
        if frame.type == .ok {
            resumeToken = frame.resumeToken
            serverChannels = frame.users ?? []
            scheduleTokenWarning(expiresAt: frame.expiresAt, serverNow: frame.ts)
            run(machine.loginSucceeded(attempt: attempt, resumed: frame.resumed ?? false, now: .now()))
        } else {
            let code = RTMErrorCode(rawValue: frame.code ?? RTMErrorCode.loginRejected.rawValue)
            run(machine.loginRejected(attempt: attempt, code: code, reason: frame.reason ?? "login rejected", now: .now()))
        }
    }

    // MARK: teardown

    /// The client object went away: cancel every timer, close, finish streams (R-4).
    func terminate() {
        guard !terminated else { return }
        terminated = true
        run(machine.logout(now: .now()))
        for timer in timers.values { timer.cancel() }
        timers = [:]
        for sink in sinks.values { sink.finish() }
        sinks = [:]
    }
}

extension LinkStateMachine.Action {
    /// Actions held back while subscriptions are being restored.
    var isEmission: Bool {
        switch self {
        case .link, .classic, .completeLogin, .tokenExpired: true
        default: false
        }
    }
}
