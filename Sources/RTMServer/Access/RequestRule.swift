import RTMAuth

/// What one request needs of a session's grants and what its reply and events reveal: the
/// table of PROTOCOL.md §8.1, written once, here (a test holds the document and the decision,
/// `SessionAccess.refusal(for:)`, to it).
struct RequestRule: Sendable {
    /// When a grant is needed only for some forms of the request.
    enum Condition: String, Sendable, CaseIterable {
        case withMetadata = "with `withMetadata`"
        case withLock = "with `withLock`"
        case userStorage = "with `storageType` `user`"
        case channelStorage = "with `storageType` `channel` (the default)"
        case channelHistory = "with `channelType` `message` (the default)"
    }

    /// One grant the request needs (of a session with grants: a capability token's, the hook's,
    /// or the server's default capability).
    enum Need: Sendable, Equatable {
        /// On the channel it names.
        case channel(Capabilities.ChannelOperation, when: Condition? = nil)
        /// On each channel it lists (`channels`).
        case eachChannel(Capabilities.ChannelOperation)
        /// On the STREAM connection's channel.
        case streamChannel(Capabilities.ChannelOperation)
        /// On the other user it names (`userId`; never needed on oneself).
        case user(Capabilities.UserOperation, when: Condition? = nil)
        /// On each other user it lists (`users`).
        case eachUser(Capabilities.UserOperation)

        /// The table's words.
        var words: String {
            switch self {
            case .channel(let operation, let condition): "`\(operation.rawValue)` on `channel`" + (condition.map { " \($0.rawValue)" } ?? "")
            case .eachChannel(let operation): "`\(operation.rawValue)` on each of `channels`"
            case .streamChannel(let operation): "`\(operation.rawValue)` on the stream channel"
            case .user(let operation, let condition): "`\(operation.rawValue)` on `userId`" + (condition.map { " \($0.rawValue)" } ?? "")
            case .eachUser(let operation): "`\(operation.rawValue)` on each of `users`"
            }
        }
    }

    /// Every grant it needs (all of them; those with a condition only in that form).
    let needs: [Need]
    /// What its reply and the events it starts reveal, beyond what it names.
    let reveals: String
}

extension RequestKind {
    /// The request's rule: one case per request, no `default`.
    var rule: RequestRule {
        switch self {
        case .login: RequestRule(needs: [], reveals: "the session's own grants' expiry; with `resumeToken`, its kept channels")
        case .join: RequestRule(needs: [.channel(.streamJoin), .channel(.metadataRead, when: .withMetadata), .channel(.lock, when: .withLock)],
                                reveals: "the stream channel's members and topics (`stream.join` covers them); its metadata and locks only with their grants")
        case .ping, .logout: RequestRule(needs: [], reveals: "nothing")
        case .renewToken: RequestRule(needs: [], reveals: "nothing (a capability token issued before the current one is refused)")
        case .subscribe: RequestRule(needs: [.channel(.subscribe), .channel(.metadataRead, when: .withMetadata), .channel(.lock, when: .withLock)],
                                     reveals: "the channel's messages; its members (snapshot, join/leave events) only with `presence` there (else the reply says `withPresence: false`)")
        case .unsubscribe, .unsubscribeMetadata, .unsubscribePeersOnlineStatus, .leave, .leaveTopic, .unsubscribeTopic:
            RequestRule(needs: [], reveals: "nothing (it ends one of the session's own watches)")
        case .publish: RequestRule(needs: [.channel(.publish)], reveals: "the channel's position (`seq`, `epoch`)")
        case .sendUser: RequestRule(needs: [.user(.send)], reveals: "whether the receiver is online (`receiverOnline`, -11035) only with `status` on it")
        case .ackUser: RequestRule(needs: [], reveals: "nothing")
        case .setState, .removeState: RequestRule(needs: [.channel(.presence)], reveals: "the session's own state")
        case .getState: RequestRule(needs: [.channel(.presence)], reveals: "a member's state")
        case .whoNow: RequestRule(needs: [.channel(.presence)], reveals: "the channel's members")
        case .getChannelMemberCount: RequestRule(needs: [.eachChannel(.presence)], reveals: "the channels' member counts")
        case .whereNow: RequestRule(needs: [.user(.status)], reveals: "the user's channels, only those with `presence` granted")
        case .getMessages: RequestRule(needs: [.channel(.history, when: .channelHistory)], reveals: "the channel's stored messages (a user conversation is the session's own)")
        case .setMetadata, .replaceMetadata, .updateMetadata, .removeMetadata:
            RequestRule(needs: [.channel(.metadataWrite, when: .channelStorage), .user(.metadataWrite, when: .userStorage)], reveals: "the whole set after the change")
        case .getMetadata: RequestRule(needs: [.channel(.metadataRead, when: .channelStorage), .user(.metadataRead, when: .userStorage)], reveals: "the set")
        case .subscribeMetadata: RequestRule(needs: [.user(.metadataRead)], reveals: "the user's set and every later change")
        case .setLock, .acquireLock, .releaseLock, .revokeLock, .removeLock: RequestRule(needs: [.channel(.lock)], reveals: "the lock's state")
        case .getLocks: RequestRule(needs: [.channel(.lock)], reveals: "the channel's locks and their holders")
        case .queryPeersOnlineStatus: RequestRule(needs: [.eachUser(.status)], reveals: "whether each user is online")
        case .subscribePeersOnlineStatus: RequestRule(needs: [.eachUser(.status)], reveals: "each user's online status and every later change")
        case .invite: RequestRule(needs: [.user(.invite), .user(.status)], reveals: "whether the invitee is online (an invitation needs it online)")
        case .ackInvitation, .acceptInvitation, .refuseInvitation, .cancelInvitation:
            RequestRule(needs: [], reveals: "nothing (the session's own invitations)")
        case .joinTopic, .publishTopic: RequestRule(needs: [.streamChannel(.streamPublish)], reveals: "nothing beyond the stream channel")
        case .subscribeTopic: RequestRule(needs: [.streamChannel(.streamJoin)], reveals: "the topic's messages")
        }
    }

    /// PROTOCOL.md §8.1's table, one row per request.
    static var ruleTable: String {
        var lines = ["| request | grants it needs | what its reply and events reveal |", "|---|---|---|"]
        for kind in allCases {
            let needs = kind.rule.needs.isEmpty ? "none" : kind.rule.needs.map(\.words).joined(separator: "; ")
            lines.append("| `\(kind.rawValue)` | \(needs) | \(kind.rule.reveals) |")
        }
        return lines.joined(separator: "\n")
    }
}
