import NIOCore
import RTMProtocol

/// Peer online status (AGORA_REFERENCE §1.7), derived from the session table so that it agrees
/// with presence and the heartbeat rules (SPEC H-2, P-1, T-8): online while the session lives
/// and the server hears from it, unreachable once it was silent past its threshold, offline
/// when the session ends.
extension HubState {
    /// A status frame for one watcher's connection.
    struct PeerStatusSend {
        let connection: ConnectionRef
        let frame: Frame
    }

    /// A user's state now.
    /// In a cluster a session on another node counts (online: its own node judges silence).
    func peerState(_ key: UserKey) -> PeerOnlineState {
        guard sessions[key] != nil else { return cluster.remote[key] != nil ? .online : .offline }
        return peerStatus.silent.contains(key) ? .unreachable : .online
    }

    /// queryPeersOnlineStatus: a live session is online to a query, silent or not (§1.7).
    mutating func queryPeers(_ caller: UserKey, users: [String], limits: Limits, now: NIODeadline) -> Result<[PeerOnlineStatus], PeerStatusRegistry.Refusal> {
        if let refusal = admitPeerCall(caller, users: users, query: true, limits: limits, now: now) { return .failure(refusal) }
        return .success(users.map { user in
            PeerOnlineStatus(userId: user, state: peerState(UserKey(appId: caller.appId, userId: user)) == .offline ? .offline : .online)
        })
    }

    /// subscribePeersOnlineStatus: the peers' states now and the status version.
    mutating func subscribePeers(_ caller: UserKey, users: [String], limits: Limits, now: NIODeadline)
        -> Result<(peers: [PeerOnlineStatus], version: UInt64), PeerStatusRegistry.Refusal> {
        if let refusal = admitPeerCall(caller, users: users, query: false, limits: limits, now: now) { return .failure(refusal) }
        guard let session = sessions[caller] else { return .failure(.init(code: .notLogin, reason: "not logged in")) }
        // Read before the registry changes (it cannot read the session table while it does).
        let states = Dictionary(uniqueKeysWithValues: Set(users).map { user in
            (user, peerState(UserKey(appId: caller.appId, userId: user)))
        })
        return peerStatus.subscribe(caller, session: session.id, targets: users) { states[$0.userId] ?? .offline }
            .map { (peers: $0, version: peerStatus.version) }
    }

    /// unsubscribePeersOnlineStatus.
    mutating func unsubscribePeers(_ caller: UserKey, users: [String], limits: Limits, now: NIODeadline) -> PeerStatusRegistry.Refusal? {
        if let refusal = admitPeerCall(caller, users: users, query: false, limits: limits, now: now) { return refusal }
        peerStatus.unsubscribe(caller, targets: users)
        return nil
    }

    private mutating func admitPeerCall(_ caller: UserKey, users: [String], query: Bool, limits: Limits, now: NIODeadline) -> PeerStatusRegistry.Refusal? {
        if let refusal = peerStatus.check(users, limits: limits) { return refusal }
        guard peerStatus.allow(caller, query ? .query : .subscription, now: now) else {
            return .init(code: .operationRateExceedLimitation,
                         reason: "too many peer status calls: at most \(Int(peerStatus.burst)) at once, then \(peerStatus.ratePerSecond) per second")
        }
        return nil
    }

    /// The user's session started, resumed, was replaced or ended: its own subscriptions follow
    /// the session, and its watchers are told if its state changed. `spoke`: a new connection of
    /// the session was heard from (a login or resume), so it is not silent any more.
    mutating func peerSessionChanged(_ key: UserKey, spoke: Bool) -> [PeerStatusSend] {
        peerStatus.sessionChanged(key, session: sessions[key]?.id)
        if spoke { _ = peerStatus.setSilent(key, false) }
        return peerStatusSends(peerStatus.update(key, to: peerState(key)))
    }

    /// Cluster mode: a session of `key` on another node started, moved or ended: local
    /// watchers are told if the user's state changed.
    mutating func remotePeerChanged(_ key: UserKey) -> [PeerStatusSend] {
        peerStatusSends(peerStatus.update(key, to: peerState(key)))
    }

    /// The user's connection `connection` was silent past its threshold (`silent`), or spoke
    /// again. Only the session's current connection counts: a replaced one (a resume, C-4) that
    /// is still closing must not mark the new one.
    mutating func peerSilence(_ key: UserKey, connection: ConnectionRef?, silent: Bool) -> [PeerStatusSend] {
        guard let session = sessions[key], session.connection == connection, peerStatus.setSilent(key, silent) else { return [] }
        return peerStatusSends(peerStatus.update(key, to: peerState(key)))
    }

    /// The session's connection closed (generation `generation`): when its unreachable threshold
    /// has passed since its last sign of life and it has not come back, it is unreachable.
    mutating func peerLostThresholdPassed(_ key: UserKey, generation: UInt64) -> [PeerStatusSend] {
        guard let session = sessions[key], session.connection == nil, session.generation == generation else { return [] }
        return peerSilence(key, connection: nil, silent: true)
    }

    /// The current generation of a user's session (bumped on every loss and return).
    func sessionGeneration(_ key: UserKey) -> UInt64? { sessions[key]?.generation }

    private func peerStatusSends(_ notices: [PeerStatusRegistry.Notice]) -> [PeerStatusSend] {
        notices.compactMap { notice in
            // A watcher without a connection catches up when it subscribes again after its
            // reconnection (its SDK compares and reports what changed meanwhile).
            guard let connection = sessions[notice.watcher]?.connection else { return nil }
            return PeerStatusSend(connection: connection,
                                  frame: Frame(type: .peersOnlineStatus, seq: notice.version).with { $0.peers = notice.peers })
        }
    }
}
