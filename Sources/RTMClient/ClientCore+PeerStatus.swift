import NIOCore
import RTMProtocol

/// What the client knows of the peers it watches (AGORA_REFERENCE §1.7): kept across
/// reconnections, cleared on logout. One owner: `ClientCore`, on its loop.
struct PeerWatchList {
    /// Watched peers, restored after every reconnection.
    var peers: Set<String> = []
    /// The last state reported to the application per peer.
    var states: [String: PeerOnlineState] = [:]
    /// The newest status version applied per peer: an older frame (frames from different
    /// server threads may overtake each other) never rolls a state back.
    var versions: [String: UInt64] = [:]

    /// Applies statuses at `version`; returns those to report: every one of `announce` (a
    /// first subscribe reports the full status) and any other that changed.
    mutating func apply(_ statuses: [PeerOnlineStatus], version: UInt64, announce: Set<String> = []) -> [PeerOnlineStatus] {
        var changed: [PeerOnlineStatus] = []
        for status in statuses where peers.contains(status.userId) {
            guard version >= versions[status.userId] ?? 0 else { continue }
            versions[status.userId] = version
            let previous = states.updateValue(status.state, forKey: status.userId)
            if previous != status.state || announce.contains(status.userId) { changed.append(status) }
        }
        return changed
    }

    /// Stops watching `users`.
    mutating func remove(_ users: [String]) {
        for user in users {
            peers.remove(user)
            states[user] = nil
            versions[user] = nil
        }
    }
}

extension ClientCore {
    /// A `peersOnlineStatus` event frame.
    func receivedPeerStatus(_ frame: Frame) {
        report(peerWatch.apply(frame.peers ?? [], version: frame.seq ?? 0))
    }

    /// Subscribes to `users` (the reply carries their states now and the version).
    func subscribePeers(_ users: [String], operation: String, isInternal: Bool) -> EventLoopFuture<Frame> {
        request(Frame(type: .subscribePeersOnlineStatus, users: users), operation: operation, isInternal: isInternal)
            .map { [self] reply in
                let fresh = Set(users).subtracting(peerWatch.peers)
                if !isInternal { peerWatch.peers.formUnion(users) }
                report(peerWatch.apply(reply.peers ?? [], version: reply.seq ?? 0, announce: fresh))
                return reply
            }
    }

    /// After every login: subscribe again to every watched peer, which reports the changes made
    /// while this client was away (§1.7). Versions start over: the server may have restarted.
    func restorePeerSubscriptions() {
        guard !peerWatch.peers.isEmpty else { return }
        peerWatch.versions = [:]
        let all = peerWatch.peers.sorted()
        for start in stride(from: 0, to: all.count, by: PeerStatusLimits.maxUsersPerCall) {
            let chunk = Array(all[start..<min(start + PeerStatusLimits.maxUsersPerCall, all.count)])
            subscribePeers(chunk, operation: "subscribePeersOnlineStatus", isInternal: true).whenFailure { [logger] error in
                logger.warning("re-subscribing peer online status failed", metadata: ["error": "\(error)"])
            }
        }
    }

    private func report(_ statuses: [PeerOnlineStatus]) {
        guard !statuses.isEmpty else { return }
        emit(.peersOnlineStatus(statuses))
    }
}
