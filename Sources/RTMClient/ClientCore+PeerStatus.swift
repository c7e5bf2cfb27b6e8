import NIOCore
import RTMProtocol

/// Peer online status on the client (AGORA_REFERENCE §1.7): events, subscribe replies, restore.
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
