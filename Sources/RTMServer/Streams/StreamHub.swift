import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol

/// The owner of the stream channels (AGORA_REFERENCE §2.9): one `StreamState` behind one lock,
/// and the effects its events ask for, performed after the lock is released (`run`): presence
/// and topic events written to members, replaced connections closed, membership changes
/// announced to the other nodes through the `StreamClusterLink` (nothing to announce on a
/// single node), webhook events taken by the dispatcher.
///
/// Ordering without the lock: a user's `joinChannel` / `leaveChannel` webhook events go into
/// the state's outbox inside the transaction that made them and the dispatcher's queue takes
/// them from there in that order (`WebhookDispatcher.addSource`), so two connections of one
/// user on two event loops (a rejoin replacing a lost connection) cannot swap them. Membership
/// changes reach the link in the order `run` hands them over: events of one channel decided at
/// the same moment on two loops (a lost connection's leave, its user's rejoin on another
/// loop) may reach the other nodes in either order.
final class StreamHub: Sendable {
    private let state: NIOLockedValueBox<StreamState>
    private let webhooks: WebhookDispatcher?
    /// Membership changes to the other nodes, and which channels they were announced in.
    private let link: any StreamClusterLink

    /// `instance`: this server run (`Hub.epoch`), carried by every membership event.
    init(limits: Limits, instance: String, webhooks: WebhookDispatcher? = nil, link: any StreamClusterLink = LocalStreamLink()) {
        self.state = NIOLockedValueBox(StreamState(limits: limits, instance: instance, webhooks: webhooks != nil))
        self.webhooks = webhooks
        self.link = link
        webhooks?.addSource { [unowned self] in state.withLockedValue { $0.webhooks.take() } }
    }

    // MARK: a member's requests

    /// Joins `connection` as the member (a rejoin of the same user replaces, and closes, its
    /// earlier connection). Returns the visible members and the topics, for the snapshots.
    func join(_ membership: StreamMembership, connection: ConnectionRef, quiet: Bool, withPresence: Bool,
              services: ChannelFeatures = []) -> StreamState.Snapshot {
        let (snapshot, actions) = state.withLockedValue {
            $0.join(membership, connection: connection, quiet: quiet, withPresence: withPresence, services: services, wallMillis: Hub.wallMillis)
        }
        run(actions)
        return snapshot
    }

    /// The connection left (or was lost): the member goes, others are told.
    func leave(_ membership: StreamMembership, connection: ConnectionRef, reason: PresenceEventKind) {
        run(state.withLockedValue { $0.leave(membership, connection: connection, reason: reason, wallMillis: Hub.wallMillis) })
    }

    /// Becomes a publisher of `topic`.
    func joinTopic(_ membership: StreamMembership, topic: String, meta: String) -> RequestRefusal? {
        perform { state throws(RequestRefusal) in try state.joinTopic(membership, topic: topic, meta: meta, wallMillis: Hub.wallMillis) }
    }

    /// Stops publishing to `topic`.
    func leaveTopic(_ membership: StreamMembership, topic: String) -> RequestRefusal? {
        perform { state throws(RequestRefusal) in try state.leaveTopic(membership, topic: topic, wallMillis: Hub.wallMillis) }
    }

    /// Subscribes to `topic` from `users` (nil: from every publisher). Returns the users
    /// subscribed and those refused (invalid names).
    func subscribeTopic(_ membership: StreamMembership, topic: String,
                        users: [String]?) -> Result<(succeeded: [String], failed: [String]), RequestRefusal> {
        state.withLockedValue { state in Result { () throws(RequestRefusal) in try state.subscribeTopic(membership, topic: topic, users: users) } }
    }

    /// Unsubscribes `topic` (from `users`, or entirely).
    func unsubscribeTopic(_ membership: StreamMembership, topic: String, users: [String]?) -> RequestRefusal? {
        perform { state throws(RequestRefusal) in
            try state.unsubscribeTopic(membership, topic: topic, users: users)
            return []
        }
    }

    /// The member's grants changed: it keeps the `services` given and leaves the topics
    /// `refusal` refuses. Returns those topics (sorted) and their refusals.
    func grantsChanged(_ membership: StreamMembership, services: ChannelFeatures,
                       refusal: (String) -> RequestRefusal?) -> [(topic: String, refusal: RequestRefusal)] {
        let (left, actions) = state.withLockedValue {
            $0.grantsChanged(membership, services: services, refusal: refusal, wallMillis: Hub.wallMillis)
        }
        run(actions)
        return left
    }

    // MARK: questions

    /// Who receives a message that `membership` publishes to `topic` on this node; fails if
    /// the topic is not joined.
    func recipients(of membership: StreamMembership, topic: String) -> Result<[ConnectionRef], RequestRefusal> {
        state.withLockedValue { state in Result { () throws(RequestRefusal) in try state.recipients(of: membership, topic: topic) } }
    }

    /// This node's members subscribed to `publisher`'s messages in `topic` (a cluster: a topic
    /// message committed by any node). The publisher need not be a member here.
    func subscribers(of channel: ChannelKey, topic: String, publisher: String) -> [ConnectionRef] {
        state.withLockedValue { $0.subscribers(of: channel, topic: topic, publisher: publisher) }
    }

    /// The storage and lock events `membership` receives.
    func services(of membership: StreamMembership) -> ChannelFeatures {
        state.withLockedValue { $0.services(of: membership) }
    }

    /// Whether the user is in the stream channel (a rejoin replaces its connection).
    func isMember(_ membership: StreamMembership) -> Bool {
        state.withLockedValue { $0.isMember(membership) }
    }

    /// Every STREAM connection of a user.
    func connections(of user: UserKey) -> [ConnectionRef] {
        state.withLockedValue { $0.connections(of: user) }
    }

    /// The other nodes' visible members of `channel`, as their events told (none on a single node).
    func remoteMembers(of channel: ChannelKey) -> [String: RemoteStreamMember] {
        state.withLockedValue { $0.remote[channel] ?? [:] }
    }

    /// A storage or lock event of `channel`, encoded (the channel's metadata and locks are
    /// shared by its message-channel subscribers and its stream-channel members): written to
    /// the members that joined `withMetadata` (storage) or `withLock` (locks).
    func relayServiceEvent(_ buffer: ByteBuffer, of type: FrameType, channel: ChannelKey) {
        let targets = state.withLockedValue { $0.serviceTargets(of: channel, wanting: type == .lock ? .lock : .metadata) }
        for target in targets { Hub.sendEncoded(buffer, on: target.channel) }
    }

    // MARK: the other nodes

    /// A membership event of another node (`Hub.deliverTopicMessages`).
    func applyRemote(_ event: StreamClusterEvent, channel: ChannelKey, node: String) {
        run(state.withLockedValue { $0.applyRemote(event, channel: channel, node: node, wallMillis: Hub.wallMillis) })
    }

    /// A node's lease passed: its members leave (`remoteTimeout`).
    func remoteNodeDied(_ node: String) {
        run(state.withLockedValue { $0.remoteNodeDied(node, wallMillis: Hub.wallMillis) })
    }

    /// A node announced a new run: the members of its earlier runs are gone (`remoteTimeout`).
    func remoteNodeStarted(_ node: String, instance: String) {
        run(state.withLockedValue { $0.remoteNodeStarted(node, instance: instance, wallMillis: Hub.wallMillis) })
    }

    /// The database link came back: a `sync` of every channel this node announced members in
    /// or has members in.
    func syncAll() {
        let announced = link.announcedChannels()
        run(state.withLockedValue { $0.syncAll(announced: announced) })
    }

    /// Tells the other nodes this run started.
    func announceStart() {
        link.announceStart()
    }

    /// Waits (up to 2 s) until the membership changes announced so far reached the other nodes
    /// (a server that shuts down lets its members' leaves go first).
    func settle() async {
        await link.settle(within: .seconds(2))
    }

    // MARK: effects

    /// Runs an event that may be refused; its actions run after the lock is released.
    private func perform(_ event: (inout StreamState) throws(RequestRefusal) -> [StreamAction]) -> RequestRefusal? {
        let outcome = state.withLockedValue { state in Result { () throws(RequestRefusal) in try event(&state) } }
        switch outcome {
        case .success(let actions):
            run(actions)
            return nil
        case .failure(let refusal):
            return refusal
        }
    }

    /// Performs `actions`, in order; never called under the lock.
    private func run(_ actions: [StreamAction]) {
        for action in actions {
            switch action {
            case .send(let frame, let connections):
                let buffer = FrameCodec.encode(frame)
                for connection in connections { Hub.sendEncoded(buffer, on: connection.channel) }
            case .closeReplaced(let connection, let reason):
                Hub.closeReplaced(connection, reason: reason)
            case .announce(let event, let channel):
                link.announce(event, channel: channel) { [self] result in
                    // Once the others know this node has nobody there, the channel needs no more syncs.
                    guard event.op == .sync, case .success = result, event.members?.isEmpty ?? true,
                          !state.withLockedValue({ $0.hasMembers(in: channel) }) else { return }
                    link.forget(channel)
                }
            case .wakeWebhooks:
                webhooks?.wake()
            }
        }
    }
}
