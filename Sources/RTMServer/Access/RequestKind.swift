import RTMProtocol

/// Every request a client can send: on a MESSAGE connection, on a STREAM connection, and the
/// binary fast paths (`0x01` publish, `0x03` sendUser, `0x04` ackUser, which are the `publish`,
/// `sendUser` and `ackUser` requests in another encoding).
///
/// A closed set, unlike the wire's `FrameType`: the permission decision
/// (`SessionAccess.refusal(for:)`) and the documented rule of each request (`rule`) are switches
/// over it without a `default`, so a new request does not compile until its permission is
/// written.
enum RequestKind: String, CaseIterable, Sendable {
    // the session
    case login, join, ping, logout, renewToken
    // message channels
    case subscribe, unsubscribe, publish
    // user messages
    case sendUser, ackUser
    // presence
    case setState, removeState, getState, whoNow, whereNow, getChannelMemberCount
    // history
    case getMessages
    // storage
    case setMetadata, replaceMetadata, updateMetadata, removeMetadata, getMetadata, subscribeMetadata, unsubscribeMetadata
    // locks
    case setLock, acquireLock, releaseLock, revokeLock, removeLock, getLocks
    // peer status
    case queryPeersOnlineStatus, subscribePeersOnlineStatus, unsubscribePeersOnlineStatus
    // call invitations
    case invite, ackInvitation, acceptInvitation, refuseInvitation, cancelInvitation
    // a STREAM connection's requests after its join
    case leave, joinTopic, leaveTopic, publishTopic, subscribeTopic, unsubscribeTopic

    /// The request a frame type names; nil: no request (an unknown type, or a server → client
    /// frame), answered `invalidFrame`.
    init?(_ type: FrameType) { self.init(rawValue: type.rawValue) }

    /// A request a joined STREAM connection may send (the others are a MESSAGE session's).
    var onStreamConnection: Bool {
        switch self {
        case .ping, .renewToken, .join, .leave, .joinTopic, .leaveTopic, .publishTopic, .subscribeTopic, .unsubscribeTopic: true
        case .login, .logout, .subscribe, .unsubscribe, .publish, .sendUser, .ackUser, .setState, .removeState, .getState, .whoNow,
             .whereNow, .getChannelMemberCount, .getMessages, .setMetadata, .replaceMetadata, .updateMetadata, .removeMetadata,
             .getMetadata, .subscribeMetadata, .unsubscribeMetadata, .setLock, .acquireLock, .releaseLock, .revokeLock, .removeLock,
             .getLocks, .queryPeersOnlineStatus, .subscribePeersOnlineStatus, .unsubscribePeersOnlineStatus, .invite,
             .ackInvitation, .acceptInvitation, .refuseInvitation, .cancelInvitation: false
        }
    }

    /// The frame type on the wire.
    var frameType: FrameType { FrameType(rawValue: rawValue) }
}

/// One client request as the gate sees it (`ConnectionHandler.pass`): a JSON request, or one of
/// the binary fast paths with the fields its permission needs (the rest of the request stays
/// in the read batch it came in).
enum ClientRequest {
    /// A JSON request (text frame), of a known type. Boxed: a `Frame` is large, and the
    /// publish fast path must not build or copy a value its size for every message.
    indirect case json(RequestKind, Frame)
    /// A publish of a read batch (binary `0x01`, or a JSON publish the fast reader took), to
    /// this (validated) channel.
    case batchedPublish(channel: String)
    /// A binary `sendUser` (`0x03`) to this (validated) receiver.
    case binarySendUser(receiver: String)
    /// A binary `ackUser` (`0x04`).
    case binaryAckUser

    /// Which request it is.
    var kind: RequestKind {
        switch self {
        case .json(let kind, _): kind
        case .batchedPublish: .publish
        case .binarySendUser: .sendUser
        case .binaryAckUser: .ackUser
        }
    }

    /// The JSON frame (nil for the binary fast paths).
    var frame: Frame? {
        if case .json(_, let frame) = self { return frame }
        return nil
    }

    /// The channel it names.
    var channel: String? {
        switch self {
        case .json(_, let frame): frame.channel
        case .batchedPublish(let channel): channel
        case .binarySendUser, .binaryAckUser: nil
        }
    }

    /// The other user it names (`userId`; a binary sendUser's receiver).
    var userId: String? {
        switch self {
        case .json(_, let frame): frame.userId
        case .binarySendUser(let receiver): receiver
        case .batchedPublish, .binaryAckUser: nil
        }
    }
}
