import NIOCore

/// A node's view of the other nodes' sessions, and the events it owes them (issue 13 items 3–5).
/// Part of `HubState`, changed under its lock; empty and silent on a single node (`instance`
/// nil), so nothing of this runs there.
struct ClusterReplica {
    /// A session another node has (or had, while its grace window runs after the node died).
    struct RemoteSession {
        var session: ClusterSession
        /// The node instance that has it.
        var owner: String
    }

    /// A dead node's session whose grace window ends at `deadline` (then it times out, P-2),
    /// unless it came back on a live node first.
    struct OrphanTimer: Sendable {
        let key: UserKey
        let session: UInt64
        let deadline: NIODeadline
    }

    /// This node's instance (`node id#run`); nil on a single node.
    var instance: String?
    /// The other nodes' sessions, by user.
    var remote: [UserKey: RemoteSession] = [:]
    /// Local sessions whose own `started` / `moved` came back through the log: they are older
    /// than any `started` read after, so such a login ends them (C-6 across nodes).
    var confirmed: Set<UInt64> = []
    /// Events to send, in the order they happened (taken by the sender under the lock).
    var outbox: [ClusterEvent] = []
    /// Node ids whose lease ran out.
    var deadNodes: Set<String> = []
    /// Each node id's current instance (a new one means the node restarted).
    var instances: [String: String] = [:]

    var isEnabled: Bool { instance != nil }

    /// Queues an event (nothing on a single node).
    mutating func send(_ kind: ClusterEvent.Kind) {
        guard let instance else { return }
        outbox.append(ClusterEvent(from: instance, kind: kind))
    }

    /// A member change of a local session, for the other nodes.
    mutating func announce(_ key: UserKey, session: UInt64, channel: String, _ change: ClusterEvent.MemberChange) {
        send(.member(appId: key.appId, userId: key.userId, session: session, channel: channel, change: change))
    }

    /// A local session ended; told to the others when `announce`.
    mutating func sessionEnded(_ session: HubState.Session, timedOut: Bool, announce: Bool) {
        guard isEnabled else { return }
        confirmed.remove(session.id)
        if announce { send(.ended(appId: session.key.appId, userId: session.key.userId, session: session.id, timedOut: timedOut)) }
    }

    /// Takes the events to send.
    mutating func takeOutbox() -> [ClusterEvent] {
        defer { outbox = [] }
        return outbox
    }

    /// Whether `owner` is gone: its node was declared dead, or restarted as another instance.
    func isGone(_ owner: String) -> Bool {
        let node = String(ClusterEvent.node(of: owner))
        return deadNodes.contains(node) || (instances[node].map { $0 != owner } ?? false)
    }
}
