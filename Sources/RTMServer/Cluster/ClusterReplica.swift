import NIOCore

/// A node's view of the other nodes' sessions, and the events it owes them.
/// Part of `HubState`, changed under its lock. A single node runs the same rules as a cluster
/// of one: its events go to an in-memory log that hands them straight back (`LocalNodeLink`),
/// so its logins are confirmed by their own `started` as a cluster node's are, and its table
/// of other nodes' sessions stays empty. Its fields change only through its own functions.
struct ClusterReplica {
    /// A session another node has (or had, while its grace window runs after the node died).
    struct RemoteSession {
        var session: ClusterSession
        /// The node instance that has it.
        var owner: String
    }

    /// A dead node's session whose grace window ends at `deadline` (then it times out, P-2),
    /// unless it came back on a live node first.
    struct OrphanTimer: Sendable, Equatable {
        let key: UserKey
        let session: UInt64
        let deadline: NIODeadline
    }

    /// This node's instance (`node id#run`): the writer of its events.
    let instance: String
    /// This node's id in a cluster, as the admin API describes it; nil on a single node
    /// (no cluster to describe).
    let clusterNode: String?
    /// The other nodes' sessions, by user.
    private(set) var remote: [UserKey: RemoteSession] = [:]
    /// Local sessions whose own `started` / `moved` came back through the log: they are older
    /// than any `started` read after, so such a login ends them (C-6 across nodes).
    private(set) var confirmed: Set<UInt64> = []
    /// Events to send, in the order they happened (taken by the sender under the lock).
    private(set) var outbox: [ClusterEvent] = []
    /// Node ids whose lease ran out.
    private(set) var deadNodes: Set<String> = []
    /// Each node id's current instance (a new one means the node restarted).
    private(set) var instances: [String: String] = [:]
    /// New local logins whose reply waits for the cluster (C-6 across nodes: no moment when
    /// two sessions of a user are both logged in), by user.
    private(set) var pendingLogins: [UserKey: PendingLogin] = [:]
    /// Sessions whose login may now be answered (taken by the hub under the lock).
    private(set) var readyLogins: [UInt64] = []

    /// A new login waiting for the cluster: first for its own `started` to come back through
    /// the log (then every node has it in the same order), then, if another node had an
    /// earlier session of the user, for that node's `ended` (it kicked its client), or for
    /// that node to be gone.
    struct PendingLogin {
        var session: UInt64
        /// The earlier session on another node, and its node instance.
        var waitingFor: (session: UInt64, owner: String)?
    }

    /// `instance`: this node's run (`node id#run`); `clusterNode`: its id when it is one node
    /// of a cluster.
    init(instance: String, clusterNode: String?) {
        self.instance = instance
        self.clusterNode = clusterNode
    }

    /// Queues an event for the log.
    mutating func send(_ kind: ClusterEvent.Kind) {
        outbox.append(ClusterEvent(from: instance, kind: kind))
    }

    /// A member change of a local session, for the other nodes.
    mutating func announce(_ key: UserKey, session: UInt64, channel: String, _ change: ClusterEvent.MemberChange) {
        send(.member(appId: key.appId, userId: key.userId, session: session, channel: channel, change: change))
    }

    /// A local session ended; told to the others when `announce`.
    mutating func sessionEnded(_ session: HubState.Session, timedOut: Bool, announce: Bool) {
        confirmed.remove(session.id)
        // Ended before its login was answered (replaced, kicked, closed): nothing to wait for.
        if pendingLogins[session.key]?.session == session.id { loginReady(session.key) }
        if announce { send(.ended(appId: session.key.appId, userId: session.key.userId, session: session.id, timedOut: timedOut)) }
    }

    /// A new local login (`started` queued): its reply waits (`readyLogins`).
    mutating func loginStarted(_ key: UserKey, session: UInt64) {
        // An earlier login of the user here still waiting was replaced by this one.
        if pendingLogins[key] != nil { loginReady(key) }
        pendingLogins[key] = PendingLogin(session: session)
    }

    /// The login's own `started` came back through the log; `earlier` was the user's session
    /// on another node just before it (ended by it on every node).
    mutating func loginCameBack(_ key: UserKey, session: UInt64, earlier: RemoteSession?) {
        guard pendingLogins[key]?.session == session else { return }
        if let earlier, earlier.session.id != session, !isGone(earlier.owner) {
            pendingLogins[key]?.waitingFor = (earlier.session.id, earlier.owner)
        } else {
            loginReady(key)
        }
    }

    /// `ended` of a session read from the log: a login waiting for it may be answered.
    mutating func remoteSessionEnded(_ key: UserKey, session: UInt64) {
        if pendingLogins[key]?.waitingFor?.session == session { loginReady(key) }
    }

    /// A node instance is gone: logins waiting for one of its sessions may be answered.
    mutating func releaseLoginsOfGoneNodes() {
        for (key, pending) in pendingLogins {
            if let owner = pending.waitingFor?.owner, isGone(owner) { loginReady(key) }
        }
    }

    private mutating func loginReady(_ key: UserKey) {
        guard let pending = pendingLogins.removeValue(forKey: key) else { return }
        readyLogins.append(pending.session)
    }

    /// Takes the sessions whose logins may be answered now.
    mutating func takeReadyLogins() -> [UInt64] {
        defer { readyLogins = [] }
        return readyLogins
    }

    /// A local session's own `started` or `moved` came back through the log.
    mutating func confirm(_ session: UInt64) { confirmed.insert(session) }

    /// A local session moved to another node: it is `owner`'s from now on.
    mutating func movedAway(_ local: UInt64, to session: ClusterSession, owner: String) {
        confirmed.remove(local)
        putRemote(session, owner: owner)
    }

    /// Another node's session, as it describes it, is `owner`'s.
    mutating func putRemote(_ session: ClusterSession, owner: String) {
        remote[session.key] = RemoteSession(session: session, owner: owner)
    }

    /// Another node's session of `key` is gone from this table (it ended, or moved here).
    mutating func removeRemote(_ key: UserKey) -> RemoteSession? {
        remote.removeValue(forKey: key)
    }

    /// Another node's session of `key` changed its membership of `channel` (nil: left).
    mutating func remoteMember(_ key: UserKey, channel: String, _ member: ClusterMember?) {
        remote[key]?.session.members[channel] = member
    }

    /// Another node's session of `key` has a new temporary state in `channel`.
    mutating func remoteState(_ key: UserKey, channel: String, _ state: [String: String]) {
        remote[key]?.session.members[channel]?.state = state
    }

    /// Remembers `instance` as its node's current one; returns the node's previous instance.
    mutating func noteInstance(_ instance: String) -> String? {
        instances.updateValue(instance, forKey: String(ClusterEvent.node(of: instance)))
    }

    /// A node's lease ran out; false when it was known dead already.
    mutating func nodeDied(_ node: String) -> Bool { deadNodes.insert(node).inserted }

    /// A dead node renews its lease again; false when it was not known dead.
    mutating func nodeReturned(_ node: String) -> Bool { deadNodes.remove(node) != nil }

    /// Whether events wait to be sent.
    var hasOutbox: Bool { !outbox.isEmpty }

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
