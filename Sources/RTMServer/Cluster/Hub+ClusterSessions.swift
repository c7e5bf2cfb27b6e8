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
        guard messages.contains(where: Self.isControl) else { return messages }
        let events = decodeClusterEvents(messages.filter { $0.appId.isEmpty && $0.channel == ClusterEvent.channel }).map(\.event)
        let invitations = decodeClusterEvents(messages.filter { $0.appId.isEmpty && $0.channel == InvitationEvent.channel })
        let now = NIODeadline.now()
        modify { state in
            let wallMillis = Self.wallMillis
            let outcome = state.applyCluster(events, now: now, wallMillis: wallMillis)
            return state.clusterActions(outcome, now: now) + state.takeReadyLogins()
                + state.applyInvitationLog(invitations, now: now, wallMillis: wallMillis) + [.wakeCluster]
        }
        return messages.filter { !Self.isControl($0) }
    }

    private static func isControl(_ message: BackplaneMessage) -> Bool {
        message.appId.isEmpty && (message.channel == ClusterEvent.channel || message.channel == InvitationEvent.channel)
    }

    /// A node's lease ran out, or came back.
    func nodeLifeChanged(_ event: BackplaneEvent) {
        let now = NIODeadline.now()
        switch event {
        case .nodeDied(let node):
            modify { state in state.orphanActions(state.nodeDied(node, now: now)) + state.takeReadyLogins() }
        case .nodeReturned(let node): state.withLockedValue { $0.nodeReturned(node) }
        default: break
        }
    }

    /// Starts sending this node's cluster events, the first being its `hello`.
    func startClusterSender(_ backplane: any ChannelBackplane) {
        guard let sender = clusterSender else { return }
        state.withLockedValue { $0.clusterHello() }
        sender.start(take: { [self] in state.withLockedValue { $0.takeClusterEvents() } }, publish: { events in
            let now = Self.wallMillis
            _ = try await backplane.publish(events.map { event in
                BackplanePublish(appId: "", channel: event.logChannel, publisher: event.from, msgId: nil, customType: nil,
                                 isText: true, payload: ByteBuffer(bytes: event.encoded()), millis: now)
            })
        }, logger: logger)
        sender.wake()
    }
}
