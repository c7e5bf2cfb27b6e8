import NIOCore
import RTMProtocol

/// Peer online status (AGORA_REFERENCE §1.7): the calls, and the effects of status changes.
extension Hub {
    func queryPeers(_ caller: UserKey, users: [String]) -> Result<[PeerOnlineStatus], PeerStatusRegistry.Refusal> {
        modify { ($0.queryPeers(caller, users: users, limits: configuration.limits, now: .now()), []) }
    }

    func subscribePeers(_ caller: UserKey, users: [String]) -> Result<(peers: [PeerOnlineStatus], version: UInt64), PeerStatusRegistry.Refusal> {
        modify { ($0.subscribePeers(caller, users: users, limits: configuration.limits, now: .now()), []) }
    }

    func unsubscribePeers(_ caller: UserKey, users: [String]) -> PeerStatusRegistry.Refusal? {
        modify { ($0.unsubscribePeers(caller, users: users, limits: configuration.limits, now: .now()), []) }
    }

    /// A session's connection went silent past its threshold, or spoke again after that.
    func peerSilence(_ key: UserKey, connection: ConnectionRef, silent: Bool) {
        send(modify { ($0.peerSilence(key, connection: connection, silent: silent), []) })
    }

    /// A session's connection closed without a logout, its last sign of life at `lastSeen`: it
    /// turns unreachable `threshold` after that unless it comes back first (then offline when
    /// its grace window ends, SPEC P-2).
    func peerConnectionLost(_ key: UserKey, lastSeen: NIODeadline, threshold: TimeAmount, loop: Int) {
        let now = NIODeadline.now()
        modify { $0.peerConnectionLost(key, lastSeen: lastSeen, threshold: threshold, now: now, loop: loop) }
    }

    /// The unreachable threshold of a session with heartbeat interval `heartbeat`: the
    /// configured one (6 s), or 1.2 heartbeat intervals when that is longer, so that a client
    /// with a slow heartbeat is not unreachable between two healthy pings.
    func peerUnreachableThreshold(heartbeat: TimeAmount) -> TimeAmount {
        Self.unreachableThreshold(configured: configuration.peerUnreachableAfter, heartbeat: heartbeat)
    }

    static func unreachableThreshold(configured: TimeAmount, heartbeat: TimeAmount) -> TimeAmount {
        max(configured, .nanoseconds(heartbeat.nanoseconds / 5 * 6))
    }

    private func send(_ sends: [HubState.PeerStatusSend]) {
        for send in sends { Self.send(send.frame, on: send.connection.channel) }
    }
}

extension Hub {
    /// Visible members of each channel (0 for one that does not exist), getChannelMemberCount;
    /// nil when `caller` is over its rate.
    func memberCounts(_ caller: UserKey, channels: [String]) -> [String: Int]? {
        modify { ($0.memberCounts(caller, channels: channels, now: .now()), []) }
    }
}
