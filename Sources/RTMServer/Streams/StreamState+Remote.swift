import RTMProtocol

/// A visible member of a stream channel on another node, as its membership events told.
struct RemoteStreamMember: Sendable, Equatable {
    /// Its node (`rtm serve --node-id`) and that node's server run.
    let node: String
    let instance: String
    /// Joined topics → meta.
    var topics: [String: String]
}

/// Stream channel membership across nodes. Each node announces its visible members' joins,
/// leaves and topic changes (`StreamClusterEvent`, `StreamAction.announce`) and mirrors the other
/// nodes' (`remote`): a join's snapshot lists the members and topic publishers of every node,
/// and local members get the presence and topic events of remote ones as of local ones. A
/// single node's link delivers no event of another node: its mirror stays empty, and these
/// events never run.
///
/// A node new to a channel (started after the others' members joined) learns them when it
/// announces its own first member there: every node that sees a run it has not seen in the
/// channel answers with a `sync` of its members, which reach the newcomer's members as
/// `remoteJoin` (and `remoteJoinTopic`) events just after their snapshot. A node whose database
/// link comes back sends a `sync` of every channel it announced members in, so the others
/// learn the changes they missed (leaves included). A dead node's members leave with its lease
/// (`remoteTimeout`); a restarted node's earlier members leave when it announces its start.
extension StreamState {
    /// What one remote member's change means to local members.
    struct RemoteChange: Equatable {
        let user: String
        var presence: PresenceEventKind?
        var topics: [Topics] = []

        /// A topic event of the change: its kind and the topics → meta.
        struct Topics: Equatable {
            let kind: TopicEventKind
            let topics: [String: String]
        }
    }

    /// `snapshot` (this node's members) with the other nodes' visible members and publishers.
    func withRemote(_ snapshot: Snapshot, channel: ChannelKey) -> Snapshot {
        guard let members = remote[channel], !members.isEmpty else { return snapshot }
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

    /// A membership event of another node (own events come back too and are skipped). A `join`
    /// of a run not yet seen in the channel is answered with a `sync` of this node's members.
    mutating func applyRemote(_ event: StreamClusterEvent, channel: ChannelKey, node: String, wallMillis: Int64) -> [StreamAction] {
        guard event.instance != instance else { return [] }
        var members = remote[channel] ?? [:]
        let answer = event.op == .join && !members.values.contains { $0.instance == event.instance }
        let changes = Self.apply(event, to: &members, node: node)
        remote[channel] = members.isEmpty ? nil : members
        var actions = changes.flatMap { tellLocal(channel, $0, wallMillis: wallMillis) }
        if answer, channels[channel]?.values.contains(where: { !$0.quiet }) ?? false { actions.append(sync(channel)) }
        return actions
    }

    /// All of this node's visible members of `channel`, for the other nodes (`sync`).
    func sync(_ channel: ChannelKey) -> StreamAction {
        var listed: [String: [String: String]] = [:]
        for (user, member) in channels[channel] ?? [:] where !member.quiet { listed[user] = member.topics }
        return .announce(StreamClusterEvent(op: .sync, instance: instance, members: listed), channel: channel)
    }

    /// A `sync` of every channel with members here or in `announced` (the database link came
    /// back: what the others missed meanwhile, leaves included).
    func syncAll(announced: Set<ChannelKey>) -> [StreamAction] {
        announced.union(channels.keys).map { sync($0) }
    }

    /// Whether this node has a member in `channel`.
    func hasMembers(in channel: ChannelKey) -> Bool {
        channels[channel] != nil
    }

    /// A node's lease passed: its members leave (`remoteTimeout`).
    mutating func remoteNodeDied(_ node: String, wallMillis: Int64) -> [StreamAction] {
        dropRemote(wallMillis: wallMillis) { $0.node == node }
    }

    /// A node announced a new run: the members of its earlier runs are gone (`remoteTimeout`).
    mutating func remoteNodeStarted(_ node: String, instance started: String, wallMillis: Int64) -> [StreamAction] {
        guard started != instance else { return [] }
        return dropRemote(wallMillis: wallMillis) { $0.node == node && $0.instance != started }
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
            if !known.topics.isEmpty { change.topics.append(.init(kind: .remoteLeaveTopic, topics: known.topics)) }
        case .joinTopic:
            guard let topic = event.topic else { return [] }
            var member = known ?? RemoteStreamMember(node: node, instance: event.instance, topics: [:])
            member.topics[topic] = event.meta ?? ""
            members[user] = member
            change.topics.append(.init(kind: .remoteJoinTopic, topics: [topic: event.meta ?? ""]))
        case .leaveTopic:
            guard let topic = event.topic, var member = known, let meta = member.topics.removeValue(forKey: topic) else { return [] }
            members[user] = member
            change.topics.append(.init(kind: .remoteLeaveTopic, topics: [topic: meta]))
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
                                        topics: member.topics.isEmpty ? [] : [.init(kind: .remoteLeaveTopic, topics: member.topics)]))
        }
        for (user, topics) in listed.sorted(by: { $0.key < $1.key }) {
            let before = members[user]?.topics
            members[user] = RemoteStreamMember(node: node, instance: event.instance, topics: topics)
            var change = RemoteChange(user: user, presence: before == nil ? .remoteJoin : nil)
            let left = (before ?? [:]).filter { topics[$0.key] == nil }
            let joined = topics.filter { before?[$0.key] != $0.value }
            if !joined.isEmpty { change.topics.append(.init(kind: .remoteJoinTopic, topics: joined)) }
            if !left.isEmpty { change.topics.append(.init(kind: .remoteLeaveTopic, topics: left)) }
            if change.presence != nil || !change.topics.isEmpty { changes.append(change) }
        }
        return changes
    }

    private mutating func dropRemote(wallMillis: Int64, where gone: (RemoteStreamMember) -> Bool) -> [StreamAction] {
        var actions: [StreamAction] = []
        for channel in remote.keys.sorted(by: { ($0.appId, $0.name) < ($1.appId, $1.name) }) {
            guard var members = remote[channel] else { continue }
            for (user, member) in members.sorted(by: { $0.key < $1.key }) where gone(member) {
                members[user] = nil
                let topics: [RemoteChange.Topics] = member.topics.isEmpty ? [] : [.init(kind: .remoteLeaveTopic, topics: member.topics)]
                actions += tellLocal(channel, RemoteChange(user: user, presence: .remoteTimeout, topics: topics), wallMillis: wallMillis)
            }
            remote[channel] = members.isEmpty ? nil : members
        }
        return actions
    }

    /// A remote member's presence event (to local members that joined withPresence) and topic
    /// events (to every local member); a join's presence first, a leave's topics first, as for
    /// a local member. Nothing when the same user is (also) here: this node tells its members
    /// about its own connection.
    private func tellLocal(_ channel: ChannelKey, _ change: RemoteChange, wallMillis: Int64) -> [StreamAction] {
        guard change.presence != nil || !change.topics.isEmpty,
              let members = channels[channel], members[change.user] == nil else { return [] }
        let membership = StreamMembership(channel: channel, userId: change.user)
        let everyone = members.values.map(\.connection)
        let withPresence = members.values.compactMap { $0.withPresence ? $0.connection : nil }
        var actions: [StreamAction] = []
        let presence: StreamAction? = change.presence.flatMap { kind in
            withPresence.isEmpty ? nil : .send(Self.presence(kind, membership, ts: wallMillis), to: withPresence)
        }
        if change.presence == .remoteJoin, let presence { actions.append(presence) }
        for topics in change.topics {
            actions.append(.send(Self.topicEvent(topics.kind, membership, topics: topics.topics, ts: wallMillis), to: everyone))
        }
        if change.presence != .remoteJoin, let presence { actions.append(presence) }
        return actions
    }
}
