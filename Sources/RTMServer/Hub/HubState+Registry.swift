import NIOCore
import RTMProtocol

/// The hub's small events and reads: open connections and their counts, drain, metadata
/// watchers, storage event targets, and what the cluster path and the admin API read.
extension HubState {
    // MARK: connections

    /// A new WebSocket connection: its handle, counted among the open connections.
    mutating func register(_ channel: any Channel, loopIndex: Int) -> ConnectionRef {
        connections.register(channel, loopIndex: loopIndex)
    }

    mutating func unregister(_ connection: ConnectionRef) {
        connections.unregister(connection)
    }

    /// Every open connection.
    var openConnections: [ConnectionRef] { Array(connections.open.values) }

    /// A MESSAGE connection logged in or a STREAM connection joined (`opened`), or one closed.
    mutating func countConnection(_ kind: ConnectionCounters.Kind, opened: Bool) {
        connections.count(kind, opened: opened)
    }

    /// Starts draining; false when it had started already.
    mutating func startDraining() -> Bool {
        connections.startDraining()
    }

    // MARK: channels

    /// The members of a channel, sorted.
    func members(of channel: ChannelKey) -> [String] {
        channels[channel]?.members.keys.sorted() ?? []
    }

    /// Where a channel is now: its epoch and last sequence number (creating the channel).
    mutating func channelPosition(_ key: ChannelKey) -> ChannelPosition {
        let current = channels.take(key)
        channels.put(current, for: key)
        return ChannelPosition(epoch: current.epoch, seq: current.seq)
    }

    /// Visible members of each channel (0 for one that does not exist), getChannelMemberCount;
    /// nil when `caller` is over its rate.
    mutating func memberCounts(_ caller: UserKey, channels names: [String], now: NIODeadline) -> [String: Int]? {
        guard peerStatus.allow(caller, .memberCount, now: now) else { return nil }
        return Dictionary(names.map { ($0, channels[ChannelKey(appId: caller.appId, name: $0)]?.visible ?? 0) }) { first, _ in first }
    }

    /// Channels the server knows (with members, subscribers or recent messages).
    var channelCount: Int { channels.count }

    // MARK: storage events

    /// Subscribes `watcher` to storage events of `target`'s user metadata (or ends it).
    mutating func watchMetadata(of target: UserKey, watcher: String, on: Bool) {
        metadataWatches.watch(target, by: watcher, on: on)
    }

    /// A metadata set changed: channel members that asked for storage events (all of them when
    /// `notifyAll`), or the user's watchers, get `frame`.
    func storageChanged(_ key: StorageKey, frame: Frame, notifyAll: Bool) -> [HubAction] {
        switch key.type {
        case .channel:
            let channel = ChannelKey(appId: key.appId, name: key.target)
            return [.broadcast(Broadcast(channel: channel, frame: frame, loops: channels[channel]?.loops ?? 0, except: nil,
                                         requires: notifyAll ? [] : .metadata))]
        case .user:
            return metadataWatches.watchers(of: UserKey(appId: key.appId, userId: key.target)).sorted().compactMap {
                connection(of: UserKey(appId: key.appId, userId: $0)).map { .send(frame, to: $0) }
            }
        }
    }

    /// Whether this node has anyone to tell of a change of `key`'s set: a channel's has members
    /// here, a user's is watched by someone here.
    func hasStorageSubscribers(_ key: StorageKey) -> Bool {
        switch key.type {
        case .channel: (channels[ChannelKey(appId: key.appId, name: key.target)]?.loops ?? 0) != 0
        case .user: !metadataWatches.watchers(of: UserKey(appId: key.appId, userId: key.target)).isEmpty
        }
    }

    /// `key`'s session has new grants, from a capability token issued then (nil: from none).
    mutating func grantsChanged(_ key: UserKey, issuedAt: UInt32?) {
        sessions.grantsChanged(key, issuedAt: issuedAt)
    }

    // MARK: cluster reads

    /// Of these users, those with a session on another node.
    func onlineElsewhere(_ keys: Set<UserKey>) -> Set<UserKey> {
        keys.filter { cluster.remote[$0] != nil }
    }

    /// Step 1 of the channel pipeline (`HubState+Pipeline`): the sequence numbers the
    /// publisher's messages already got (resends, M-3), nil for new ones; nil altogether when
    /// none is known (the usual case: nothing is allocated).
    mutating func knownSequenceNumbers(of messages: [Hub.Outgoing], publisher: UserKey) -> [UInt64?]? {
        resends.knownNumbers(of: messages, publisher: publisher)
    }

    /// Messages committed through this node: their ids are remembered at once for a resend here
    /// (every node remembers them again, with the same numbers, when the log brings them back).
    mutating func committed(_ ids: [(msgId: UInt64, seq: UInt64)], publisher: UserKey, count: Int) {
        _ = resends.remember(ids.indices.map { PublishResendMemory.NumberedID(offset: $0, id: ids[$0].msgId, seq: ids[$0].seq) },
                             publisher: publisher)
        publishedMessages &+= UInt64(count)
    }

    // MARK: admin reads

    /// The users served by these connections.
    func users(ofConnections ids: [UInt64]) -> [UserKey] {
        ids.compactMap { sessions.key(ofConnection: $0) }
    }
}

extension HubState {
    /// How many connections are open (upgraded WebSockets).
    var openConnectionCount: Int { connections.open.count }
    /// Whether the server is draining.
    var isDraining: Bool { connections.draining }
    /// Connection counts by kind, and the PCU peak.
    var connectionCounters: ConnectionCounters { connections.counters }
    /// Logged-in sessions, online or within their grace window.
    var sessionCount: Int { sessions.count }
    /// Channel messages published since start.
    var publishedCount: UInt64 { publishedMessages }

    /// The webhook events queued so far, oldest first (the dispatcher's queue takes them).
    mutating func takeWebhookEvents() -> [WebhookEvent] { webhooks.take() }

    /// Cluster mode: this node's first event, `hello`.
    mutating func clusterHello() { cluster.send(.hello) }

    /// Cluster mode: this node's events to send, in order (the sender takes them).
    mutating func takeClusterEvents() -> [ClusterEvent] { cluster.takeOutbox() }
}
