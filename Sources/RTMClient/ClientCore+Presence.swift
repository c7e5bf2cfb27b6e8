import RTMProtocol

/// Options of a subscription, kept to restore it after a reconnection.
public struct SubscribeOptions: Sendable, Equatable {
    /// Receive the channel's presence events (default true).
    public var withPresence: Bool
    /// Be invisible in the channel's presence: not listed, no join/leave events (default false).
    public var beQuiet: Bool
    /// Receive the channel's storage events, starting with a snapshot (default false).
    public var withMetadata: Bool
    /// Receive the channel's lock events, starting with a snapshot (default false).
    public var withLock: Bool

    /// Options with their defaults.
    public init(withPresence: Bool = true, beQuiet: Bool = false, withMetadata: Bool = false, withLock: Bool = false) {
        self.withPresence = withPresence
        self.beQuiet = beQuiet
        self.withMetadata = withMetadata
        self.withLock = withLock
    }

    /// The subscribe request for `channel`.
    func frame(_ channel: String) -> Frame {
        Frame(type: .subscribe, channel: channel, withPresence: withPresence, beQuiet: beQuiet).with {
            $0.withMetadata = withMetadata ? true : nil
            $0.withLock = withLock ? true : nil
        }
    }
}

extension ClientCore {
    /// A `presence` frame: the event, and its classic view (memberJoined/Left/Count).
    func receivedPresence(_ frame: Frame) {
        guard let kind = frame.event.flatMap(PresenceEventKind.init(rawValue:)) else { return }
        let channel = frame.channel ?? ""
        emitPresence(kind, channel: channel, frame: frame)
    }

    func emitPresence(_ kind: PresenceEventKind, channel: String, frame: Frame) {
        var event = PresenceEvent(kind: kind, channelName: channel, userId: frame.userId ?? "",
                                  members: frame.users ?? [], timestamp: frame.ts ?? 0)
        event.state = frame.state ?? [:]
        event.states = frame.states ?? [:]
        event.left = frame.left ?? []
        event.timedOut = frame.timedOut ?? []
        event.memberCount = frame.count
        emit(.presence(event))
        switch kind {
        case .remoteJoin:
            emit(.member(.joined(channel: channel, userId: event.userId)))
        case .remoteLeave, .remoteTimeout:
            emit(.member(.left(channel: channel, userId: event.userId)))
        case .interval:
            for user in event.members { emit(.member(.joined(channel: channel, userId: user))) }
            for user in event.left + event.timedOut { emit(.member(.left(channel: channel, userId: user))) }
        case .snapshot, .remoteStateChanged:
            break
        }
        if let count = frame.count, kind != .remoteStateChanged { emit(.member(.count(channel: channel, count: count))) }
    }

    /// Sends the cached temporary state of `channel`, if any (after a subscribe or a restore).
    func reapplyState(_ channel: String) {
        guard let state = presenceStates[channel], !state.isEmpty else { return }
        request(Frame(type: .setState, channel: channel, state: state), operation: "setState", isInternal: true)
            .whenFailure { [logger] error in
                logger.warning("re-applying presence state failed", metadata: ["channel": "\(channel)", "error": "\(error)"])
            }
    }
}
