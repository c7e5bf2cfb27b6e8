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
