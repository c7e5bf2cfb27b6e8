import Foundation
import NIOCore
import RTMProtocol

/// Sessions and presence across nodes: the hub's side of
/// `HubState+ClusterSessions`: reading the cluster's events from the backplane, doing what they
/// ask (kicks, closes, presence events to local subscribers, grace windows of a dead node's
/// sessions) and sending this node's own.
extension Hub {
    /// Splits the backplane's messages into cluster events (applied here) and channel messages.
    func applyControl(_ messages: [BackplaneMessage]) -> [BackplaneMessage] {
        guard messages.contains(where: Self.isControl) else { return messages }
        let decoder = JSONDecoder()
        var events: [ClusterEvent] = []
        for message in messages where Self.isControl(message) {
            do {
                events.append(try decoder.decode(ClusterEvent.self, from: Data(message.payload.readableBytesView)))
            } catch {
                logger.error("unreadable cluster event skipped (a node of another version?)", metadata: ["error": "\(error)"])
            }
        }
        let now = NIODeadline.now()
        let outcome = state.withLockedValue { $0.applyCluster(events, now: now, wallMillis: Self.wallMillis) }
        perform(outcome)
        answerReadyLogins()
        clusterSender?.wake()
        return messages.filter { !Self.isControl($0) }
    }

    private static func isControl(_ message: BackplaneMessage) -> Bool {
        message.appId.isEmpty && message.channel == ClusterEvent.channel
    }

    private func perform(_ outcome: HubState.ClusterOutcome) {
        perform(outcome.broadcasts)
        for (key, connection) in outcome.kicked {
            logger.info("kicking a session: the same user logged in on another node", metadata: ["user": "\(key.userId)"])
            if let connection {
                Self.close(connection, with: Frame(type: .kicked, code: LinkStateChangeReason.sameUidLogin.rawValue,
                                                   reason: "the same user id logged in from another client"))
            }
            sessionEndedHere(key, reason: "the same user id logged in on another node")
        }
        for (_, connection) in outcome.movedAway {
            Self.closeReplaced(connection, reason: "the session resumed on another node")
        }
        for key in outcome.ended { sessionEndedHere(key, reason: "the user's session timed out") }
        for send in outcome.peerSends { Self.send(send.frame, on: send.connection.channel) }
        schedule(outcome.orphans)
    }

    /// A local session ended by the cluster: what ends with it here.
    private func sessionEndedHere(_ key: UserKey, reason: String) {
        closeStreams(of: key, reason: reason)
        signalingSessionChanged(key, loggedIn: false)
    }

    /// Grace windows of a dead (or restarted) node's sessions (SPEC P-2 across nodes).
    func schedule(_ orphans: [ClusterReplica.OrphanTimer]) {
        guard !orphans.isEmpty, let loop = fanouts.first?.eventLoop else { return }
        logger.info("a node is gone: its sessions time out unless they resume elsewhere", metadata: ["sessions": "\(orphans.count)"])
        for timer in orphans {
            loop.scheduleTask(deadline: timer.deadline) { [self] in
                state.withLockedValue { $0.orphanExpired(timer) }
                clusterSender?.wake()
            }
        }
    }

    /// A node's lease ran out, or came back.
    func nodeLifeChanged(_ event: BackplaneEvent) {
        let now = NIODeadline.now()
        switch event {
        case .nodeDied(let node):
            schedule(state.withLockedValue { $0.nodeDied(node, now: now) })
            answerReadyLogins()
        case .nodeReturned(let node): state.withLockedValue { $0.nodeReturned(node) }
        default: break
        }
    }

    // MARK: logins

    /// A new login's reply waits for the cluster (`ClusterReplica.PendingLogin`), at most
    /// `clusterLoginTimeout` (a database that cannot be reached, a node that does not answer:
    /// the login then goes ahead, and the earlier session ends when its node reads the login).
    /// Called under the state lock.
    func awaitCluster(login session: UInt64, user: UserKey, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        let timeout = loop.scheduleTask(in: configuration.clusterLoginTimeout) { [self] in
            guard let waiter = loginWaiters.withLockedValue({ $0.removeValue(forKey: session) }) else { return }
            // A session that ended meanwhile (replaced, closed) waited for nothing.
            if state.withLockedValue({ $0.sessions[user]?.id == session }) {
                logger.warning("a login went ahead without the cluster's confirmation that the user's other sessions ended",
                               metadata: ["user": "\(user.userId)", "session": "\(session)"])
            }
            waiter.promise.succeed()
        }
        loginWaiters.withLockedValue { $0[session] = LoginWaiter(promise: promise, timeout: timeout) }
        return promise.futureResult
    }

    /// Answers the logins the cluster has confirmed.
    func answerReadyLogins() {
        let ready = state.withLockedValue { $0.cluster.takeReadyLogins() }
        guard !ready.isEmpty else { return }
        let waiters = loginWaiters.withLockedValue { waiters in ready.compactMap { waiters.removeValue(forKey: $0) } }
        for waiter in waiters {
            waiter.timeout.cancel()
            waiter.promise.succeed()
        }
    }

    /// Starts sending this node's cluster events, the first being its `hello`.
    func startClusterSender(_ backplane: any ChannelBackplane) {
        guard let sender = clusterSender else { return }
        state.withLockedValue { $0.cluster.send(.hello) }
        sender.start(take: { [self] in state.withLockedValue { $0.cluster.takeOutbox() } }, publish: { events in
            let now = Self.wallMillis
            _ = try await backplane.publish(events.map { event in
                BackplanePublish(appId: "", channel: ClusterEvent.channel, publisher: event.from, msgId: nil, customType: nil,
                                 isText: true, payload: ByteBuffer(bytes: event.encoded()), millis: now)
            })
        }, logger: logger)
        sender.wake()
    }
}

/// A login waiting for the cluster (`Hub.awaitCluster(login:on:)`).
struct LoginWaiter: Sendable {
    let promise: EventLoopPromise<Void>
    let timeout: Scheduled<Void>
}
