import RTMAuth
import RTMProtocol

/// What one session may do, decided in this one place for every request of a MESSAGE or
/// STREAM connection: the connection asks `refusal(for:)` before it runs a request (and
/// `mayPublish` / `maySend` on the binary paths), never the request handlers themselves.
///
/// A session whose login brought a capability token may do on channels and other users only
/// what the token grants (`Capabilities`). A session without one may do anything, except in
/// private namespaces, which need a grant. The server's namespaces (`ChannelNamespace`) bound
/// everyone: no client publishes where clients may not, no presence or history where the
/// namespace has none. A session may always act on itself (its own user metadata, its own
/// conversation history, the invitations it received).
struct SessionAccess: Sendable, Equatable {
    /// The session's user id.
    let userId: String
    /// The capability token's grants; nil: no capability token.
    var capabilities: Capabilities?
    /// The server's namespaces (`ServerConfiguration.namespaces`, or a reload's).
    let namespaces: [ChannelNamespace]
    /// When the capability token stops being accepted (ms since the Unix epoch; nil: never,
    /// or no token): the session ends then unless a renewal brings a new one.
    var capabilityExpiry: Int64? = nil
    /// Some namespace asks the authorization hook about publishes (and a hook is configured):
    /// the publish path looks for it only then.
    var hooksPublishes = false

    /// Everything allowed (no capability token, no namespaces): the refusal checks
    /// return at once (the publish path pays nothing for access control it does not use).
    var isUnrestricted: Bool { capabilities == nil && namespaces.isEmpty }

    /// Why the session may not run `frame`, or nil. Requests that touch no channel or other
    /// user (ping, logout, unsubscribe, acknowledgements, answers to one's own invitations)
    /// are always allowed. `streamChannel`: a STREAM connection's channel (its topic requests
    /// name none).
    func refusal(for frame: Frame, streamChannel: String? = nil) -> RequestRefusal? {
        guard !isUnrestricted else { return nil }
        switch frame.type {
        case .subscribe:
            return check(.subscribe, frame.channel)
                ?? (frame.withMetadata == true ? check(.metadataRead, frame.channel) : nil)
                ?? (frame.withLock == true ? check(.lock, frame.channel) : nil)
        case .publish:
            return check(.publish, frame.channel) ?? (frame.storeInHistory == true ? historyCheck(frame.channel) : nil)
        case .setState, .removeState, .getState, .whoNow:
            return check(.presence, frame.channel)
        case .getChannelMemberCount:
            return (frame.channels ?? []).lazy.compactMap { check(.presence, $0) }.first
        case .getMessages:
            // A user conversation's history is the session's own.
            return frame.channelType == "user" ? nil : check(.history, frame.channel) ?? historyCheck(frame.channel)
        case .setMetadata, .replaceMetadata, .updateMetadata, .removeMetadata:
            return metadataCheck(frame, channel: .metadataWrite, user: .metadataWrite)
        case .getMetadata, .subscribeMetadata:
            return metadataCheck(frame, channel: .metadataRead, user: .metadataRead)
        case .setLock, .acquireLock, .releaseLock, .revokeLock, .removeLock, .getLocks:
            return check(.lock, frame.channel)
        case .sendUser:
            return check(.send, user: frame.userId)
        case .whereNow:
            return check(.status, user: frame.userId)
        case .queryPeersOnlineStatus, .subscribePeersOnlineStatus:
            return (frame.users ?? []).lazy.compactMap { check(.status, user: $0) }.first
        case .invite:
            return check(.invite, user: frame.userId)
        case .join:
            return check(.streamJoin, frame.channel)
        case .joinTopic, .publishTopic:
            return check(.streamPublish, streamChannel ?? frame.channel)
        default:
            return nil
        }
    }

    /// Whether the session may publish to `channel` (the publish fast path).
    func mayPublish(_ channel: String) -> RequestRefusal? {
        isUnrestricted ? nil : check(.publish, channel)
    }

    /// Whether the session may send user messages to `userId` (the binary user-message path).
    func maySend(to userId: String) -> RequestRefusal? {
        isUnrestricted ? nil : check(.send, user: userId)
    }

    // MARK: decisions

    /// A channel operation: allowed by the channel's namespace, and granted by the token (or,
    /// without a token, allowed unless the namespace is private). A missing name is left to the
    /// request's own validation.
    func check(_ operation: Capabilities.ChannelOperation, _ channel: String?) -> RequestRefusal? {
        guard let channel else { return nil }
        let namespace = namespaces.namespace(of: channel)
        if let namespace {
            if operation == .publish, !namespace.clientPublish {
                return RequestRefusal(code: .notPermitted, reason: "clients may not publish to channel '\(channel)' (namespace '\(namespace.pattern)': the backend publishes there, through the admin API)")
            }
            if operation == .presence, !namespace.presence {
                return RequestRefusal(code: .notPermitted, reason: "channel '\(channel)' has no presence (namespace '\(namespace.pattern)'): its members are not listed")
            }
        }
        if let capabilities {
            guard !capabilities.allows(operation, channel: channel) else { return nil }
            return RequestRefusal(code: .notPermitted, reason: "'\(userId)' may not \(Self.verb(operation)) channel '\(channel)': its capability token does not grant \(operation.rawValue) there")
        }
        guard let namespace, namespace.isPrivate else { return nil }
        return RequestRefusal(code: .notPermitted, reason: "channel '\(channel)' is private (namespace '\(namespace.pattern)'): \(Self.verb(operation)) it needs a capability token granting \(operation.rawValue)")
    }

    /// Storing or reading a channel's history: refused where the namespace keeps none.
    func historyCheck(_ channel: String?) -> RequestRefusal? {
        guard let channel, let namespace = namespaces.namespace(of: channel), !namespace.history else { return nil }
        return RequestRefusal(code: .historyOperationNotPermitted, reason: "channel '\(channel)' keeps no history (namespace '\(namespace.pattern)')")
    }

    /// An operation on another user: granted by the token, or (no token) allowed. Always
    /// allowed on oneself.
    func check(_ operation: Capabilities.UserOperation, user: String?) -> RequestRefusal? {
        guard let user, user != userId, let capabilities, !capabilities.allows(operation, user: user) else { return nil }
        return RequestRefusal(code: .notPermitted, reason: "'\(userId)' may not \(Self.verb(operation)) user '\(user)': its capability token does not grant \(operation.rawValue) there")
    }

    private func metadataCheck(_ frame: Frame, channel: Capabilities.ChannelOperation, user: Capabilities.UserOperation) -> RequestRefusal? {
        frame.storageType == "user" ? check(user, user: frame.userId) : check(channel, frame.channel)
    }

    private static func verb(_ operation: Capabilities.ChannelOperation) -> String {
        switch operation {
        case .subscribe: "subscribe to"
        case .publish: "publish to"
        case .presence: "use the presence of"
        case .metadataRead: "read the metadata of"
        case .metadataWrite: "write the metadata of"
        case .lock: "use the locks of"
        case .history: "read the history of"
        case .streamJoin: "join stream"
        case .streamPublish: "publish to stream"
        }
    }

    private static func verb(_ operation: Capabilities.UserOperation) -> String {
        switch operation {
        case .send: "send messages to"
        case .status: "see the status of"
        case .invite: "invite"
        case .metadataRead: "read the metadata of"
        case .metadataWrite: "write the metadata of"
        }
    }
}
