import RTMAuth
import RTMProtocol

/// What one session may do, decided in this one place for every request of a MESSAGE or
/// STREAM connection: the connection's gate (`ConnectionHandler.pass`) asks `refusal(for:)`
/// before any handler runs, and re-asks it for every watch of the session when its grants
/// change (`refusal(toKeep:)`); what a reply may reveal is decided here too (`reveals`).
///
/// A session whose login brought a capability token may do on channels and other users only
/// what the token grants (`Capabilities`). A session without one gets the server's default
/// capability (`ServerConfiguration.defaultCapabilities`), or, when none is configured, may do
/// anything except in private namespaces, which need a grant. The server's namespaces
/// (`ChannelNamespace`) bound everyone: no client publishes where clients may not, no presence
/// or history where the namespace has none. A session may always act on itself (its own user
/// metadata, its own conversation history, the invitations it received).
struct SessionAccess: Sendable, Equatable {
    /// The session's user id.
    let userId: String
    /// The grants (a capability token's, the hook's, or the server's default); nil: none, the
    /// session is bound by the namespaces only.
    var capabilities: Capabilities?
    /// The server's namespaces (`ServerConfiguration.namespaces`, or a reload's).
    let namespaces: [ChannelNamespace]
    /// When the capability token stops being accepted (ms since the Unix epoch; nil: never,
    /// or no token): the session ends then unless a renewal brings a new one.
    var capabilityExpiry: Int64? = nil
    /// When the capability token the grants came from was issued (its `iat`, Unix seconds);
    /// nil: they came from no token (the default capability, the hook). A token issued before
    /// it is refused: a session's grants never go back to an older token's.
    var issuedAt: UInt32? = nil
    /// Where the grants came from, for the refusals' words.
    var source: GrantSource = .token
    /// Some namespace asks the authorization hook about publishes (and a hook is configured):
    /// the publish path looks for it only then.
    var hooksPublishes = false

    /// Everything allowed (no grants to check, no namespaces): the decision returns at once
    /// (the publish path pays nothing for access control it does not use).
    var isUnrestricted: Bool { capabilities == nil && namespaces.isEmpty }

    /// Why the session may not run `request`, or nil. One `switch` over every request without a
    /// `default`: a new request does not compile until its permission is written here (and its
    /// row in `RequestKind.rule`, which PROTOCOL.md §8.1 prints and a test holds to this).
    /// `streamChannel`: a STREAM connection's channel (its topic requests name none).
    func refusal(for request: ClientRequest, streamChannel: String? = nil) -> RequestRefusal? {
        guard !isUnrestricted else { return nil }
        let frame = request.frame
        switch request.kind {
        case .login, .ping, .logout, .renewToken, .unsubscribe, .ackUser, .unsubscribeMetadata,
             .unsubscribePeersOnlineStatus, .ackInvitation, .acceptInvitation, .refuseInvitation, .cancelInvitation,
             .leave, .leaveTopic, .unsubscribeTopic:
            // Nothing of another channel or user is touched or revealed (ending one's own
            // watches, answering one's own invitations).
            return nil
        case .subscribe:
            return subscribeRefusal(request.channel, features: frame.map(ChannelFeatures.init) ?? .presence)
        case .join:
            return check(.streamJoin, request.channel)
                ?? (frame?.withMetadata == true ? check(.metadataRead, request.channel) : nil)
                ?? (frame?.withLock == true ? check(.lock, request.channel) : nil)
        case .publish:
            return check(.publish, request.channel) ?? (frame?.storeInHistory == true ? historyCheck(request.channel) : nil)
        case .setState, .removeState, .getState, .whoNow:
            return check(.presence, request.channel)
        case .getChannelMemberCount:
            return (frame?.channels ?? []).lazy.compactMap { check(.presence, $0) }.first
        case .getMessages:
            // A user conversation's history is the session's own.
            return frame?.channelType == "user" ? nil : check(.history, request.channel) ?? historyCheck(request.channel)
        case .setMetadata, .replaceMetadata, .updateMetadata, .removeMetadata:
            return frame?.storageType == "user" ? check(.metadataWrite, user: request.userId) : check(.metadataWrite, request.channel)
        case .getMetadata:
            return frame?.storageType == "user" ? check(.metadataRead, user: request.userId) : check(.metadataRead, request.channel)
        case .subscribeMetadata:
            // Always a user's metadata (the caller's own without a userId).
            return check(.metadataRead, user: request.userId)
        case .setLock, .acquireLock, .releaseLock, .revokeLock, .removeLock, .getLocks:
            return check(.lock, request.channel)
        case .sendUser:
            return check(.send, user: request.userId)
        case .whereNow:
            return check(.status, user: request.userId)
        case .queryPeersOnlineStatus, .subscribePeersOnlineStatus:
            return (frame?.users ?? []).lazy.compactMap { check(.status, user: $0) }.first
        case .invite:
            // Its answer says whether the invitee is online: it needs `status` there too.
            return check(.invite, user: request.userId) ?? check(.status, user: request.userId)
        case .joinTopic, .publishTopic:
            return check(.streamPublish, streamChannel ?? request.channel)
        case .subscribeTopic:
            return check(.streamJoin, streamChannel ?? request.channel)
        }
    }

    /// The refusal of a capability token issued at `issued` (nil: none given) before `current`,
    /// the one the grants of `whose` came from, or nil: a session's grants never go back to an
    /// older token's (a renewal, a STREAM join, a resume).
    static func goingBack(issued: UInt32?, current: UInt32?, of whose: String) -> RequestRefusal? {
        guard let current, (issued ?? 0) < current else { return nil }
        return RequestRefusal(code: .invalidToken, reason: "capability token rejected: \(issued.map { "issued at \($0)" } ?? "none given"), before \(whose) current one (\(current)); a session's grants never go back to an older token's")
    }

    /// A subscription (or its presence, metadata or lock part) the session holds, re-decided
    /// when its grants change.
    enum Watch: Hashable, Sendable {
        /// A message channel subscription with these parts.
        case subscription(channel: String, features: ChannelFeatures)
        /// A user's metadata (`subscribeMetadata`).
        case userMetadata(String)
        /// A user's online status (`subscribePeersOnlineStatus`).
        case peerStatus(String)
        /// The STREAM connection's channel, with these parts.
        case stream(channel: String, features: ChannelFeatures)
        /// A topic the STREAM connection publishes to (`joinTopic`).
        case topic(streamChannel: String, topic: String)
    }

    /// Why the session may no longer keep `watch` (its grants or the namespaces changed), or
    /// nil: the decision of the request that started it, made again.
    func refusal(toKeep watch: Watch) -> RequestRefusal? {
        switch watch {
        case .subscription(let channel, let features):
            var frame = Frame(type: .subscribe, channel: channel, withPresence: false)
            frame.withMetadata = features.contains(.metadata)
            frame.withLock = features.contains(.lock)
            // Its presence part: kept only where the session may see the members.
            return refusal(for: .json(.subscribe, frame)) ?? (features.contains(.presence) && !isUnrestricted ? check(.presence, channel) : nil)
        case .userMetadata(let user):
            return refusal(for: .json(.subscribeMetadata, Frame(type: .subscribeMetadata, userId: user)))
        case .peerStatus(let user):
            return refusal(for: .json(.subscribePeersOnlineStatus, Frame(type: .subscribePeersOnlineStatus, users: [user])))
        case .stream(let channel, let features):
            var frame = Frame(type: .join, channel: channel)
            frame.withMetadata = features.contains(.metadata)
            frame.withLock = features.contains(.lock)
            return refusal(for: .json(.join, frame))
        case .topic(let channel, let topic):
            return refusal(for: .json(.joinTopic, Frame(type: .joinTopic).with { $0.topic = topic }), streamChannel: channel)
        }
    }

    /// What a reply or an event may reveal beyond what its request needs.
    enum Revelation {
        /// Whether this user is online (a sendUser reply's `receiverOnline`).
        case online(String)
        /// That this user is in this channel (whereNow's list).
        case membership(channel: String)
    }

    /// Whether the session may learn `revelation`: needs `status` on the user, `presence` on
    /// the channel (and a namespace with presence).
    func reveals(_ revelation: Revelation) -> Bool {
        guard !isUnrestricted else { return true }
        switch revelation {
        case .online(let user): return check(.status, user: user) == nil
        case .membership(let channel): return check(.presence, channel) == nil
        }
    }

    /// A subscribe with `features`: `subscribe`, and the grant of each opt-in part it asks for
    /// (metadata.read, lock). Its presence part (on by default) needs no grant to be asked for:
    /// without `presence` there (or in a namespace without presence) the subscription is made
    /// without it (`reveals(.membership)`; the reply says `withPresence: false`).
    private func subscribeRefusal(_ channel: String?, features: ChannelFeatures) -> RequestRefusal? {
        check(.subscribe, channel)
            ?? (features.contains(.metadata) ? check(.metadataRead, channel) : nil)
            ?? (features.contains(.lock) ? check(.lock, channel) : nil)
    }

    // MARK: decisions

    /// A channel operation: allowed by the channel's namespace, and granted by the token (or,
    /// without a token, allowed unless the namespace is private). A missing name is left to the
    /// request's own validation.
    private func check(_ operation: Capabilities.ChannelOperation, _ channel: String?) -> RequestRefusal? {
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
            return RequestRefusal(code: .notPermitted, reason: "'\(userId)' may not \(Self.verb(operation)) channel '\(channel)': \(source.words) does not grant \(operation.rawValue) there")
        }
        guard let namespace, namespace.isPrivate else { return nil }
        return RequestRefusal(code: .notPermitted, reason: "channel '\(channel)' is private (namespace '\(namespace.pattern)'): \(Self.verb(operation)) it needs a capability token granting \(operation.rawValue)")
    }

    /// Storing or reading a channel's history: refused where the namespace keeps none.
    private func historyCheck(_ channel: String?) -> RequestRefusal? {
        guard let channel, let namespace = namespaces.namespace(of: channel), !namespace.history else { return nil }
        return RequestRefusal(code: .historyOperationNotPermitted, reason: "channel '\(channel)' keeps no history (namespace '\(namespace.pattern)')")
    }

    /// An operation on another user: granted by the token, or (no token) allowed. Always
    /// allowed on oneself.
    private func check(_ operation: Capabilities.UserOperation, user: String?) -> RequestRefusal? {
        guard let user, user != userId, let capabilities, !capabilities.allows(operation, user: user) else { return nil }
        return RequestRefusal(code: .notPermitted, reason: "'\(userId)' may not \(Self.verb(operation)) user '\(user)': \(source.words) does not grant \(operation.rawValue) there")
    }

    /// Where a session's grants came from.
    enum GrantSource: Sendable, Equatable {
        /// Its capability token (login, renewToken, join).
        case token
        /// The server's default capability (`ServerConfiguration.defaultCapabilities`).
        case serverDefault
        /// The authorization hook's answer to its login.
        case hook

        var words: String {
            switch self {
            case .token: "its capability token"
            case .serverDefault: "the server's default capability (the session has no capability token)"
            case .hook: "the grants the app's backend gave its login"
            }
        }
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
