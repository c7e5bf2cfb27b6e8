import RTMProtocol

extension ClientCore {
    /// A `message` frame: deduplicated, emitted once, user messages acknowledged (M-1, M-3).
    func receivedMessage(_ frame: Frame) {
        if frame.channelType == "user" {
            receivedUserMessage(frame)
            return
        }
        let channel = frame.channel ?? ""
        if let seq = frame.seq, let epoch = frame.epoch {
            // A replayed message this client already has (M-3): drop it.
            if let known = positions[channel], known.epoch == epoch, seq <= known.seq { return }
            positions[channel] = ChannelPosition(epoch: epoch, seq: seq)
        }
        emit(.message(MessageEvent(
            channelType: .message, channelName: channel, publisher: frame.publisher ?? "",
            text: frame.text, data: frame.data, customType: frame.customType,
            seq: frame.seq, timestamp: frame.ts ?? 0, epoch: frame.epoch)))
    }

    private func receivedUserMessage(_ frame: Frame) {
        if let id = frame.msgId {
            // Acknowledge even a duplicate: the server may not have our earlier ack (M-1).
            defer { acknowledgeUserMessage(id) }
            switch userMessageIDs.receive(id, epoch: frame.epoch) {
            case .duplicate:
                return
            case .newEpoch(let epoch):
                emit(.userMessageEpochChanged(epoch: epoch))
            case .new:
                break
            }
        }
        emit(.message(MessageEvent(
            channelType: .user, channelName: frame.channel ?? config.userId, publisher: frame.publisher ?? "",
            text: frame.text, data: frame.data, customType: frame.customType,
            seq: frame.msgId, timestamp: frame.ts ?? 0)))
    }

    /// Tells the server the application has every user message up to `id` (after it was
    /// emitted), so it is deleted there; a lost ack only means the message comes again and is
    /// dropped here as a duplicate.
    private func acknowledgeUserMessage(_ id: UInt64) {
        guard machine.isConnected, let channel = connection?.channel else { return }
        ClientTransport.send(Frame(type: .ackUser, msgId: id), on: channel)
    }

    /// The position a subscribe reply reports: where this client starts in the channel. A
    /// position already reached by messages received meanwhile is kept.
    func noteSubscribed(_ channel: String, reply: Frame) {
        guard let epoch = reply.epoch, let seq = reply.seq else { return }
        if let known = positions[channel], known.epoch == epoch, known.seq >= seq { return }
        positions[channel] = ChannelPosition(epoch: epoch, seq: seq)
    }

    /// A `gap` frame: messages missed in a channel that the server could not replay (M-2).
    func receivedGap(_ frame: Frame) {
        let channel = frame.channel ?? ""
        emit(.gap(GapEvent(channelName: channel, lostCount: frame.count, timestamp: frame.ts ?? 0)))
        if let epoch = frame.epoch, positions[channel]?.epoch != epoch {
            // A new epoch: positions in it start from zero; replayed messages follow.
            positions[channel] = ChannelPosition(epoch: epoch, seq: 0)
        }
    }

    /// The server ended a subscription (a narrower capability token): the channel is
    /// forgotten as after `unsubscribe`, and the application told.
    func subscriptionEnded(_ frame: Frame) {
        guard let channel = frame.channel else { return }
        forgetSubscription(channel)
        serverChannels.removeAll { $0 == channel }
        emit(.unsubscribed(SubscriptionEndedEvent(channelName: channel, code: RTMErrorCode(rawValue: frame.code ?? RTMErrorCode.notPermitted.rawValue),
                                                  reason: frame.reason ?? "the server ended the subscription")))
    }

    /// The server ended a watch short of a subscription: forgotten (a subscription's part is
    /// not asked for again after a reconnection, a user's watch not renewed), and the
    /// application told.
    func watchEnded(_ frame: Frame) {
        let kind = frame.event.flatMap(WatchEndedEvent.Kind.init(rawValue:))
        switch (kind, frame.channel, frame.userId) {
        case (_, _, _) where frame.channelType == "stream":
            break   // its STREAM connection forgot it (StreamCore)
        case (.presence?, let channel?, _):
            subscriptionOptions[channel, default: SubscribeOptions()].withPresence = false
        case (.metadata?, let channel?, _):
            subscriptionOptions[channel]?.withMetadata = false
        case (.lock?, let channel?, _):
            subscriptionOptions[channel]?.withLock = false
        case (.userMetadata?, _, let user?):
            metadataWatches.remove(user)
        case (.peerStatus?, _, let user?):
            peerWatch.remove([user])
        default:
            break
        }
        emit(.watchEnded(WatchEndedEvent(kind: kind, channelName: frame.channel, userId: frame.userId, topic: frame.topic,
                                         code: RTMErrorCode(rawValue: frame.code ?? RTMErrorCode.notPermitted.rawValue),
                                         reason: frame.reason ?? "the server ended the watch")))
    }

    /// Forgets a subscription (an unsubscribe, or the server ending it): not restored after a
    /// reconnection, and its presence state cleared (P-4).
    func forgetSubscription(_ channel: String) {
        subscriptions.removeAll { $0 == channel }
        subscriptionOptions[channel] = nil
        presenceStates[channel] = nil
    }

    /// The positions to send for `channels` on a login or a subscribe.
    func positions(for channels: [String]) -> [String: ChannelPosition]? {
        let known = channels.compactMap { channel in positions[channel].map { (channel, $0) } }
        return known.isEmpty ? nil : Dictionary(uniqueKeysWithValues: known)
    }

    /// A new client message id for a publish or user message (M-3): unique for this client
    /// instance, kept by a request across resends.
    func takeMessageID() -> UInt64 {
        defer { nextMessageID &+= 1 }
        return nextMessageID
    }
}
