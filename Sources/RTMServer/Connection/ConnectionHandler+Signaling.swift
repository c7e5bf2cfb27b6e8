import NIOCore
import RTMProtocol

/// Peer online status, member counts and call invitations on a MESSAGE connection
/// (AGORA_REFERENCE §1.5, §1.7, §1.8).
extension ConnectionHandler {
    /// Runs one peer-status, member-count or invitation request (the gate passed it).
    func handlePeerStatus(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        switch frame.type {
        case .queryPeersOnlineStatus:
            switch hub.queryPeers(key, users: frame.users ?? []) {
            case .success(let peers): send(Frame(type: .ok, id: frame.id).with { $0.peers = peers }, context: context)
            case .failure(let refusal): send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
            }
        case .subscribePeersOnlineStatus:
            switch hub.subscribePeers(key, users: frame.users ?? []) {
            case .success(let reply): send(Frame(type: .ok, id: frame.id, seq: reply.version).with { $0.peers = reply.peers }, context: context)
            case .failure(let refusal): send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
            }
        case .unsubscribePeersOnlineStatus:
            if let refusal = hub.unsubscribePeers(key, users: frame.users ?? []) {
                send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
            } else {
                send(Frame(type: .ok, id: frame.id), context: context)
            }
        case .getChannelMemberCount:
            getChannelMemberCount(frame, key: key, context: context)
        case .invite, .ackInvitation, .acceptInvitation, .refuseInvitation, .cancelInvitation:
            // Answered once the change is stored (at once when nothing changed).
            hub.invitationRequest(frame, user: key, on: context.eventLoop).assumeIsolated().whenSuccess { [self] result in
                switch result {
                case .success(var reply):
                    reply.id = frame.id
                    send(reply, context: context)
                case .failure(let refusal):
                    send(.error(id: frame.id, refusal.code, refusal.reason), context: context, operation: frame.type)
                }
            }
        default:
            preconditionFailure("'\(frame.type)' is not a peer-status or invitation request")
        }
    }

    /// Called by the loop's liveness sweep: silent past the threshold → unreachable.
    func checkSilence(now: NIODeadline) {
        guard let key = lifecycle.silent(now: now) else { return }
        hub.peerSilence(key, connection: connection, silent: true)
    }

    /// getChannelMemberCount (§1.5): at most 32 channels, no need to join; 0 for a channel
    /// that does not exist.
    private func getChannelMemberCount(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        let channels = frame.channels ?? []
        let limit = hub.configuration.memberCountMaxChannels
        guard !channels.isEmpty, channels.count <= limit else {
            send(.error(id: frame.id, .invalidParameter, "'channels' must list 1 to \(limit) channels, got \(channels.count)"), context: context)
            return
        }
        for channel in channels {
            if let problem = hub.configuration.limits.nameProblem(channel, kind: "channel name") {
                send(.error(id: frame.id, .invalidChannelName, problem), context: context)
                return
            }
        }
        guard let counts = hub.memberCounts(key, channels: channels) else {
            send(.error(id: frame.id, .operationRateExceedLimitation, "getChannelMemberCount is limited to \(hub.configuration.memberCountRatePerSecond) call(s) per second"), context: context)
            return
        }
        send(Frame(type: .ok, id: frame.id).with { $0.memberCounts = counts }, context: context)
    }
}
