import NIOCore
import RTMProtocol

/// Sessions and presence across nodes: every node applies the cluster's
/// events (`ClusterEvent`) in the log's one order, so every node reaches the same view of who
/// is logged in where and who is in which channel, and tells its own subscribers. Remote
/// members live in `ChannelState.members` beside local ones, so whoNow, snapshots, counts,
/// states and interval mode are cluster-wide with no other change.
extension HubState {
    /// What applying cluster events asks the hub to do.
    struct ClusterOutcome {
        var broadcasts: [Broadcast] = []
        /// Local sessions ended by a newer login on another node: tell the client (`kicked`,
        /// same uid login) and close (C-6).
        var kicked: [(key: UserKey, connection: ConnectionRef?)] = []
        /// Local sessions that resumed on another node: close the old connection quietly.
        var movedAway: [(key: UserKey, connection: ConnectionRef)] = []
        /// Local sessions the cluster ended otherwise (a survivor timed them out while this
        /// node was cut off and the client was gone too).
        var ended: [UserKey] = []
        /// Grace windows of a dead node's sessions to start.
        var orphans: [ClusterReplica.OrphanTimer] = []
        /// Peer online status for local watchers of users on other nodes (§1.7).
        var peerSends: [PeerStatusSend] = []
    }

    /// A single node's log (`LocalNodeLink`): the events it queued, applied back in the order
    /// they were queued, as a cluster node applies its own read back from the backplane (its
    /// logins are confirmed by their own `started`).
    mutating func applyOwnClusterEvents(now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        var actions: [HubAction] = []
        while case let events = cluster.takeOutbox(), !events.isEmpty {
            actions += clusterActions(applyCluster(events, now: now, wallMillis: wallMillis), now: now)
        }
        return actions + takeReadyLogins()
    }

    /// Applies events read from the log, in order.
    mutating func applyCluster(_ events: [ClusterEvent], now: NIODeadline, wallMillis: Int64) -> ClusterOutcome {
        var out = ClusterOutcome()
        for event in events { applyCluster(event, now: now, wallMillis: wallMillis, into: &out) }
        return out
    }

    private mutating func applyCluster(_ event: ClusterEvent, now: NIODeadline, wallMillis: Int64, into out: inout ClusterOutcome) {
        let me = cluster.instance
        let mine = event.from == me
        if !mine { noteInstance(event.from, now: now, into: &out) }
        switch event.kind {
        case .hello:
            if !mine { sendSync(to: event.from) }
        case .sync(let to, let list):
            guard to == me, !mine else { return }
            for session in list { adopt(session, owner: event.from, wallMillis: wallMillis, into: &out) }
        case .started(let session):
            let earlier = cluster.remote[session.key]
            endOthers(of: session.key, except: session.id, wallMillis: wallMillis, into: &out)
            if mine {
                if sessions[session.key]?.id == session.id { cluster.confirm(session.id) }
                cluster.loginCameBack(session.key, session: session.id, earlier: earlier)
            } else {
                adopt(session, owner: event.from, wallMillis: wallMillis, into: &out)
            }
        case .moved(let session):
            applyMoved(session, from: event.from, mine: mine, wallMillis: wallMillis, into: &out)
        case .ended(let appId, let userId, let id, let timedOut):
            applyEnded(UserKey(appId: appId, userId: userId), session: id, timedOut: timedOut, mine: mine,
                       wallMillis: wallMillis, into: &out)
        case .member(let appId, let userId, let id, let channel, let change):
            guard !mine else { return }
            applyMember(UserKey(appId: appId, userId: userId), session: id, channel: channel, change, wallMillis: wallMillis, into: &out)
        case .invitation:
            break   // read from the invitation channel (HubState+InvitationLog)
        }
    }

    // MARK: sessions

    /// A session resumed here (P-1): the node that had it reads `moved` and lets it go.
    private mutating func applyMoved(_ session: ClusterSession, from owner: String, mine: Bool, wallMillis: Int64,
                                     into out: inout ClusterOutcome) {
        let key = session.key
        if mine {
            if sessions[key]?.id == session.id { cluster.confirm(session.id) }
            return
        }
        if let local = sessions[key], local.id == session.id {
            // Moved away: the members stay (same session id), now as another node's.
            _ = sessions.remove(key)
            cluster.movedAway(local.id, to: session, owner: owner)
            if let connection = local.connection { out.movedAway.append((key, connection)) }
        } else {
            // Known or not (a late node; or ended here first, then resumed: its members come
            // back with a join), the session is now the owner's.
            adopt(session, owner: owner, wallMillis: wallMillis, into: &out)
        }
    }

    private mutating func applyEnded(_ key: UserKey, session id: UInt64, timedOut: Bool, mine: Bool, wallMillis: Int64,
                                     into out: inout ClusterOutcome) {
        let event: PresenceEventKind = timedOut ? .remoteTimeout : .remoteLeave
        cluster.remoteSessionEnded(key, session: id)
        if !mine, let local = sessions[key], local.id == id {
            // Survivors timed out a session of this node while it was cut off from them.
            if local.connection != nil {
                // Its client is still here: the session goes on and the others take it back.
                if let described = clusterSession(of: key) { cluster.send(.moved(described)) }
            } else {
                out.broadcasts += endSession(key, event: event, wallMillis: wallMillis, announce: false)
                out.ended.append(key)
            }
        } else if let remote = cluster.remote[key], remote.session.id == id {
            endRemote(key, event: event, wallMillis: wallMillis, into: &out)
        }
    }

    /// A new login of `key` (`keep`): every earlier session of the user ends, here or remote.
    /// A local one is announced `ended`: the new login's node answers its login only then.
    private mutating func endOthers(of key: UserKey, except keep: UInt64, wallMillis: Int64, into out: inout ClusterOutcome) {
        if let local = sessions[key], local.id != keep, cluster.confirmed.contains(local.id) {
            out.broadcasts += endSession(key, event: .remoteLeave, wallMillis: wallMillis, announce: true)
            out.kicked.append((key, local.connection))
        }
        if let remote = cluster.remote[key], remote.session.id != keep {
            endRemote(key, event: .remoteLeave, wallMillis: wallMillis, into: &out)
        }
    }

    /// Takes a remote session in (its members join, told where they are new).
    private mutating func adopt(_ session: ClusterSession, owner: String, wallMillis: Int64, into out: inout ClusterOutcome) {
        let key = session.key
        if let local = sessions[key], local.id == session.id { return }   // ours (a stale event)
        if let known = cluster.remote[key], known.session.id != session.id {
            endRemote(key, event: .remoteLeave, wallMillis: wallMillis, into: &out)
        }
        let previous = cluster.remote[key]?.session.members ?? [:]
        cluster.putRemote(session, owner: owner)
        // A caller awaited after this node read the invitations back has a session elsewhere:
        // no restart cut it, and its calls go on (§1.8).
        _ = invitations.takeAwaited(key)
        out.peerSends += remotePeerChanged(key)
        for (channel, member) in session.members.sorted(by: { $0.key < $1.key }) {
            out.broadcasts += putMember(key, session: session.id, channel: channel, member, wallMillis: wallMillis)
        }
        for channel in previous.keys.sorted() where session.members[channel] == nil {
            if let leave = removeMember(key, channel: channel, event: .remoteLeave, except: nil, wallMillis: wallMillis, session: session.id) {
                out.broadcasts.append(leave)
            }
        }
    }

    /// A remote session ended: its members leave (or time out) everywhere here.
    private mutating func endRemote(_ key: UserKey, event: PresenceEventKind, wallMillis: Int64, into out: inout ClusterOutcome) {
        guard let remote = cluster.removeRemote(key) else { return }
        publisherMayHaveLeft(key, wallMillis: wallMillis)   // bounded memory: see endSession
        out.peerSends += remotePeerChanged(key)
        for channel in remote.session.members.keys.sorted() {
            if let broadcast = removeMember(key, channel: channel, event: event, except: nil, wallMillis: wallMillis, session: remote.session.id) {
                out.broadcasts.append(broadcast)
            }
        }
    }

    /// A login here with the resume token of another node's session (P-1 across nodes): the
    /// session moves here with its channels and states; nobody sees a leave or join.
    mutating func resumeFromCluster(_ key: UserKey, token: String, connection: ConnectionRef, heartbeat: TimeAmount,
                                    presenceTimeout: TimeAmount) -> Admission? {
        guard let remote = cluster.remote[key], remote.session.resumeToken == token else { return nil }
        _ = cluster.removeRemote(key)
        var session = Session(id: remote.session.id, key: key, resumeToken: token, connection: connection,
                              heartbeat: heartbeat, presenceTimeout: presenceTimeout)
        session.channels = Set(remote.session.members.keys)
        sessions.put(session)
        var features: [String: ChannelFeatures] = [:]
        for (channel, member) in remote.session.members {
            _ = putMember(key, session: session.id, channel: channel, member, wallMillis: 0)
            features[channel] = ChannelFeatures(rawValue: member.features)
        }
        if let described = clusterSession(of: key) { cluster.send(.moved(described)) }
        return Admission(sessionID: session.id, resumeToken: token, resumed: true, channels: session.channels.sorted(),
                         features: features, replaced: nil, kicked: nil, broadcasts: [])
    }

    /// A new local session: the others learn it (and end the user's earlier sessions).
    /// Its login is answered once the cluster has ended the user's other sessions
    /// (`ClusterReplica.PendingLogin`).
    mutating func announceStarted(_ key: UserKey) {
        guard let described = clusterSession(of: key) else { return }
        cluster.send(.started(described))
        cluster.loginStarted(key, session: described.id)
    }

    /// A local session as the cluster describes it.
    func clusterSession(of key: UserKey) -> ClusterSession? {
        guard let session = sessions[key] else { return nil }
        var members: [String: ClusterMember] = [:]
        for channel in session.channels {
            guard let member = channels[ChannelKey(appId: key.appId, name: channel)]?.members[key.userId],
                  member.sessionID == session.id else { continue }
            members[channel] = ClusterMember(quiet: member.quiet, features: member.features.rawValue, state: member.state)
        }
        return ClusterSession(appId: key.appId, userId: key.userId, id: session.id, resumeToken: session.resumeToken,
                              heartbeatMillis: session.heartbeat.nanoseconds / 1_000_000,
                              presenceTimeoutMillis: session.presenceTimeout.nanoseconds / 1_000_000, members: members)
    }

    /// Every local session, in parts, for a node that just started (an empty part without
    /// any: the new node learns this one is there).
    private mutating func sendSync(to instance: String) {
        var rest = sessions.keys.compactMap { clusterSession(of: $0) }[...]
        if rest.isEmpty { cluster.send(.sync(to: instance, sessions: [])) }
        while !rest.isEmpty {
            cluster.send(.sync(to: instance, sessions: Array(rest.prefix(500))))
            rest = rest.dropFirst(500)
        }
    }

    // MARK: members

    private mutating func applyMember(_ key: UserKey, session id: UInt64, channel: String, _ change: ClusterEvent.MemberChange,
                                      wallMillis: Int64, into out: inout ClusterOutcome) {
        guard cluster.remote[key]?.session.id == id else { return }
        switch change {
        case .join(let member):
            cluster.remoteMember(key, channel: channel, member)
            out.broadcasts += putMember(key, session: id, channel: channel, member, wallMillis: wallMillis)
        case .leave:
            cluster.remoteMember(key, channel: channel, nil)
            if let leave = removeMember(key, channel: channel, event: .remoteLeave, except: nil, wallMillis: wallMillis, session: id) {
                out.broadcasts.append(leave)
            }
        case .state(let userState):
            cluster.remoteState(key, channel: channel, userState)
            let channelKey = ChannelKey(appId: key.appId, name: channel)
            guard var state = channels[channelKey], var member = state.members[key.userId], member.sessionID == id else { return }
            member.state = userState
            state.members[key.userId] = member
            channels.put(state, for: channelKey)
            if !member.quiet, let broadcast = presenceChange(channelKey, .remoteStateChanged, user: key.userId, state: userState,
                                                             except: nil, wallMillis: wallMillis) {
                out.broadcasts.append(broadcast)
            }
        }
    }

    /// Makes `session` the user's member of a channel: a join event where the user was not
    /// visible there yet, then its state if any.
    private mutating func putMember(_ key: UserKey, session id: UInt64, channel: String, _ member: ClusterMember,
                                    wallMillis: Int64) -> [Broadcast] {
        let channelKey = ChannelKey(appId: key.appId, name: channel)
        var state = channels.take(channelKey)
        let older = state.put(Member(sessionID: id, quiet: member.quiet, features: ChannelFeatures(rawValue: member.features),
                                     state: member.state), for: key.userId)
        channels.put(state, for: channelKey)
        guard !member.quiet else { return [] }
        var out: [Broadcast] = []
        if older == nil || older?.quiet == true,
           let join = presenceChange(channelKey, .remoteJoin, user: key.userId, except: nil, wallMillis: wallMillis) {
            out.append(join)
        }
        if member.state != (older?.state ?? [:]), !member.state.isEmpty,
           let change = presenceChange(channelKey, .remoteStateChanged, user: key.userId, state: member.state, except: nil, wallMillis: wallMillis) {
            out.append(change)
        }
        return out
    }

    // MARK: nodes

    /// Remembers the writer's instance; a new instance of a known node means the old one is
    /// gone (restarted): its sessions get their grace window.
    private mutating func noteInstance(_ instance: String, now: NIODeadline, into out: inout ClusterOutcome) {
        let previous = cluster.noteInstance(instance)
        if let previous, previous != instance {
            out.orphans += orphans(where: { $0 == previous }, now: now)
            cluster.releaseLoginsOfGoneNodes()
        }
    }

    /// A node's lease ran out (`BackplaneEvent.nodeDied`): its sessions get their grace window.
    /// The set of dead nodes is kept here only (`ClusterReplica.deadNodes`).
    mutating func nodeDied(_ node: String, now: NIODeadline) -> [HubAction] {
        guard cluster.nodeDied(node) else { return [] }
        cluster.releaseLoginsOfGoneNodes()
        let timers = orphans(where: { ClusterEvent.node(of: $0) == node }, now: now)
        return [.log(.warning, "cluster node declared dead: its lease passed without renewal", ["node": "\(node)"])]
            + orphanActions(timers) + takeReadyLogins()
    }

    /// The node renewed its lease again: its sessions are its own again.
    mutating func nodeReturned(_ node: String) -> [HubAction] {
        guard cluster.nodeReturned(node) else { return [] }
        return [.log(.notice, "cluster node back: it renews its lease again", ["node": "\(node)"])]
    }

    private func orphans(where owned: (String) -> Bool, now: NIODeadline) -> [ClusterReplica.OrphanTimer] {
        cluster.remote.compactMap { key, remote in
            guard owned(remote.owner) else { return nil }
            // A lost connection's window (T-8), counted from when the node was found gone.
            let window = TimeAmount.milliseconds(remote.session.heartbeatMillis + remote.session.presenceTimeoutMillis) + heartbeatSlack
            return ClusterReplica.OrphanTimer(key: key, session: remote.session.id, deadline: now + window)
        }
    }

    /// A dead node's session's window ended: unless it came back on a live node, it times out
    /// (SPEC P-2) for the whole cluster (`ended`; the first such event in the log wins), and
    /// its calls end with it (§1.8: canceled as the caller, failed as the callee).
    mutating func orphanExpired(_ timer: ClusterReplica.OrphanTimer, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        guard let remote = cluster.remote[timer.key], remote.session.id == timer.session, cluster.isGone(remote.owner) else { return [] }
        cluster.send(.ended(appId: timer.key.appId, userId: timer.key.userId, session: timer.session, timedOut: true))
        var actions: [HubAction] = []
        if invitations.hasLive(timer.key, asCaller: true) { actions += invitationInput(.callerGone, user: timer.key, now: now, wallMillis: wallMillis) }
        if invitations.hasLive(timer.key, asCaller: false) { actions += invitationInput(.calleeGone, user: timer.key, now: now, wallMillis: wallMillis) }
        return actions
    }
}

extension HubState {
    /// What applying cluster events asks for, as actions.
    mutating func clusterActions(_ outcome: ClusterOutcome, now: NIODeadline) -> [HubAction] {
        var actions = outcome.broadcasts.map { HubAction.broadcast($0) }
        for (key, connection) in outcome.kicked {
            if let connection {
                actions.append(.log(.info, "kicking a session: the same user logged in on another node", ["user": "\(key.userId)"]))
                actions.append(.kick(connection, user: key, code: .sameUidLogin, reason: "the same user id logged in from another client"))
            }
            actions += localSessionEnded(key, reason: "the same user id logged in on another node", now: now)
        }
        for (_, connection) in outcome.movedAway {
            actions.append(.closeReplaced(connection, reason: "the session resumed on another node"))
        }
        for key in outcome.ended { actions += localSessionEnded(key, reason: "the user's session timed out", now: now) }
        actions += outcome.peerSends.map { .send($0.frame, to: $0.connection) }
        return actions + orphanActions(outcome.orphans)
    }

    /// Grace windows of a dead (or restarted) node's sessions (SPEC P-2 across nodes).
    func orphanActions(_ orphans: [ClusterReplica.OrphanTimer]) -> [HubAction] {
        guard !orphans.isEmpty else { return [] }
        return [.log(.info, "a node is gone: its sessions time out unless they resume elsewhere", ["sessions": "\(orphans.count)"])]
            + orphans.map { .schedule(.orphan($0), at: $0.deadline) }
    }

    /// A local session ended by the cluster: what ends with it here. Its calls are ended by
    /// the node that ended it (a new login's node, or a survivor: `orphanExpired`), in the
    /// log's order before anything the new session does.
    private mutating func localSessionEnded(_ key: UserKey, reason: String, now: NIODeadline) -> [HubAction] {
        [.closeStreams(key, reason: reason)] + peerSessionChanged(key, spoke: false).map { HubAction.send($0.frame, to: $0.connection) }
    }
}
