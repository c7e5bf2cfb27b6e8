import Foundation
import NIOCore
import RTMProtocol

/// A STREAM connection (SPEC K-3, H-3; AGORA_REFERENCE §2.9): opened by `join` instead of
/// `login`, one stream channel per connection, topics on it.
extension ConnectionHandler {
    /// The first frame of a STREAM connection, once the gate passed it: its tokens verified,
    /// its access decided (a join without a capability token takes its user's MESSAGE
    /// session's grants), the authorization hook's answer given where the namespace asks it.
    func joinStream(_ frame: Frame, _ pass: GatePass, context: ChannelHandlerContext) {
        let config = hub.configuration
        guard let appId = frame.appId, let userId = frame.userId, let channel = frame.channel,
              let credentials = pass.credentials, let access = pass.access else { return }
        let expiresAt = Self.earlier(credentials.tokenExpiry, access.capabilityExpiry)
        let user = UserKey(appId: appId, userId: userId)
        // K-3: a stream channel needs the user's MESSAGE connection (login) first.
        guard hub.connection(of: user) != nil else {
            send(.error(id: frame.id, .notLogin, "join needs '\(userId)' logged in (a MESSAGE connection) first"), context: context)
            return
        }
        let membership = StreamMembership(channel: ChannelKey(appId: appId, name: channel), userId: userId)
        let open = hub.streams.connections(of: user).filter { $0 != connection }
        guard open.count < config.limits.maxStreamChannelsPerClient || hub.streams.isMember(membership) else {
            send(.error(id: frame.id, .channelInstanceExceedLimitation,
                        "'\(userId)' has joined \(config.limits.maxStreamChannelsPerClient) stream channels, the limit"), context: context)
            return
        }
        let features = ChannelFeatures(frame)
        let snapshot = hub.streams.join(membership, connection: connection, quiet: frame.beQuiet ?? false,
                                        withPresence: frame.withPresence ?? true, services: features)
        // H-3: the client pings every 0.5 s; silence for streamIdleTimeout drops the connection.
        let timeout = config.streamIdleTimeout
        lifecycle.joined(membership, access: access, readTimeout: timeout)   // its close leaves and uncounts
        hub.countConnection(.stream, opened: true)
        scheduleTokenExpiry(expiresAt)
        send(Frame(type: .ok, id: frame.id, userId: userId, channel: channel, channelType: "stream",
                   event: PresenceEventKind.snapshot.rawValue, users: snapshot.users, ts: Hub.wallMillis,
                   serverTimeout: Double(timeout.nanoseconds) / 1e9).with {
            $0.topics = snapshot.topics
            $0.expiresAt = expiresAt
        }, context: context)
        // withMetadata / withLock (§2.9): the snapshots a message-channel subscriber gets.
        sendServiceSnapshots(channel: channel, features: features, key: user, context: context)
    }

    /// A request on a joined STREAM connection.
    func handleStream(_ frame: Frame, membership: StreamMembership, context: ChannelHandlerContext) {
        let limits = hub.configuration.limits
        func topic() -> String? {
            guard let topic = frame.topic, limits.topicProblem(topic) == nil else {
                send(.error(id: frame.id, .channelInvalidTopicName, limits.topicProblem(frame.topic ?? "") ?? "invalid topic"), context: context)
                return nil
            }
            return topic
        }
        func reply(_ failure: RequestRefusal?) {
            if let failure {
                send(.error(id: frame.id, failure.code, failure.reason), context: context)
            } else {
                send(Frame(type: .ok, id: frame.id, channel: membership.channel.name).with { $0.topic = frame.topic }, context: context)
            }
        }
        switch frame.type {
        case .leave:
            hub.streams.leave(membership, connection: connection, reason: .remoteLeave)
            send(Frame(type: .ok, id: frame.id, channel: membership.channel.name), context: context)
            closeConnection(context: context, code: .normalClosure)
        case .joinTopic:
            guard let topic = topic() else { return }
            let meta = frame.meta ?? ""
            guard meta.utf8.count <= limits.maxTopicMetaBytes else {
                send(.error(id: frame.id, .channelInvalidTopicMeta, "meta is \(meta.utf8.count) bytes; the limit is \(limits.maxTopicMetaBytes)"), context: context)
                return
            }
            reply(hub.streams.joinTopic(membership, topic: topic, meta: meta))
        case .leaveTopic:
            guard let topic = topic() else { return }
            reply(hub.streams.leaveTopic(membership, topic: topic))
        case .subscribeTopic:
            guard let topic = topic() else { return }
            if let users = frame.users, users.count > limits.maxTopicUsers {
                send(.error(id: frame.id, .channelExceedTopicUserLimitation, "\(users.count) users; a topic subscription takes at most \(limits.maxTopicUsers)"), context: context)
                return
            }
            switch hub.streams.subscribeTopic(membership, topic: topic, users: frame.users) {
            case .failure(let failure): reply(failure)
            case .success(let result):
                send(Frame(type: .ok, id: frame.id, channel: membership.channel.name, users: result.succeeded).with {
                    $0.topic = topic
                    $0.failed = result.failed
                }, context: context)
            }
        case .unsubscribeTopic:
            guard let topic = topic() else { return }
            reply(hub.streams.unsubscribeTopic(membership, topic: topic, users: frame.users))
        case .publishTopic:
            guard let topic = topic() else { return }
            if (frame.text == nil) == (frame.data == nil) {
                send(.error(id: frame.id, .channelInvalidMessage, "a message needs exactly one of text or data"), context: context)
                return
            }
            if let (code, problem) = limits.payloadProblem(size: frame.payloadSize, customType: frame.customType,
                                                           maxBytes: limits.maxTopicPayloadBytes, what: "topic message") {
                send(.error(id: frame.id, code, problem), context: context)
                return
            }
            switch hub.streams.recipients(of: membership, topic: topic) {
            case .failure(let failure): reply(failure)
            case .success(let recipients):
                fanout.stats.streamMessagesIn &+= 1
                // Delivered now (one node), or answered once committed (a cluster): `TopicPublishPath`.
                let nio = connection.channel, hub = self.hub, id = frame.id, name = membership.channel.name
                let outcome = hub.topicPublishing.publish(frame, publisher: membership, topic: topic, recipients: recipients) { refusal in
                    if let refusal {
                        hub.reply(.error(id: id, refusal.code, refusal.reason), to: .publishTopic, on: nio)
                    } else {
                        Hub.send(Frame(type: .ok, id: id, channel: name).with { $0.topic = topic }, on: nio)
                    }
                }
                if case .delivered(let count, let bytes) = outcome {
                    fanout.stats.streamMessagesOut &+= count
                    fanout.stats.bytesOut &+= bytes
                    reply(nil)
                }
            }
        default:
            preconditionFailure("'\(frame.type)' is not a stream-connection request")
        }
    }

    /// A STREAM connection's own renewal: a new capability token's grants (never one issued
    /// before the current one: the gate refuses it) are adopted after the reply, and end the
    /// connection (close 1008) when they no longer grant its channel.
    func renewStreamToken(_ frame: Frame, _ pass: GatePass, membership: StreamMembership, context: ChannelHandlerContext) {
        guard let credentials = pass.credentials else { return }
        let renewed = credentials.capabilities.map { _ in makeAccess(userId: membership.userId, credentials: credentials) }
        if let renewed, let refusal = renewed.refusal(toKeep: .stream(channel: membership.channel.name, features: [])) {
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
            closeConnection(context: context, code: .policyViolation)
            return
        }
        let expiresAt = Self.earlier(credentials.tokenExpiry, (renewed ?? access)?.capabilityExpiry)
        scheduleTokenExpiry(expiresAt)
        send(Frame(type: .ok, id: frame.id, ts: Hub.wallMillis).with { $0.expiresAt = expiresAt }, context: context)
        if let renewed { adopt(renewed) }
    }
}
