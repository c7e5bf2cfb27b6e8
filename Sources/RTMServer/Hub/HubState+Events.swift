import NIOCore
import RTMProtocol

/// The hub's session and channel events as one transaction each: the state change, its
/// webhook events, its cluster events and everything to do after, as one action list that
/// `Hub.run` performs once the lock is released.
extension HubState {
    /// A login (SPEC C-1..C-6, P-1). In cluster mode a new session's reply waits for the
    /// cluster (the user's sessions on other nodes have ended first, C-6): `confirmed`, made
    /// with `makePromise`, completes when it may be sent.
    mutating func onLogin(key: UserKey, connection: ConnectionRef, resumeToken: String?, grantsIssuedAt: UInt32? = nil, heartbeat: TimeAmount,
                          presenceTimeout: TimeAmount, now: NIODeadline, wallMillis: Int64,
                          makePromise: () -> EventLoopPromise<Void>)
        -> (decision: LoginDecision, confirmed: EventLoopFuture<Void>?, actions: [HubAction]) {
        let ending = sessions[key]?.channels   // a new (not resumed) login ends this session
        let decision = login(key: key, connection: connection, resumeToken: resumeToken, grantsIssuedAt: grantsIssuedAt, heartbeat: heartbeat,
                             presenceTimeout: presenceTimeout, now: now, wallMillis: wallMillis)
        guard case .admitted(let admission) = decision else { return (decision, nil, []) }
        var actions: [HubAction] = []
        var confirmed: EventLoopFuture<Void>?
        if !admission.resumed {
            webhooks.loggedIn(key, ended: ending, ts: wallMillis)
            actions.append(.wakeWebhooks)
            // The waiter exists before the cluster can report the login ready (same lock).
            if cluster.pendingLogins[key]?.session == admission.sessionID {
                let promise = makePromise()
                loginWaiters[admission.sessionID] = promise
                confirmed = promise.futureResult
                actions.append(.schedule(.clusterLogin(session: admission.sessionID, user: key), at: now + timing.clusterLoginTimeout))
            }
        }
        if let kicked = admission.kicked {
            actions.append(.log(.info, "kicking older session", ["user": "\(key.userId)"]))
            actions.append(.kick(kicked, user: key, code: .sameUidLogin, reason: "the same user id logged in from another client"))
        }
        if let replaced = admission.replaced, replaced != connection {
            actions.append(.closeReplaced(replaced, reason: "replaced by a resumed connection"))
        }
        actions += admission.broadcasts.map { .broadcast($0) }
        actions.append(.wakeCluster)
        actions.append(.lockOwner(key, .online))
        // Peer status and invitations (§1.7, §1.8); a new session ends an earlier one's calls
        // (not those of a session that a server restart cut).
        if !admission.resumed { actions += signalingNewSession(key, now: now, wallMillis: wallMillis) }
        actions += signalingSessionChanged(key, loggedIn: true, now: now, wallMillis: wallMillis)
        return (decision, confirmed, actions)
    }

    /// A logged-in connection closed without logout: its grace window starts (P-1, P-2), and
    /// its locks' TTLs, counted from now, when the server decides the owner is offline (§2.12).
    mutating func onConnectionLost(_ connection: ConnectionRef, lastSeen: NIODeadline, now: NIODeadline) -> [HubAction] {
        let key = userKey(of: connection)
        guard let grace = connectionLost(connection, lastSeen: min(lastSeen, now), now: now) else { return [] }
        var actions: [HubAction] = [.schedule(.grace(grace), at: grace.deadline, loop: connection.loopIndex)]
        if let key { actions.append(.lockOwner(key, .lost(connection))) }
        return actions
    }

    /// An explicit logout (SPEC P-4, H-4): members are told at once, the user's locks are
    /// released, it is offline to peers at once (§1.7).
    mutating func onLogout(_ connection: ConnectionRef, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        guard let key = userKey(of: connection),
              let ended = endSessionForGood(key, reason: "logout", now: now, wallMillis: wallMillis) else { return [] }
        return ended.actions
    }

    /// Ends `key`'s session for good (a logout, an administrator): members are told at once
    /// (P-4), its locks are released (§2.12), webhooks get its leaves and `userOffline` with
    /// `reason`, it is offline to peers at once and its calls end (§1.7, §1.8). Returns the
    /// connection that served it (nil within its grace window), or nil without a session.
    mutating func endSessionForGood(_ key: UserKey, reason: String, now: NIODeadline, wallMillis: Int64)
        -> (connection: ConnectionRef?, actions: [HubAction])? {
        guard let session = sessions[key] else { return nil }
        webhooks.sessionEnded(key, channels: session.channels, reason: reason, ts: wallMillis)
        var actions = endSession(key, event: .remoteLeave, wallMillis: wallMillis).map { HubAction.broadcast($0) }
        actions += [.wakeCluster, .wakeWebhooks]
        actions += signalingSessionEnded(key, now: now, wallMillis: wallMillis)
        actions.append(.lockOwner(key, .loggedOut(session.connection)))
        return (session.connection, actions)
    }

    /// A subscribe (or a repeated one changing its options).
    mutating func onSubscribe(_ connection: ConnectionRef, channel: String, quiet: Bool, features: ChannelFeatures,
                              maxMembers: Int? = nil, wallMillis: Int64) -> (SubscribeDecision, [HubAction]) {
        let key = userKey(of: connection)
        let wasMember = key.flatMap { sessions[$0]?.channels.contains(channel) } ?? true
        let decision = subscribe(connection, channel: channel, quiet: quiet, features: features, maxMembers: maxMembers, wallMillis: wallMillis)
        var actions: [HubAction] = []
        if case .subscribed(_, let join) = decision {
            if !wasMember, let key {
                webhooks.channelChanged(.joinChannel, key, channel: channel, reason: nil, ts: wallMillis)
                actions.append(.wakeWebhooks)
            }
            if let join { actions.append(.broadcast(join)) }
        }
        actions.append(.wakeCluster)
        return (decision, actions)
    }

    /// An unsubscribe (P-4); nil when the connection is not logged in.
    mutating func onUnsubscribe(_ connection: ConnectionRef, channel: String, wallMillis: Int64) -> [HubAction]? {
        let key = userKey(of: connection)
        let wasMember = key.flatMap { sessions[$0]?.channels.contains(channel) } ?? false
        guard let outcome = unsubscribe(connection, channel: channel, wallMillis: wallMillis) else { return nil }
        var actions: [HubAction] = []
        if wasMember, let key {
            webhooks.channelChanged(.leaveChannel, key, channel: channel, reason: "leave", ts: wallMillis)
            actions.append(.wakeWebhooks)
        }
        if let leave = outcome { actions.append(.broadcast(leave)) }
        actions.append(.wakeCluster)
        return actions
    }

    /// Answers the logins the cluster has confirmed.
    mutating func takeReadyLogins() -> [HubAction] {
        cluster.takeReadyLogins().compactMap { loginWaiters.removeValue(forKey: $0).map { .answerLogin($0) } }
    }
}
