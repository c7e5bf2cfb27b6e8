import NIOCore
import RTMProtocol

/// A timer of the hub. `HubState` asks for one with `HubAction.schedule`; when it is due, `Hub`
/// hands it back to `HubState.timerFired` under its lock, like every other event. Timers are
/// never cancelled: each carries what tells a stale one (a session generation, a lock owner, a
/// session id), and a stale one does nothing.
enum HubTimer: Sendable, Equatable {
    /// A lost connection's session: its grace window ran out (SPEC P-1, P-2).
    case grace(HubState.GraceTimer)
    /// An invitation's ring or answer time ran out (§1.8).
    case invitation(InvitationTable.Key)
    /// An ended invitation's linger time is over: it is forgotten.
    case forgetInvitation(InvitationTable.Key)
    /// A caller whose session a server restart cut had this long to log in again (§1.8).
    case invitationCaller(UserKey)
    /// Cluster mode: an invitation request has waited `clusterLoginTimeout` for its event.
    case invitationReply(UInt64)
    /// A lost connection's session turns unreachable unless it came back first (§1.7).
    case peerUnreachable(UserKey, generation: UInt64)
    /// A dead node's session: its grace window ran out (P-2 across nodes).
    case orphan(ClusterReplica.OrphanTimer)
    /// A new login's reply has waited `clusterLoginTimeout` for the cluster.
    case clusterLogin(session: UInt64, user: UserKey)
    /// Cluster mode: a channel whose follow failed is asked for again (`clusterFollowRetryInterval`).
    case followRetry(ChannelKey)
    /// Interval-mode presence events, every `presenceInterval`.
    case presenceInterval
    /// Replay buffers trimmed and unused channels forgotten, every replay window.
    case sweep
    /// History older than `historyRetention` forgotten, every half retention (at most hourly).
    case historyTrim
    /// Due locks released and waits tried again, every `lockSweepInterval` (§2.12).
    case lockSweep
}
