import Foundation
import RTMProtocol

/// Everything the client reports, in order, once per registration (SPEC T-6).
public enum RTMEvent: Sendable {
    /// A link-state transition (the modern view).
    case linkState(LinkStateEvent)
    /// A classic connection-state change (derived from the same transition, SPEC L-2).
    case connectionState(ConnectionState, ConnectionChangeReason)
    /// A channel or user message.
    case message(MessageEvent)
    /// A presence event.
    case presence(PresenceEvent)
    /// The token expired while reconnecting: call `renewToken` to go on (SPEC C-7).
    case tokenExpired
    /// Messages of a channel were missed during a disconnection and could not be replayed
    /// (SPEC M-2): the application knows its view of the channel has a hole.
    case gap(GapEvent)
    /// User messages waiting for this user were dropped before delivery (per-receiver cap or
    /// age limit, SPEC M-1): after a login, for those dropped since the last one; in a cluster
    /// also at any time, for those dropped while this client was online before its server could
    /// read them (its node cut off from the database while others stored messages for it).
    case userMessagesDropped(count: Int)
    /// User messages now come from a new mailbox epoch (a new store, or in a cluster the
    /// database failed over to a standby): messages sent to this user just before may have
    /// been lost, and nothing says how many (SPEC M-1). Emitted before the first message of
    /// the new epoch.
    case userMessageEpochChanged(epoch: String)
    /// The classic presence view (memberJoined / memberLeft / memberCount).
    case member(MemberEvent)
    /// The token stops granting access in `RTMClientConfig.tokenWillExpireLead` seconds (30 s):
    /// call `renewToken` (§2.13). `channel` is the stream channel for a stream channel's
    /// token, nil for the login token.
    case tokenWillExpire(channel: String?)
    /// A storage (metadata) event.
    case storage(StorageEvent)
    /// A lock event.
    case lock(LockEvent)
    /// A topic event of a joined stream channel.
    case topic(TopicEvent)
    /// Watched peers whose online state changed (`PeersOnlineStatusChanged`, §1.7): all of
    /// them after a first subscribe, then each change, and after a reconnection the changes
    /// made while this client was away.
    case peersOnlineStatus([PeerOnlineStatus])
    /// A call invitation sent or received changed state (§1.8).
    case call(CallEvent)
    /// The server ended a subscription: a renewed capability token no longer grants it. The
    /// channel is no longer subscribed (nor restored after a reconnection).
    case unsubscribed(SubscriptionEndedEvent)
    /// The server ended a watch short of a whole subscription (a part of a subscription, a
    /// user's metadata or online status, a stream topic): the session's grants no longer allow
    /// it. The watch is forgotten (not renewed after a reconnection).
    case watchEnded(WatchEndedEvent)
}

/// A watch the server ended (`RTMEvent.watchEnded`).
public struct WatchEndedEvent: Sendable, Equatable {
    /// What was watched.
    public enum Kind: String, Sendable {
        /// The presence events (and member lists) of a subscription (`channelName`).
        case presence
        /// The storage events of a subscription or a stream channel (`channelName`).
        case metadata
        /// The lock events of a subscription or a stream channel (`channelName`).
        case lock
        /// A user's metadata (`userId`, `subscribeUserMetadata`).
        case userMetadata
        /// A user's online status (`userId`, `subscribePeersOnlineStatus`).
        case peerStatus
        /// A stream channel's topic this client published to (`channelName`, `topic`).
        case topic
    }
    /// What was watched; nil: a kind this SDK does not know (a newer server).
    public let kind: Kind?
    /// The channel, for a channel's part or a topic.
    public let channelName: String?
    /// The user, for a user's metadata or status.
    public let userId: String?
    /// The topic, for a topic.
    public let topic: String?
    /// Why: `RTMErrorCode.notPermitted` (-10104).
    public let code: RTMErrorCode
    /// The server's reason, naming the grant that is missing.
    public let reason: String
}

/// A subscription the server ended (`RTMEvent.unsubscribed`).
public struct SubscriptionEndedEvent: Sendable, Equatable {
    /// The channel.
    public let channelName: String
    /// Why: `RTMErrorCode.notPermitted` (-10104).
    public let code: RTMErrorCode
    /// The server's reason, naming the grant that is missing.
    public let reason: String
}

/// Messages of a channel that were missed and could not be replayed (SPEC M-2).
public struct GapEvent: Sendable, Equatable {
    /// The channel.
    public let channelName: String
    /// How many messages were lost; nil when unknown (the server restarted or forgot the
    /// channel meanwhile).
    public let lostCount: Int?
    /// Server time, ms since the Unix epoch.
    public let timestamp: Int64
}

/// The server's receipt for a channel message (SPEC M-2): where the message stands in the
/// channel. A channel's numbering starts again at 1 in a new epoch (a cluster's database failed
/// over), so two receipts with the same `seq` and different epochs are two different messages.
public struct PublishReceipt: Sendable, Equatable {
    /// The message's sequence number in the channel (its ``MessageEvent`` carries the same).
    public let seq: UInt64
    /// The channel epoch `seq` belongs to (the delivered message's epoch); nil from a server
    /// that does not report it.
    public let epoch: String?
}

/// The server's receipt for a user message (SPEC M-1).
public struct UserMessageReceipt: Sendable, Equatable {
    /// The receiver had a connection when the message was stored; otherwise it waits for the
    /// receiver (the reference's -11035 "receiver offline but message stored"). False too when
    /// the server does not tell (`receiverStatusKnown`).
    public let receiverOnline: Bool
    /// Whether the server told if the receiver was online: it does only when the session may
    /// see the receiver's status (a `status` grant on it, or no capability restrictions).
    public var receiverStatusKnown: Bool = true
    /// The message is stored until the receiver's SDK acknowledges it.
    public let stored: Bool
    /// The server's id of the message.
    public let messageId: UInt64
}

/// A received message (`AgoraRtmMessageEvent`).
public struct MessageEvent: Sendable, Equatable {
    /// Message channel or user (peer-to-peer) message.
    public enum ChannelType: String, Sendable { case message, user, stream }
    /// Which kind of channel it came through.
    public let channelType: ChannelType
    /// The channel name; for a user message, the receiver's (this client's) user id.
    public let channelName: String
    /// Who sent it.
    public let publisher: String
    /// Text payload, when sent as text.
    public let text: String?
    /// Binary payload, when sent as data.
    public let data: Data?
    /// Application-defined type.
    public let customType: String?
    /// Per-channel sequence number (channel messages).
    public let seq: UInt64?
    /// Server time, ms since the Unix epoch.
    public let timestamp: Int64
    /// The topic, for a stream-channel message.
    public var topic: String?
    /// The channel epoch `seq` belongs to (channel messages; nil otherwise): the same as the
    /// ``PublishReceipt/epoch`` its publisher got (SPEC M-2).
    public var epoch: String?
}

/// A presence event in a message channel (`AgoraRtmPresenceEvent`).
public struct PresenceEvent: Sendable, Equatable {
    /// snapshot, interval, remoteJoin, remoteLeave, remoteTimeout or remoteStateChanged.
    public let kind: PresenceEventKind
    /// The channel.
    public let channelName: String
    /// The user concerned (empty for a snapshot or an interval event).
    public let userId: String
    /// Snapshot: the members at subscribe time. Interval: the users who joined.
    public let members: [String]
    /// Server time, ms since the Unix epoch.
    public let timestamp: Int64
    /// remoteStateChanged: the user's whole new state.
    public var state: [String: String] = [:]
    /// Snapshot: members' states. Interval: the states that changed.
    public var states: [String: [String: String]] = [:]
    /// Interval: the users who left.
    public var left: [String] = []
    /// Interval: the users who timed out.
    public var timedOut: [String] = []
    /// Visible members in the channel after this event (nil if the server did not say).
    public var memberCount: Int?
    /// A message channel's or a stream channel's presence.
    public var channelType: MessageEvent.ChannelType = .message
}

/// The classic (1.x) view of presence, derived from presence events: `memberJoined`,
/// `memberLeft`, `memberCount`.
public enum MemberEvent: Sendable, Equatable {
    /// A user joined the channel.
    case joined(channel: String, userId: String)
    /// A user left the channel (or timed out).
    case left(channel: String, userId: String)
    /// The channel's member count changed.
    case count(channel: String, count: Int)
}

/// Receives client events on the client's event loop, in order. Every method has a default
/// that does nothing.
public protocol RTMClientDelegate: AnyObject, Sendable {
    /// A link-state transition.
    func rtmClient(_ client: RTMClient, didReceiveLinkStateEvent event: LinkStateEvent)
    /// A classic connection-state change.
    func rtmClient(_ client: RTMClient, connectionChangedTo state: ConnectionState, reason: ConnectionChangeReason)
    /// A message.
    func rtmClient(_ client: RTMClient, didReceiveMessageEvent event: MessageEvent)
    /// A presence event.
    func rtmClient(_ client: RTMClient, didReceivePresenceEvent event: PresenceEvent)
    /// The token expired while reconnecting.
    func rtmClientTokenDidExpire(_ client: RTMClient)
    /// Messages of a channel were missed and could not be replayed.
    func rtmClient(_ client: RTMClient, didReceiveGapEvent event: GapEvent)
    /// User messages waiting for this user were dropped before delivery.
    func rtmClient(_ client: RTMClient, userMessagesDropped count: Int)
    /// User messages now come from a new mailbox epoch: some sent just before may be lost.
    func rtmClient(_ client: RTMClient, userMessageEpochChanged epoch: String)
    /// Classic presence: a member joined, left, or the member count changed.
    func rtmClient(_ client: RTMClient, didReceiveMemberEvent event: MemberEvent)
    /// The token expires in 30 s: renew it (`tokenPrivilegeWillExpire`).
    func rtmClient(_ client: RTMClient, tokenPrivilegeWillExpire channel: String?)
    /// A storage event.
    func rtmClient(_ client: RTMClient, didReceiveStorageEvent event: StorageEvent)
    /// A lock event.
    func rtmClient(_ client: RTMClient, didReceiveLockEvent event: LockEvent)
    /// A topic event.
    func rtmClient(_ client: RTMClient, didReceiveTopicEvent event: TopicEvent)
    /// Watched peers whose online state changed.
    func rtmClient(_ client: RTMClient, peersOnlineStatusChanged statuses: [PeerOnlineStatus])
    /// A call invitation changed state (the classic `AgoraRtmCallDelegate` callbacks).
    func rtmClient(_ client: RTMClient, didReceiveCallEvent event: CallEvent)
    /// The server ended a subscription (a renewed capability token no longer grants it).
    func rtmClient(_ client: RTMClient, subscriptionEnded event: SubscriptionEndedEvent)
    /// `RTMEvent.watchEnded`.
    func rtmClient(_ client: RTMClient, watchEnded event: WatchEndedEvent)
}

extension RTMClientDelegate {
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveLinkStateEvent event: LinkStateEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, connectionChangedTo state: ConnectionState, reason: ConnectionChangeReason) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveMessageEvent event: MessageEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceivePresenceEvent event: PresenceEvent) {}
    /// Does nothing.
    public func rtmClientTokenDidExpire(_ client: RTMClient) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveGapEvent event: GapEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, userMessagesDropped count: Int) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, userMessageEpochChanged epoch: String) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveMemberEvent event: MemberEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, tokenPrivilegeWillExpire channel: String?) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveStorageEvent event: StorageEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveLockEvent event: LockEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveTopicEvent event: TopicEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, peersOnlineStatusChanged statuses: [PeerOnlineStatus]) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, didReceiveCallEvent event: CallEvent) {}
    /// Does nothing.
    public func rtmClient(_ client: RTMClient, subscriptionEnded event: SubscriptionEndedEvent) {}
    public func rtmClient(_ client: RTMClient, watchEnded event: WatchEndedEvent) {}
}
