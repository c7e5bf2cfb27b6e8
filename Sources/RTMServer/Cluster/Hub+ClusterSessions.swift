import Foundation
import NIOCore
import RTMProtocol

/// Sessions and presence across nodes: the hub's side of
/// `HubState+ClusterSessions`: reading the cluster's events from the backplane, doing what they
/// ask (kicks, closes, presence events to local subscribers, grace windows of a dead node's
/// sessions) and sending this node's own.
extension Hub {
    /// Splits the backplane's messages into cluster events (sessions and presence, then call
    /// invitations: applied here) and channel messages.
    func applyControl(_ messages: [BackplaneMessage]) -> [BackplaneMessage] {
        guard messages.contains(where: { $0.appId.isEmpty }) else { return messages }
        var sessionEvents: [BackplaneMessage] = [], invitationEvents: [BackplaneMessage] = [], channelMessages: [BackplaneMessage] = []
        for message in messages {
            switch (message.appId.isEmpty, message.channel) {
            case (true, ClusterEvent.channel): sessionEvents.append(message)
            case (true, InvitationEvent.channel): invitationEvents.append(message)
            default: channelMessages.append(message)
            }
        }
        let events = decodeClusterEvents(sessionEvents).map(\.event)
        let invitations = decodeClusterEvents(invitationEvents)
        let now = NIODeadline.now()
        modify { state in
            let wallMillis = Self.wallMillis
            let outcome = state.applyCluster(events, now: now, wallMillis: wallMillis)
            return state.clusterActions(outcome, now: now) + state.takeReadyLogins()
                + state.applyInvitationLog(invitations, now: now, wallMillis: wallMillis) + [.wakeCluster]
        }
        return channelMessages
    }

    /// Cluster events as written to the log, with their numbers (unreadable ones skipped).
    func decodeClusterEvents(_ messages: [BackplaneMessage]) -> [(seq: UInt64, event: ClusterEvent)] {
        let decoder = JSONDecoder()
        return messages.compactMap { message in
            do {
                return (message.seq, try decoder.decode(ClusterEvent.self, from: Data(message.payload.readableBytesView)))
            } catch {
                logger.error("unreadable cluster event skipped (a node of another version?)",
                             metadata: ["channel": "\(message.channel)", "error": "\(error)"])
                return nil
            }
        }
    }

    /// The nodes declared dead and not back (kept once, in `ClusterReplica`).
    var deadNodes: Set<String> { read { $0.cluster.deadNodes } }

    /// A node's lease ran out, or came back.
    func nodeLifeChanged(_ event: BackplaneEvent) {
        let now = NIODeadline.now()
        switch event {
        case .nodeDied(let node):
            modify { $0.nodeDied(node, now: now) }
        case .nodeReturned(let node): modify { $0.nodeReturned(node) }
        default: break
        }
    }

    /// Starts sending this node's cluster events through `backplane`, the first being its `hello`.
    func startClusterSender(_ sender: ClusterSender, backplane: any ChannelBackplane) {
        modify { ($0.clusterHello(), []) }
        sender.start(take: { [self] in modify { ($0.takeClusterEvents(), []) } }, publish: { events in
            let now = Self.wallMillis
            _ = try await backplane.publish(events.map { event in
                BackplanePublish(appId: "", channel: event.logChannel, publisher: event.from, msgId: nil, customType: nil,
                                 isText: true, payload: ByteBuffer(bytes: event.encoded()), millis: now)
            })
        }, logger: logger)
        sender.wake()
    }
}
