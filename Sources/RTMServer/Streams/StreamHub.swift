import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol

/// Who a STREAM connection is: a user in one stream channel.
struct StreamMembership: Sendable, Hashable {
    let channel: ChannelKey
    let userId: String
}

/// The stream channels (AGORA_REFERENCE §2.9): members, their topics and topic subscriptions,
/// behind one lock. Every member is one STREAM connection (SPEC K-3). Events and topic messages
/// are written straight to the members' connections.
final class StreamHub: Sendable {
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

    typealias Failure = RequestRefusal

    /// This node's members.
    let channels = NIOLockedValueBox<[ChannelKey: [String: Member]]>([:])
    /// Cluster mode: the other nodes' visible members, as their events told (StreamHub+Cluster).
    let remote = NIOLockedValueBox<[ChannelKey: [String: RemoteStreamMember]]>([:])
    private let limits: Limits
    /// `joinChannel` / `leaveChannel` webhook events (channel type `stream`).
    private let webhooks: WebhookDispatcher?
    /// Cluster mode: topic messages and membership changes to the other nodes.
    let cluster: StreamClusterLink?

    init(limits: Limits, webhooks: WebhookDispatcher? = nil, cluster: StreamClusterLink? = nil) {
        self.limits = limits
        self.webhooks = webhooks
        self.cluster = cluster
    }

    /// Joins `connection` as `user`. A second connection of the same user (a rejoin before the
    /// server noticed the old one was gone) replaces the first, which is closed. `services`:
    /// the channel's storage and lock events wanted (`withMetadata`, `withLock`). Returns the
    /// visible members and the topics, for the snapshots.
    func join(_ membership: StreamMembership, connection: ConnectionRef, quiet: Bool, withPresence: Bool,
              services: ChannelFeatures = []) -> (users: [String], topics: [TopicInfo]) {
        let (replaced, others, snapshot) = channels.withLockedValue { all in
            var members = all[membership.channel] ?? [:]
            let old = members[membership.userId]
            var member = Member(connection: connection, quiet: quiet, withPresence: withPresence,
                                services: services.intersection([.metadata, .lock]))
            if let old { member.topics = old.topics; member.subscriptions = old.subscriptions }
            members[membership.userId] = member
            all[membership.channel] = members
            if old == nil { webhooks?.streamChanged(.joinChannel, membership, reason: nil) }
            let users = members.filter { !$0.value.quiet }.keys.sorted()
            return (old?.connection, old == nil && !quiet ? Self.others(members, except: membership.userId, presenceOnly: true) : [],
                    (users, Self.topicInfos(members)))
        }
        if let replaced, replaced != connection { Hub.closeReplaced(replaced, reason: "replaced by a new join of the same user") }
        let event = Frame(type: .presence, userId: membership.userId, channel: membership.channel.name, channelType: "stream",
                          event: PresenceEventKind.remoteJoin.rawValue, ts: Hub.wallMillis)
        for other in others { Hub.send(event, on: other.channel) }
        if replaced == nil, !quiet { announce(.join, membership) }
        return withRemote(snapshot, channel: membership.channel)
    }

    /// The connection left (or was lost): the member goes, others are told.
    func leave(_ membership: StreamMembership, connection: ConnectionRef, reason: PresenceEventKind) {
        let (left, others, wantPresence) = channels.withLockedValue { all -> (Member?, [ConnectionRef], [ConnectionRef]) in
            guard var members = all[membership.channel], let member = members[membership.userId],
                  member.connection == connection else { return (nil, [], []) }
            members[membership.userId] = nil
            all[membership.channel] = members.isEmpty ? nil : members
            webhooks?.streamChanged(.leaveChannel, membership, reason: "leave")
            return (member, Self.others(members, except: membership.userId, presenceOnly: false),
                    Self.others(members, except: membership.userId, presenceOnly: true))
        }
        guard let left, !left.quiet else { return }
        announce(.leave, membership) { $0.reason = reason.rawValue }
        let now = Hub.wallMillis
        if !left.topics.isEmpty {
            let event = Self.topicEvent(.remoteLeaveTopic, membership, topics: left.topics, ts: now)
            for other in others { Hub.send(event, on: other.channel) }
        }
        let presence = Frame(type: .presence, userId: membership.userId, channel: membership.channel.name, channelType: "stream",
                             event: reason.rawValue, ts: now)
        for other in wantPresence { Hub.send(presence, on: other.channel) }
    }

    /// Becomes a publisher of `topic`.
    func joinTopic(_ membership: StreamMembership, topic: String, meta: String) -> Failure? {
        var changedTopic: (changed: Bool, quiet: Bool)?
        let result = channels.withLockedValue { all -> Result<[ConnectionRef], Failure> in
            guard var member = all[membership.channel]?[membership.userId] else {
                return .failure(Failure(code: .channelNotJoined, reason: "not joined"))
            }
            if member.topics[topic] == nil, member.topics.count >= limits.maxJoinedTopics {
                return .failure(Failure(code: .channelExceedTopicLimitation, reason: "already joined \(limits.maxJoinedTopics) topics, the limit"))
            }
            let changed = member.topics[topic] != meta
            changedTopic = (changed, member.quiet)
            member.topics[topic] = meta
            all[membership.channel]?[membership.userId] = member
            return .success(changed && !member.quiet ? Self.others(all[membership.channel] ?? [:], except: membership.userId, presenceOnly: false) : [])
        }
        switch result {
        case .failure(let failure): return failure
        case .success(let others):
            let event = Self.topicEvent(.remoteJoinTopic, membership, topics: [topic: meta], ts: Hub.wallMillis)
            for other in others { Hub.send(event, on: other.channel) }
            if let (changed, quiet) = changedTopic, changed, !quiet { announce(.joinTopic, membership) { $0.topic = topic; $0.meta = meta } }
            return nil
        }
    }

    /// Stops publishing to `topic`.
    /// The channel's storage and lock events `membership` receives.
    func services(of membership: StreamMembership) -> ChannelFeatures {
        channels.withLockedValue { $0[membership.channel]?[membership.userId]?.services ?? [] }
    }

    /// Narrows the storage and lock events `membership` receives (its grants changed).
    func setServices(of membership: StreamMembership, _ services: ChannelFeatures) {
        channels.withLockedValue { $0[membership.channel]?[membership.userId]?.services = services }
    }

    /// The topics `membership` publishes to.
    func joinedTopics(of membership: StreamMembership) -> [String] {
        channels.withLockedValue { $0[membership.channel]?[membership.userId]?.topics.keys.map { $0 } ?? [] }
    }

    func leaveTopic(_ membership: StreamMembership, topic: String) -> Failure? {
        var announced = false
        let result = channels.withLockedValue { all -> Result<(String, [ConnectionRef]), Failure> in
            guard var member = all[membership.channel]?[membership.userId] else {
                return .failure(Failure(code: .channelNotJoined, reason: "not joined"))
            }
            guard let meta = member.topics.removeValue(forKey: topic) else {
                return .failure(Failure(code: .channelTopicNotJoined, reason: "topic '\(topic)' is not joined"))
            }
            all[membership.channel]?[membership.userId] = member
            if !member.quiet { announced = true }
            return .success((meta, member.quiet ? [] : Self.others(all[membership.channel] ?? [:], except: membership.userId, presenceOnly: false)))
        }
        switch result {
        case .failure(let failure): return failure
        case .success(let (meta, others)):
            if announced { announce(.leaveTopic, membership) { $0.topic = topic } }
            let event = Self.topicEvent(.remoteLeaveTopic, membership, topics: [topic: meta], ts: Hub.wallMillis)
            for other in others { Hub.send(event, on: other.channel) }
            return nil
        }
    }

    /// Subscribes to `topic` from `users` (nil: from every publisher). Returns the users
    /// subscribed and those refused (invalid names).
    func subscribeTopic(_ membership: StreamMembership, topic: String, users: [String]?) -> Result<(succeeded: [String], failed: [String]), Failure> {
        var succeeded: [String] = []
        var failed: [String] = []
        for user in users ?? [] {
            if limits.nameProblem(user, kind: "userId") == nil { succeeded.append(user) } else { failed.append(user) }
        }
        return channels.withLockedValue { all in
            guard var member = all[membership.channel]?[membership.userId] else {
                return .failure(Failure(code: .channelNotJoined, reason: "not joined"))
            }
            let current = member.subscriptions[topic]
            if current == nil, member.subscriptions.count >= limits.maxSubscribedTopics {
                return .failure(Failure(code: .channelExceedTopicLimitation, reason: "already subscribed to \(limits.maxSubscribedTopics) topics, the limit"))
            }
            if users == nil {
                member.subscriptions[topic] = .some(nil)
            } else {
                var set: Set<String> = (current ?? nil) ?? []
                set.formUnion(succeeded)
                guard set.count <= limits.maxTopicUsers else {
                    return .failure(Failure(code: .channelExceedTopicUserLimitation, reason: "a topic subscription takes at most \(limits.maxTopicUsers) users"))
                }
                member.subscriptions[topic] = .some(set)
            }
            all[membership.channel]?[membership.userId] = member
            return .success((succeeded, failed))
        }
    }

    /// Unsubscribes `topic` (from `users`, or entirely).
    func unsubscribeTopic(_ membership: StreamMembership, topic: String, users: [String]?) -> Failure? {
        channels.withLockedValue { all in
            guard var member = all[membership.channel]?[membership.userId] else {
                return Failure(code: .channelNotJoined, reason: "not joined")
            }
            guard let current = member.subscriptions[topic] else {
                return Failure(code: .channelTopicNotSubscribed, reason: "topic '\(topic)' is not subscribed")
            }
            if let users, var set = current {
                set.subtract(users)
                member.subscriptions[topic] = set.isEmpty ? nil : .some(set)
            } else {
                member.subscriptions[topic] = nil
            }
            all[membership.channel]?[membership.userId] = member
            return nil
        }
    }

    /// Who receives a message that `membership` publishes to `topic`; fails if the topic is not
    /// joined.
    func recipients(of membership: StreamMembership, topic: String) -> Result<[ConnectionRef], Failure> {
        channels.withLockedValue { all in
            guard let members = all[membership.channel], let me = members[membership.userId] else {
                return .failure(Failure(code: .channelNotJoined, reason: "not joined"))
            }
            guard me.topics[topic] != nil else {
                return .failure(Failure(code: .channelTopicNotJoined, reason: "topic '\(topic)' is not joined: joinTopic first"))
            }
            return .success(Self.subscribers(members, topic: topic, publisher: membership.userId))
        }
    }

    /// This node's members subscribed to `publisher`'s messages in `topic` (cluster mode: a
    /// topic message committed by any node, AGORA_REFERENCE §2.9). The publisher need not be
    /// a member here.
    func subscribers(of channel: ChannelKey, topic: String, publisher: String) -> [ConnectionRef] {
        channels.withLockedValue { all in
            guard let members = all[channel] else { return [] }
            return Self.subscribers(members, topic: topic, publisher: publisher)
        }
    }

    /// A storage or lock event of `channel`, encoded (the channel's metadata and locks are
    /// shared by its message-channel subscribers and its stream-channel members): written to
    /// the members that joined `withMetadata` (storage) or `withLock` (locks).
    func relayServiceEvent(_ buffer: ByteBuffer, of type: FrameType, channel: ChannelKey) {
        let wanted: ChannelFeatures = type == .lock ? .lock : .metadata
        let targets = channels.withLockedValue { all in
            all[channel]?.values.compactMap { $0.services.contains(wanted) ? $0.connection : nil } ?? []
        }
        for target in targets { Hub.sendEncoded(buffer, on: target.channel) }
    }

    /// Whether the user is in the stream channel (a rejoin replaces its connection).
    func isMember(_ membership: StreamMembership) -> Bool {
        channels.withLockedValue { $0[membership.channel]?[membership.userId] != nil }
    }

    /// Every STREAM connection of a user.
    func connections(of user: UserKey) -> [ConnectionRef] {
        channels.withLockedValue { all in
            all.compactMap { $0.key.appId == user.appId ? $0.value[user.userId]?.connection : nil }
        }
    }

    /// The publishers of each topic.
    static func topicInfos(_ members: [String: Member]) -> [TopicInfo] {
        var byTopic: [String: [TopicPublisher]] = [:]
        for (user, member) in members where !member.quiet {
            for (topic, meta) in member.topics { byTopic[topic, default: []].append(TopicPublisher(userId: user, meta: meta)) }
        }
        return byTopic.keys.sorted().map { TopicInfo(topic: $0, publishers: byTopic[$0]!.sorted { $0.userId < $1.userId }) }
    }

    /// Members other than `publisher` whose subscription to `topic` takes `publisher`.
    private static func subscribers(_ members: [String: Member], topic: String, publisher: String) -> [ConnectionRef] {
        var out: [ConnectionRef] = []
        for (user, member) in members where user != publisher {
            if case .some(let wanted) = member.subscriptions[topic], wanted?.contains(publisher) ?? true {
                out.append(member.connection)
            }
        }
        return out
    }

    private static func others(_ members: [String: Member], except user: String, presenceOnly: Bool) -> [ConnectionRef] {
        members.compactMap { $0.key != user && (!presenceOnly || $0.value.withPresence) ? $0.value.connection : nil }
    }

    static func topicEvent(_ kind: TopicEventKind, _ membership: StreamMembership, topics: [String: String], ts: Int64) -> Frame {
        var frame = Frame(type: .topicEvent, userId: membership.userId, channel: membership.channel.name, channelType: "stream",
                          event: kind.rawValue, ts: ts)
        frame.topics = topics.keys.sorted().map { TopicInfo(topic: $0, publishers: [TopicPublisher(userId: membership.userId, meta: topics[$0] ?? "")]) }
        return frame
    }
}
