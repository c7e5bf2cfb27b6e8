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
}

/// A received message (`AgoraRtmMessageEvent`).
public struct MessageEvent: Sendable, Equatable {
    /// Message channel or user (peer-to-peer) message.
    public enum ChannelType: String, Sendable { case message, user }
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
}

/// A presence event in a message channel (`AgoraRtmPresenceEvent`).
public struct PresenceEvent: Sendable, Equatable {
    /// snapshot, remoteJoin, remoteLeave or remoteTimeout.
    public let kind: PresenceEventKind
    /// The channel.
    public let channelName: String
    /// The user concerned (empty for a snapshot).
    public let userId: String
    /// For a snapshot: the members at subscribe time.
    public let members: [String]
    /// Server time, ms since the Unix epoch.
    public let timestamp: Int64
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
}
