import NIOCore
import RTMProtocol

/// A visible member of a stream channel on another node, as its membership events told.
struct RemoteStreamMember: Sendable, Equatable {
    /// Its node (`rtm serve --node-id`) and that node's server run.
    let node: String
    let instance: String
    /// Joined topics → meta.
    var topics: [String: String]
}

/// Cluster mode: stream channel membership across nodes. Each node announces its
/// visible members' joins, leaves and topic changes (`StreamClusterEvent`, through the
/// backplane's log, `Hub+ClusterStream`) and mirrors the other nodes' (`remote`): a join's
/// snapshot lists the members and topic publishers of every node, and local members get the
/// presence and topic events of remote ones as of local ones.
///
/// A node new to a channel (started after the others' members joined) learns them when it
/// announces its own first member there: every node that sees a run it has not seen in the
/// channel answers with a `sync` of its members, which reach the newcomer's members as
/// `remoteJoin` (and `remoteJoinTopic`) events just after their snapshot. A node whose database
/// link comes back sends a `sync` of every channel it announced members in, so the others
/// learn the changes they missed (leaves included). A dead node's members leave with its lease
/// (`remoteTimeout`); a restarted node's earlier members leave when it announces its start.
extension StreamHub {
    /// What one remote member's change means to local members.
    struct RemoteChange {
        let user: String
        var presence: PresenceEventKind?
        var topics: [(TopicEventKind, [String: String])] = []
    }

    /// `snapshot` (this node's members) with the other nodes' visible members and publishers (none
    /// on a single node: its table of remote members is empty).
    func withRemote(_ snapshot: (users: [String], topics: [TopicInfo]), channel: ChannelKey) -> (users: [String], topics: [TopicInfo]) {
        guard let members = remote.withLockedValue({ $0[channel] }), !members.isEmpty else { return snapshot }
        var byTopic: [String: [String: String]] = [:]
        for info in snapshot.topics {
            for publisher in info.publishers { byTopic[info.topic, default: [:]][publisher.userId] = publisher.meta }
        }
        for (user, member) in members {
            for (topic, meta) in member.topics where byTopic[topic]?[user] == nil { byTopic[topic, default: [:]][user] = meta }
        }
        let topics = byTopic.keys.sorted().map { topic in
            TopicInfo(topic: topic, publishers: byTopic[topic]!.sorted { $0.key < $1.key }.map { TopicPublisher(userId: $0.key, meta: $0.value) })
        }
        return (Set(snapshot.users).union(members.keys).sorted(), topics)
    }

    /// Announces a change of a visible local member to the other nodes.
    func announce(_ op: StreamClusterEvent.Op, _ membership: StreamMembership, _ fill: (inout StreamClusterEvent) -> Void = { _ in }) {
        guard let cluster else { return }
        var event = StreamClusterEvent(op: op, instance: cluster.instance, user: membership.userId)
        fill(&event)
        cluster.announce(event, channel: membership.channel)
    }

    /// Sends the other nodes all of this node's visible members of `channel` (`sync`).
    func sync(_ channel: ChannelKey) {
        guard let cluster else { return }
        let members = channels.withLockedValue { $0[channel] } ?? [:]
        var listed: [String: [String: String]] = [:]
        for (user, member) in members where !member.quiet { listed[user] = member.topics }
        let nobody = listed.isEmpty
        cluster.announce(StreamClusterEvent(op: .sync, instance: cluster.instance, members: listed), channel: channel) { [self] result in
            // Once the others know this node has nobody there, the channel needs no more syncs.
            guard case .success = result, nobody, channels.withLockedValue({ $0[channel] == nil }) else { return }
            cluster.announcedChannels.withLockedValue { _ = $0.remove(channel) }
        }
    }

    /// The database link came back: a `sync` of every channel this node announced members in
    /// or has members in (what the others missed meanwhile, leaves included).
    func syncAll() {
        guard let cluster else { return }
        let local = channels.withLockedValue { Set($0.keys) }
        for channel in cluster.announcedChannels.withLockedValue({ $0 }).union(local) { sync(channel) }
    }

    /// A membership event of another node (own events come back too and are skipped).
    func applyRemote(_ event: StreamClusterEvent, channel: ChannelKey, node: String) {
        guard let cluster, event.instance != cluster.instance else { return }
        var answer = false
        let changes = remote.withLockedValue { remote -> [RemoteChange] in
            var members = remote[channel] ?? [:]
            defer { remote[channel] = members.isEmpty ? nil : members }
            if event.op == .join { answer = !members.values.contains { $0.instance == event.instance } }
            return Self.apply(event, to: &members, node: node)
        }
        for change in changes { tellLocal(channel, change) }
        if answer, channels.withLockedValue({ $0[channel]?.values.contains { !$0.quiet } ?? false }) { sync(channel) }
    }

    /// Applies `event` of `node` to the mirror of a channel's remote members; returns what
    /// changed for the local members.
    static func apply(_ event: StreamClusterEvent, to members: inout [String: RemoteStreamMember], node: String) -> [RemoteChange] {
        if event.op == .sync { return sync(event, into: &members, node: node) }
        guard let user = event.user else { return [] }
        var change = RemoteChange(user: user)
        let known = members[user]
        switch event.op {
        case .join:
            members[user] = RemoteStreamMember(node: node, instance: event.instance, topics: known?.topics ?? [:])
            guard known == nil else { return [] }   // moved between nodes: nothing changed for others
            change.presence = .remoteJoin
        case .leave:
            // A leave of an earlier place (the user moved to another node since) is stale.
            guard let known, known.instance == event.instance else { return [] }
            members[user] = nil
            change.presence = event.reason.flatMap(PresenceEventKind.init(rawValue:)) ?? .remoteLeave
            if !known.topics.isEmpty { change.topics.append((.remoteLeaveTopic, known.topics)) }
        case .joinTopic:
            guard let topic = event.topic else { return [] }
            var member = known ?? RemoteStreamMember(node: node, instance: event.instance, topics: [:])
            member.topics[topic] = event.meta ?? ""
            members[user] = member
            change.topics.append((.remoteJoinTopic, [topic: event.meta ?? ""]))
        case .leaveTopic:
            guard let topic = event.topic, var member = known, let meta = member.topics.removeValue(forKey: topic) else { return [] }
            members[user] = member
            change.topics.append((.remoteLeaveTopic, [topic: meta]))
        case .sync, .start:
            return []
        }
        return [change]
    }

    /// A `sync`: the node's members that are no longer listed leave, the listed ones are (or
    /// become) members with exactly the listed topics.
    private static func sync(_ event: StreamClusterEvent, into members: inout [String: RemoteStreamMember], node: String) -> [RemoteChange] {
        let listed = event.members ?? [:]
        var changes: [RemoteChange] = []
        for (user, member) in members where member.instance == event.instance && listed[user] == nil {
            members[user] = nil
            changes.append(RemoteChange(user: user, presence: .remoteLeave,
                                        topics: member.topics.isEmpty ? [] : [(.remoteLeaveTopic, member.topics)]))
        }
        for (user, topics) in listed.sorted(by: { $0.key < $1.key }) {
            let before = members[user]?.topics
            members[user] = RemoteStreamMember(node: node, instance: event.instance, topics: topics)
            var change = RemoteChange(user: user, presence: before == nil ? .remoteJoin : nil)
            let left = (before ?? [:]).filter { topics[$0.key] == nil }
            let joined = topics.filter { before?[$0.key] != $0.value }
            if !joined.isEmpty { change.topics.append((.remoteJoinTopic, joined)) }
            if !left.isEmpty { change.topics.append((.remoteLeaveTopic, left)) }
            if change.presence != nil || !change.topics.isEmpty { changes.append(change) }
        }
        return changes
    }

    /// A node's lease passed: its members leave (`remoteTimeout`).
    func remoteNodeDied(_ node: String) {
        dropRemote { $0.node == node }
    }

    /// A node announced a new run: the members of its earlier runs are gone (`remoteTimeout`).
    func remoteNodeStarted(_ node: String, instance: String) {
        guard let cluster, instance != cluster.instance else { return }
        dropRemote { $0.node == node && $0.instance != instance }
    }

    private func dropRemote(where gone: (RemoteStreamMember) -> Bool) {
        let dropped = remote.withLockedValue { remote in
            var out: [(channel: ChannelKey, user: String, member: RemoteStreamMember)] = []
            for (channel, members) in remote {
                for (user, member) in members where gone(member) { out.append((channel, user, member)) }
            }
            for entry in out {
                remote[entry.channel]?[entry.user] = nil
                if remote[entry.channel]?.isEmpty == true { remote[entry.channel] = nil }
            }
            return out
        }
        for entry in dropped {
            tellLocal(entry.channel, RemoteChange(user: entry.user, presence: .remoteTimeout,
                                                  topics: entry.member.topics.isEmpty ? [] : [(.remoteLeaveTopic, entry.member.topics)]))
        }
    }

    /// Writes a remote member's presence event (to local members that joined withPresence) and
    /// topic events (to every local member), encoded once each; a join's presence first, a
    /// leave's topics first, as for a local member.
    private func tellLocal(_ channel: ChannelKey, _ change: RemoteChange) {
        guard change.presence != nil || !change.topics.isEmpty else { return }
        let members = channels.withLockedValue { $0[channel] } ?? [:]
        // The same user is (also) here: this node tells its members about its own connection.
        guard !members.isEmpty, members[change.user] == nil else { return }
        let now = Hub.wallMillis
        let membership = StreamMembership(channel: channel, userId: change.user)
        func write(_ frame: Frame, presenceOnly: Bool) {
            let buffer = FrameCodec.encode(frame)
            for member in members.values where !presenceOnly || member.withPresence { Hub.sendEncoded(buffer, on: member.connection.channel) }
        }
        let presence = change.presence.map {
            Frame(type: .presence, userId: change.user, channel: channel.name, channelType: "stream", event: $0.rawValue, ts: now)
        }
        if change.presence == .remoteJoin, let presence { write(presence, presenceOnly: true) }
        for (kind, topics) in change.topics { write(Self.topicEvent(kind, membership, topics: topics, ts: now), presenceOnly: false) }
        if change.presence != .remoteJoin, let presence { write(presence, presenceOnly: true) }
    }
}
