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

/// Cluster mode (issue 13): stream channel membership across nodes. Each node announces its
/// visible members' joins, leaves and topic changes (`StreamClusterEvent`, through the
/// backplane's log, `Hub+ClusterStream`) and mirrors the other nodes' (`remote`): a join's
/// snapshot lists the members and topic publishers of every node, and local members get the
/// presence and topic events of remote ones as of local ones.
///
/// A node new to a channel (started after the others' members joined) learns them when it
/// announces its own first member there: every node that sees a run it has not seen in the
/// channel answers with its members (`present`), which reach the newcomer's members as
/// `remoteJoin` (and `remoteJoinTopic`) events just after their snapshot. A dead node's members
/// leave with its lease (`remoteTimeout`); a restarted node's earlier members leave when it
/// announces its start.
extension StreamHub {
    /// `snapshot` (this node's members) with the other nodes' visible members and publishers.
    func withRemote(_ snapshot: (users: [String], topics: [TopicInfo]), channel: ChannelKey) -> (users: [String], topics: [TopicInfo]) {
        guard cluster != nil, let members = remote.withLockedValue({ $0[channel] }), !members.isEmpty else { return snapshot }
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
        cluster.announce(event, for: membership)
    }

    /// A membership event of another node (own events come back too and are skipped).
    func applyRemote(_ event: StreamClusterEvent, channel: ChannelKey, node: String) {
        guard let cluster, event.instance != cluster.instance, let user = event.user else { return }
        var presence: PresenceEventKind?
        var topicEvents: [(TopicEventKind, [String: String])] = []
        var answer = false
        remote.withLockedValue { remote in
            var members = remote[channel] ?? [:]
            defer { remote[channel] = members.isEmpty ? nil : members }
            let known = members[user]
            switch event.op {
            case .join, .present:
                if event.op == .join { answer = !members.values.contains { $0.instance == event.instance } }
                guard known == nil || event.op == .join else { return }
                let topics = event.topics ?? [:]
                members[user] = RemoteStreamMember(node: node, instance: event.instance, topics: topics)
                guard known == nil else { return }   // moved between nodes: nothing changed for others
                presence = .remoteJoin
                if !topics.isEmpty { topicEvents.append((.remoteJoinTopic, topics)) }
            case .leave:
                // A leave of an earlier place (the user moved to another node since) is stale.
                guard let known, known.instance == event.instance else { return }
                members[user] = nil
                presence = event.reason.flatMap(PresenceEventKind.init(rawValue:)) ?? .remoteLeave
                if !known.topics.isEmpty { topicEvents.append((.remoteLeaveTopic, known.topics)) }
            case .joinTopic:
                guard let topic = event.topic else { return }
                var member = known ?? RemoteStreamMember(node: node, instance: event.instance, topics: [:])
                member.topics[topic] = event.meta ?? ""
                members[user] = member
                topicEvents.append((.remoteJoinTopic, [topic: event.meta ?? ""]))
            case .leaveTopic:
                guard let topic = event.topic, var member = known, let meta = member.topics.removeValue(forKey: topic) else { return }
                members[user] = member
                topicEvents.append((.remoteLeaveTopic, [topic: meta]))
            case .start:
                return
            }
        }
        tellLocal(channel, about: user, presence: presence, topics: topicEvents)
        if answer { answerNewcomer(channel) }
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
            tellLocal(entry.channel, about: entry.user, presence: .remoteTimeout,
                      topics: entry.member.topics.isEmpty ? [] : [(.remoteLeaveTopic, entry.member.topics)])
        }
    }

    /// Writes a remote member's presence event (to local members that joined withPresence) and
    /// topic events (to every local member), encoded once each; a join's presence first, a
    /// leave's topics first, as for a local member.
    private func tellLocal(_ channel: ChannelKey, about user: String, presence: PresenceEventKind?, topics: [(TopicEventKind, [String: String])]) {
        guard presence != nil || !topics.isEmpty else { return }
        let members = channels.withLockedValue { $0[channel] } ?? [:]
        // The same user is (also) here: this node tells its members about its own connection.
        guard !members.isEmpty, members[user] == nil else { return }
        let now = Hub.wallMillis
        let membership = StreamMembership(channel: channel, userId: user)
        func write(_ frame: Frame, presenceOnly: Bool) {
            let buffer = FrameCodec.encode(frame)
            for member in members.values where !presenceOnly || member.withPresence { Hub.sendEncoded(buffer, on: member.connection.channel) }
        }
        let presenceFrame = presence.map {
            Frame(type: .presence, userId: user, channel: channel.name, channelType: "stream", event: $0.rawValue, ts: now)
        }
        if presence == .remoteJoin, let presenceFrame { write(presenceFrame, presenceOnly: true) }
        for (kind, changed) in topics { write(Self.topicEvent(kind, membership, topics: changed, ts: now), presenceOnly: false) }
        if presence != .remoteJoin, let presenceFrame { write(presenceFrame, presenceOnly: true) }
    }

    /// A run this node had not seen in `channel` announced a member: this node's visible
    /// members there answer, so a node started after they joined learns them.
    private func answerNewcomer(_ channel: ChannelKey) {
        guard let cluster else { return }
        let members = channels.withLockedValue { $0[channel] } ?? [:]
        for (user, member) in members where !member.quiet {
            cluster.announce(StreamClusterEvent(op: .present, instance: cluster.instance, user: user, topics: member.topics),
                             for: StreamMembership(channel: channel, userId: user))
        }
    }
}
