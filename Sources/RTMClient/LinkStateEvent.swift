import RTMProtocol

/// One link-state transition, with everything the application needs to know about it
/// (`AgoraRtmLinkStateEvent`, SPEC §3).
public struct LinkStateEvent: Sendable, CustomStringConvertible {
    /// The state after the transition.
    public let currentState: LinkState
    /// The state before it.
    public let previousState: LinkState
    /// Which connection moved.
    public let serviceType: ServiceType
    /// What triggered it.
    public let operation: LinkOperation
    /// Why (reference reason codes, e.g. 27 sameUidLogin, 29 keepAliveTimeout).
    public let reasonCode: LinkStateChangeReason
    /// A readable reason.
    public let reason: String
    /// Channels affected by the transition (the subscribed ones).
    public let affectedChannels: [String]
    /// Channels whose subscription could not be restored after a reconnection (normally empty).
    public let unrestoredChannels: [String]
    /// On a reconnection (→ connected, operation `reconnected`): `true` when the server still
    /// held this client's session and resumed it (its answer to the login, `resumed`): the
    /// subscriptions and presence state were kept and nobody saw the user leave. `false` after
    /// the grace window, after a server restart, and on the first login: the SDK subscribed
    /// again and members saw the user join.
    public let isResumed: Bool
    /// Milliseconds since the Unix epoch when the event was produced.
    public let timestamp: Int64

    /// One line: `disconnected → connecting op=autoReconnect reason=autoReconnect`.
    public var description: String {
        var line = "\(previousState) → \(currentState) op=\(operation) reason=\(reasonCode)(\(reasonCode.rawValue))"
        if !reason.isEmpty { line += " \"\(reason)\"" }
        if isResumed { line += " resumed" }
        if !affectedChannels.isEmpty { line += " channels=\(affectedChannels)" }
        if !unrestoredChannels.isEmpty { line += " unrestored=\(unrestoredChannels)" }
        return line
    }
}
