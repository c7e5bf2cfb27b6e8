import RTMProtocol

/// Who a STREAM connection is: a user in one stream channel.
struct StreamMembership: Sendable, Hashable {
    let channel: ChannelKey
    let userId: String
}

/// The stream channels (AGORA_REFERENCE §2.9) as a plain value: this node's members, their
/// topics and topic subscriptions, and the other nodes' visible members as their events told
/// (`StreamState+Remote`; none on a single node). Every member is one STREAM connection (SPEC
/// K-3). Each event is a `mutating func` that takes the time and returns what to do
/// (`[StreamAction]`); the owner (`StreamHub`) performs it after releasing its lock. Nothing
/// here writes, closes, posts or publishes.
struct StreamState {
    /// A member on this node.
    struct Member {
        var connection: ConnectionRef
        let quiet: Bool
        let withPresence: Bool
        /// The channel's storage and lock events it asked for (`withMetadata`, `withLock`).
        var services: ChannelFeatures
        /// Joined topics (as publisher) → meta.
        var topics: [String: String] = [:]
        /// Subscribed topics → the publishers wanted (nil: every publisher).
        var subscriptions: [String: Set<String>?] = [:]
    }

    /// What a joining member is shown: the visible members and each topic's publishers.
    typealias Snapshot = (users: [String], topics: [TopicInfo])

    /// This node's members, by channel and user.
    private(set) var channels: [ChannelKey: [String: Member]] = [:]
    /// The other nodes' visible members, by channel and user.
    var remote: [ChannelKey: [String: RemoteStreamMember]] = [:]
    /// `joinChannel` / `leaveChannel` webhook events (channel type `stream`), in the order they
    /// happened: added here, inside the transaction that made them, and taken in order by the
    /// dispatcher's queue, so that one user's events keep their order without anything posted
    /// under the lock.
    var webhooks = WebhookOutbox()
    let limits: Limits
    /// This server run (`Hub.epoch`), carried by every membership event for the other nodes.
    let instance: String

    init(limits: Limits, instance: String, webhooks: Bool) {
        self.limits = limits
        self.instance = instance
        self.webhooks.isEnabled = webhooks
    }

    /// Joins `connection` as the member. A second connection of the same user (a rejoin before
    /// the server noticed the old one was gone) replaces the first, which is closed, and keeps
    /// its topics and subscriptions. `services`: the channel's storage and lock events wanted.
    /// Returns the snapshot (this node's members and the other nodes').
    mutating func join(_ membership: StreamMembership, connection: ConnectionRef, quiet: Bool, withPresence: Bool,
                       services: ChannelFeatures, wallMillis: Int64) -> (snapshot: Snapshot, actions: [StreamAction]) {
        var members = channels[membership.channel] ?? [:]
        let old = members[membership.userId]
        var member = Member(connection: connection, quiet: quiet, withPresence: withPresence,
                            services: services.intersection([.metadata, .lock]))
        if let old { member.topics = old.topics; member.subscriptions = old.subscriptions }
        members[membership.userId] = member
        channels[membership.channel] = members
        var actions: [StreamAction] = []
        if let old, old.connection != connection {
            actions.append(.closeReplaced(old.connection, reason: "replaced by a new join of the same user"))
        }
        if old == nil {
            webhooks.streamChanged(.joinChannel, membership, reason: nil, ts: wallMillis)
            actions.append(.wakeWebhooks)
            if !quiet {
                let others = Self.others(members, except: membership.userId, presenceOnly: true)
                if !others.isEmpty { actions.append(.send(Self.presence(.remoteJoin, membership, ts: wallMillis), to: others)) }
                actions.append(.announce(StreamClusterEvent(op: .join, instance: instance, user: membership.userId), channel: membership.channel))
            }
        }
        let users = members.filter { !$0.value.quiet }.keys.sorted()
        return (withRemote((users, Self.topicInfos(members)), channel: membership.channel), actions)
    }

    /// The connection left (or was lost): the member goes, the others are told (its topics
    /// first, then its presence). A connection that was replaced is no member any more:
    /// nothing happens.
    mutating func leave(_ membership: StreamMembership, connection: ConnectionRef, reason: PresenceEventKind,
                        wallMillis: Int64) -> [StreamAction] {
        guard var members = channels[membership.channel], let left = members[membership.userId],
              left.connection == connection else { return [] }
        members[membership.userId] = nil
        channels[membership.channel] = members.isEmpty ? nil : members
        webhooks.streamChanged(.leaveChannel, membership, reason: "leave", ts: wallMillis)
        var actions: [StreamAction] = [.wakeWebhooks]
        guard !left.quiet else { return actions }
        actions.append(.announce(StreamClusterEvent(op: .leave, instance: instance, user: membership.userId, reason: reason.rawValue),
                                 channel: membership.channel))
        let others = Self.others(members, except: membership.userId, presenceOnly: false)
        if !left.topics.isEmpty, !others.isEmpty {
            actions.append(.send(Self.topicEvent(.remoteLeaveTopic, membership, topics: left.topics, ts: wallMillis), to: others))
        }
        let wantPresence = Self.others(members, except: membership.userId, presenceOnly: true)
        if !wantPresence.isEmpty { actions.append(.send(Self.presence(reason, membership, ts: wallMillis), to: wantPresence)) }
        return actions
    }

    /// Becomes a publisher of `topic` (or changes its meta).
    mutating func joinTopic(_ membership: StreamMembership, topic: String, meta: String,
                            wallMillis: Int64) throws(RequestRefusal) -> [StreamAction] {
        var member = try self.member(membership)
        if member.topics[topic] == nil, member.topics.count >= limits.maxJoinedTopics {
            throw RequestRefusal(code: .channelExceedTopicLimitation, reason: "already joined \(limits.maxJoinedTopics) topics, the limit")
        }
        let changed = member.topics[topic] != meta
        member.topics[topic] = meta
        channels[membership.channel]?[membership.userId] = member
        guard changed, !member.quiet else { return [] }
        var actions: [StreamAction] = []
        let others = Self.others(channels[membership.channel] ?? [:], except: membership.userId, presenceOnly: false)
        if !others.isEmpty {
            actions.append(.send(Self.topicEvent(.remoteJoinTopic, membership, topics: [topic: meta], ts: wallMillis), to: others))
        }
        actions.append(.announce(StreamClusterEvent(op: .joinTopic, instance: instance, user: membership.userId, topic: topic, meta: meta),
                                 channel: membership.channel))
        return actions
    }

    /// Stops publishing to `topic`.
    mutating func leaveTopic(_ membership: StreamMembership, topic: String, wallMillis: Int64) throws(RequestRefusal) -> [StreamAction] {
        var member = try self.member(membership)
        guard let meta = member.topics.removeValue(forKey: topic) else {
            throw RequestRefusal(code: .channelTopicNotJoined, reason: "topic '\(topic)' is not joined")
        }
        channels[membership.channel]?[membership.userId] = member
        guard !member.quiet else { return [] }
        var actions: [StreamAction] = [.announce(StreamClusterEvent(op: .leaveTopic, instance: instance, user: membership.userId, topic: topic),
                                                 channel: membership.channel)]
        let others = Self.others(channels[membership.channel] ?? [:], except: membership.userId, presenceOnly: false)
        if !others.isEmpty {
            actions.append(.send(Self.topicEvent(.remoteLeaveTopic, membership, topics: [topic: meta], ts: wallMillis), to: others))
        }
        return actions
    }

    /// Subscribes to `topic` from `users` (nil: from every publisher). Returns the users
    /// subscribed and those refused (invalid names).
    mutating func subscribeTopic(_ membership: StreamMembership, topic: String,
                                 users: [String]?) throws(RequestRefusal) -> (succeeded: [String], failed: [String]) {
        var member = try self.member(membership)
        var succeeded: [String] = []
        var failed: [String] = []
        for user in users ?? [] {
            if limits.nameProblem(user, kind: "userId") == nil { succeeded.append(user) } else { failed.append(user) }
        }
        let current = member.subscriptions[topic]
        if current == nil, member.subscriptions.count >= limits.maxSubscribedTopics {
            throw RequestRefusal(code: .channelExceedTopicLimitation, reason: "already subscribed to \(limits.maxSubscribedTopics) topics, the limit")
        }
        if users == nil {
            member.subscriptions[topic] = .some(nil)
        } else {
            var set: Set<String> = (current ?? nil) ?? []
            set.formUnion(succeeded)
            guard set.count <= limits.maxTopicUsers else {
                throw RequestRefusal(code: .channelExceedTopicUserLimitation, reason: "a topic subscription takes at most \(limits.maxTopicUsers) users")
            }
            member.subscriptions[topic] = .some(set)
        }
        channels[membership.channel]?[membership.userId] = member
        return (succeeded, failed)
    }

    /// Unsubscribes `topic` (from `users`, or entirely).
    mutating func unsubscribeTopic(_ membership: StreamMembership, topic: String, users: [String]?) throws(RequestRefusal) {
        var member = try self.member(membership)
        guard let current = member.subscriptions[topic] else {
            throw RequestRefusal(code: .channelTopicNotSubscribed, reason: "topic '\(topic)' is not subscribed")
        }
        if let users, var set = current {
            set.subtract(users)
            member.subscriptions[topic] = set.isEmpty ? nil : .some(set)
        } else {
            member.subscriptions[topic] = nil
        }
        channels[membership.channel]?[membership.userId] = member
    }

    /// The member's grants changed: it keeps only the `services` given, and leaves each topic
    /// `refusal` refuses (as a `leaveTopic`). Returns the topics it left (sorted) with their
    /// refusals.
    mutating func grantsChanged(_ membership: StreamMembership, services: ChannelFeatures,
                                refusal: (String) -> RequestRefusal?,
                                wallMillis: Int64) -> (left: [(topic: String, refusal: RequestRefusal)], actions: [StreamAction]) {
        guard let member = channels[membership.channel]?[membership.userId] else { return ([], []) }
        channels[membership.channel]?[membership.userId]?.services = member.services.intersection(services)
        var left: [(topic: String, refusal: RequestRefusal)] = []
        var actions: [StreamAction] = []
        for topic in member.topics.keys.sorted() {
            guard let refused = refusal(topic), let more = try? leaveTopic(membership, topic: topic, wallMillis: wallMillis) else { continue }
            left.append((topic, refused))
            actions += more
        }
        return (left, actions)
    }

    /// Who receives a message that `membership` publishes to `topic` on this node; refused if
    /// the topic is not joined.
    func recipients(of membership: StreamMembership, topic: String) throws(RequestRefusal) -> [ConnectionRef] {
        let me = try member(membership)
        guard me.topics[topic] != nil else {
            throw RequestRefusal(code: .channelTopicNotJoined, reason: "topic '\(topic)' is not joined: joinTopic first")
        }
        return subscribers(of: membership.channel, topic: topic, publisher: membership.userId)
    }

    /// This node's members other than `publisher` whose subscription to `topic` takes
    /// `publisher`'s messages. The publisher need not be a member here (a cluster: a topic
    /// message committed by any node).
    func subscribers(of channel: ChannelKey, topic: String, publisher: String) -> [ConnectionRef] {
        var out: [ConnectionRef] = []
        for (user, member) in channels[channel] ?? [:] where user != publisher {
            if case .some(let wanted) = member.subscriptions[topic], wanted?.contains(publisher) ?? true {
                out.append(member.connection)
            }
        }
        return out
    }

    /// The members of `channel` that asked for its storage (or, for `.lock`, lock) events.
    func serviceTargets(of channel: ChannelKey, wanting wanted: ChannelFeatures) -> [ConnectionRef] {
        channels[channel]?.values.compactMap { $0.services.contains(wanted) ? $0.connection : nil } ?? []
    }

    /// The storage and lock events the member receives.
    func services(of membership: StreamMembership) -> ChannelFeatures {
        channels[membership.channel]?[membership.userId]?.services ?? []
    }

    /// Whether the user is a member here (a rejoin replaces its connection).
    func isMember(_ membership: StreamMembership) -> Bool {
        channels[membership.channel]?[membership.userId] != nil
    }

    /// Every STREAM connection of a user.
    func connections(of user: UserKey) -> [ConnectionRef] {
        channels.compactMap { $0.key.appId == user.appId ? $0.value[user.userId]?.connection : nil }
    }

    private func member(_ membership: StreamMembership) throws(RequestRefusal) -> Member {
        guard let member = channels[membership.channel]?[membership.userId] else {
            throw RequestRefusal(code: .channelNotJoined, reason: "not joined")
        }
        return member
    }

    /// The publishers of each topic (quiet members are nobody's to see).
    static func topicInfos(_ members: [String: Member]) -> [TopicInfo] {
        var byTopic: [String: [TopicPublisher]] = [:]
        for (user, member) in members where !member.quiet {
            for (topic, meta) in member.topics { byTopic[topic, default: []].append(TopicPublisher(userId: user, meta: meta)) }
        }
        return byTopic.keys.sorted().map { TopicInfo(topic: $0, publishers: byTopic[$0]!.sorted { $0.userId < $1.userId }) }
    }

    static func others(_ members: [String: Member], except user: String, presenceOnly: Bool) -> [ConnectionRef] {
        members.compactMap { $0.key != user && (!presenceOnly || $0.value.withPresence) ? $0.value.connection : nil }
    }

    static func presence(_ kind: PresenceEventKind, _ membership: StreamMembership, ts: Int64) -> Frame {
        Frame(type: .presence, userId: membership.userId, channel: membership.channel.name, channelType: "stream",
              event: kind.rawValue, ts: ts)
    }

    static func topicEvent(_ kind: TopicEventKind, _ membership: StreamMembership, topics: [String: String], ts: Int64) -> Frame {
        var frame = Frame(type: .topicEvent, userId: membership.userId, channel: membership.channel.name, channelType: "stream",
                          event: kind.rawValue, ts: ts)
        frame.topics = topics.keys.sorted().map { TopicInfo(topic: $0, publishers: [TopicPublisher(userId: membership.userId, meta: topics[$0] ?? "")]) }
        return frame
    }
}
