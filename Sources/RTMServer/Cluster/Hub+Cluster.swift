import NIOCore
import RTMProtocol

/// Cluster mode: channel publishes go through the configured `ChannelBackplane`;
/// every node delivers what the backplane hands back. Without a backplane none of this runs.
extension Hub {
    /// Publishes messages of one publisher to one channel through `backplane` and returns their
    /// sequence numbers once committed (the publisher's ack), and the channel's epoch (the first stored
    /// message's, else the first resend's first copy's; nil when this node knew every one of
    /// them as a resend). Nothing is fanned out here: the
    /// messages come back through `applyCommitted`, on this node as on every other.
    ///
    /// Resends (M-3): every node remembers each publisher's message ids as it applies the log
    /// of the channels it follows (`HubState.applyCommitted`) and as its own publishes commit,
    /// so a resend of a message this node has read gets its first number without asking the
    /// backplane, whichever node took the first attempt. A resend
    /// that arrives before this node has read the first attempt (or whose first attempt's
    /// outcome was unknown here) is recognised by the backplane, which answers with the first
    /// copy's number and stores nothing (`BackplaneReceipt.resent`). A backplane that stores
    /// it twice (a node of an earlier release) is covered too: every node drops the second
    /// copy when it reads it (the same decision everywhere: one log order).
    func publishThroughBackplane(_ backplane: any ChannelBackplane, appId: String, channel: String, publisher: UserKey,
                                 messages: [Outgoing]) async throws -> (seqs: [UInt64], epoch: String?) {
        var seqs = modify { ($0.knownSequenceNumbers(of: messages, publisher: publisher), []) }
            ?? Array(repeating: nil, count: messages.count)
        let fresh = messages.indices.filter { seqs[$0] == nil }
        guard !fresh.isEmpty else { return (seqs.map { $0 ?? 0 }, nil) }
        // Known down: refused at once (nothing is queued to be committed after the client's
        // own timeout), but for a probe now and then (`ClusterStatus.admitsCommit`); the
        // listening connection's return brings the link back up too.
        guard cluster.admitsCommit() else { throw DatabaseLinkDown() }
        let now = Self.wallMillis
        let started = NIODeadline.now()
        let receipts: [BackplaneReceipt]
        do {
            receipts = try await backplane.publish(fresh.map { index in
                let message = messages[index]
                return BackplanePublish(appId: appId, channel: channel, publisher: publisher.userId, msgId: message.msgId,
                                        customType: message.customType, isText: message.isText, payload: message.payload, millis: now)
            })
        } catch let fenced as NodeFenced {
            throw fenced   // the database answered: the link is up
        } catch {
            cluster.setDatabase(up: false, reason: "a publish could not be committed: \(ClusterCommitFailure.logDescription(error))", from: .commit)
            throw error
        }
        cluster.committed(nanoseconds: (NIODeadline.now() - started).nanoseconds)
        cluster.setDatabase(up: true, reason: "a publish was committed", from: .commit)
        for (index, receipt) in zip(fresh, receipts) { seqs[index] = receipt.seq }
        // Remembered now for a resend on this node; every node remembers them again (the same
        // numbers) when the log brings them back.
        let ids = fresh.compactMap { index in messages[index].msgId.flatMap { id in seqs[index].map { (msgId: id, seq: $0) } } }
        let stored = receipts.reduce(0) { $0 + ($1.resent ? 0 : 1) }
        modify { ($0.committed(ids, publisher: publisher, count: stored), []) }
        return (seqs.map { $0 ?? 0 }, (receipts.first { !$0.resent } ?? receipts.first)?.epoch)
    }

    /// The channel epoch of a commit's numbers: `publishThroughBackplane`'s, or, when it knew
    /// every message as a resend (nil), the channel's epoch as this node follows it.
    func epoch(_ committed: String?, appId: String, channel: String) -> String {
        committed ?? channelPosition(appId: appId, channel: channel).epoch
    }

    /// Messages the backplane committed (any node's), in order per channel: each channel's run
    /// is applied to the local state (numbers, epoch, replay buffer) and fanned out to local
    /// subscribers with the same encoding and hops as a local publish.
    func applyCommitted(_ messages: [BackplaneMessage]) {
        let allocator = ByteBufferAllocator()
        var start = messages.startIndex
        while start < messages.endIndex {
            let first = messages[start]
            var end = start + 1
            while end < messages.endIndex, messages[end].channel == first.channel, messages[end].appId == first.appId { end += 1 }
            let key = ChannelKey(appId: first.appId, name: first.channel)
            modify(inOrder: { state in
                let (buffer, count, loops) = state.applyCommitted(messages[start..<end], channel: key, allocator: allocator)
                // Queued while the state is held, as in `publish`: every loop gets a channel's
                // messages in sequence order.
                return ((), buffer.map { .fanOut($0, messages: count, channel: key, loops: loops) })
            })
            start = end
        }
    }

    /// Numbers the backplane gave up on (M-2): each channel moves past them and its local
    /// subscribers get the `gap` notice a returning subscriber gets when replay cannot cover,
    /// queued in order with the channel's messages.
    func applyGaps(_ gaps: [BackplaneGap]) {
        for gap in gaps {
            let key = ChannelKey(appId: gap.appId, name: gap.channel)
            modify(inOrder: { state in
                guard let loops = state.applyGap(gap, channel: key) else { return ((), nil) }
                let frame = Frame(type: .gap, channel: gap.channel, ts: Self.wallMillis, epoch: gap.epoch, count: gap.count)
                return ((), .broadcast(HubState.Broadcast(channel: key, frame: frame, loops: loops, except: nil, requires: [])))
            })
            if let count = gap.count {
                cluster.gaps(count)
                logger.warning("channel messages lost across the cluster: subscribers told with a gap notice",
                               metadata: ["channel": "\(key.appId)/\(key.name)", "from": "\(gap.from)", "to": "\(gap.to)"])
            } else {
                logger.warning("channel starts a new epoch: the database failed over and may have lost its last messages; subscribers told with a gap notice",
                               metadata: ["channel": "\(key.appId)/\(key.name)", "epoch": "\(gap.epoch)"])
            }
        }
    }

    /// Cluster mode: waits until the backplane delivers `channels` (of `appId`) to this node
    /// (`ChannelInterest`): nil when it does already; else a future of whether they are
    /// followed now (false: the database could not be read), completed on `loop`. `positions`:
    /// where the subscriber stands in them (a resume): what it missed comes with the start.
    func follow(_ channels: [String], appId: String, positions: [String: ChannelPosition]?, on loop: any EventLoop) -> EventLoopFuture<Bool>? {
        var needs = channels.map { HubState.FollowNeed(key: ChannelKey(appId: appId, name: $0), after: positions?[$0]) }
        // Most calls find their channels followed: no promise is made for them.
        guard !modify({ $0.needFollowing(needs) }) else { return nil }
        var waiters: [EventLoopFuture<Bool>] = []
        for index in needs.indices {
            let promise = loop.makePromise(of: Bool.self)
            needs[index].waiter = promise
            waiters.append(promise.futureResult)
        }
        modify { $0.needFollowing(needs) }
        return EventLoopFuture.whenAllComplete(waiters, on: loop).map { results in
            results.allSatisfy { (try? $0.get()) == true }
        }
    }

    /// Where a channel followed from now on stands (`BackplaneEvent.following`): applied before
    /// any of its messages; what subscribers here missed meanwhile is delivered, then the
    /// requests that waited go on.
    private func followStarted(_ start: BackplaneFollowStart) {
        let (waiters, gap, messages) = modify { ($0.followStarted(start, nowMillis: Self.wallMillis), []) }
        if let gap { applyGaps([gap]) }
        if !messages.isEmpty { applyCommitted(messages) }
        for waiter in waiters { waiter.succeed(true) }
    }

    /// One event of the backplane.
    func handle(_ event: BackplaneEvent) {
        switch event {
        case .messages(let all):
            let messages = applyControl(all)   // the cluster's session and presence events
            let channelMessages = deliverTopicMessages(messages)   // topic messages (Hub+ClusterStream) first
            applyCommitted(channelMessages)
            if let newest = messages.map(\.millis).max() { cluster.applied(channelMessages.count, lagMillis: Self.wallMillis - newest) }
        case .gaps(let gaps):
            applyGaps(dropTopicGaps(gaps))
        case .positions(let positions):
            modify { ($0.applyPositions(positions, wallMillis: Self.wallMillis), []) }   // before any subscribe or publish
        case .following(let starts):
            for start in starts { followStarted(start) }
        case .link(let up):
            cluster.setDatabase(up: up, reason: up ? "the listening connection is back" : "the listening connection was lost", from: .listener)
            if up { streams.syncAll() }   // stream channel changes the others missed (StreamState+Remote)
        case .fenced:
            fenced()
        case .leaseLapsed(let peers):
            if cluster.leaseLapsed(peers: peers) { askPeers(peers) }
        case .leaseRenewed:
            cluster.leaseRenewed()
        case .liveNodes, .nodeDied, .nodeReturned:
            nodeLifeChanged(event)   // a dead node's sessions time out after their grace window
            if case .nodeDied(let node) = event {
                lockNodeDied(node)   // its users' locks: TTL from now
                streams.remoteNodeDied(node)   // its stream channel members leave (StreamState+Remote)
            }
            if case .liveNodes(let count) = event { cluster.liveNodesChanged(count) }
        }
    }

    /// The others declared this node dead (SPEC P-2 from their side: they gave its sessions
    /// grace windows, or ended them). Every client is sent `goaway` (code 28) and closed
    /// 1001: it reconnects, resumes its session where the cluster still has it (any node, while
    /// its grace window runs), or logs in again. The backplane's event handler then waits in
    /// `ClusterStatus.fenced` until connections accepted until now commit nothing more.
    func fenced() {
        sendEveryoneAway(Frame(type: .goAway, code: LinkStateChangeReason.kickedOutByServer.rawValue,
                               reason: "this node was declared dead by the cluster (paused or cut off past its lease): reconnect"),
                         closeReason: "node declared dead by the cluster")
    }

    /// This node's lease ran out while it could not reach the database: it asks the other
    /// nodes whether they reach it (`PeerHealthProbe`, off the backplane's event loop). If one
    /// does, it tries the database once more itself (bounded like the question,
    /// `clusterPeerProbeTimeout`), and sends its clients away only if that fails too: a node
    /// that reaches it (woken from a pause, its lapse a stale timer's) learns of its fence
    /// there, and its clients are told that instead (`PartitionWatch`).
    private func askPeers(_ peers: [String]) {
        let loop = fanouts[0].eventLoop, timeout = configuration.clusterPeerProbeTimeout
        let backplane = configuration.backplane
        Task { [self] in
            let up = await PeerHealthProbe.anyReachesDatabase(peers, loop: loop, timeout: timeout)
            switch cluster.probed(othersReachDatabase: up) {
            case .othersReach:
                let reaches = await backplane?.reachesDatabase(within: timeout) ?? false
                if cluster.confirmed(reachesDatabase: reaches) { cutOff() }
            case .alone(first: true):
                logger.warning("this node cannot reach the cluster's database and no other node says it does: an outage for every node; its clients stay",
                               metadata: ["asked": "\(peers.count)"])
            case .alone(first: false), .late:
                break
            }
        }
    }

    /// Cut off from the database while another node reaches it (a network partition between
    /// this node and PostgreSQL): this node acknowledges nothing that crosses the cluster, and
    /// the others declared it dead and gave its sessions their grace windows. Every client is
    /// sent `goaway` (code 28, with the drain's `reconnectDelay` spread) and closed 1001, so that
    /// it resumes its session on a node that reaches the database (the SDK tries another
    /// endpoint; a load balancer sees `/ready` 503). Once per lapse.
    func cutOff() {
        logger.warning("this node is cut off from the cluster's database while another node reaches it: its clients are sent away")
        let reason = "this node cannot reach the cluster's database (its lease ran out): reconnect, to another node if you can"
        let spread = max(configuration.drainReconnectSpread, .zero)
        sendEveryoneAway(Frame(type: .goAway, code: LinkStateChangeReason.kickedOutByServer.rawValue, reason: reason)
                            .with { $0.reconnectDelay = spread.nanoseconds / 1_000_000 },
                         closeReason: "node cut off from the cluster's database")
    }

    /// Every open connection gets `goAway` and is closed 1001 with `closeReason`.
    private func sendEveryoneAway(_ goAway: Frame, closeReason: String) {
        let open = openConnections
        for connection in open {
            Self.close(connection, with: goAway, code: .goingAway, reason: closeReason)
        }
        metrics.sentGoAways(open.count)
    }

    /// Starts the node's log (`NodeLink`): in a cluster, the backplane, delivering what it
    /// commits to this node's subscribers.
    func startBackplane() async throws {
        try await nodeLink.start(hub: self)
    }
}
