import RTMProtocol

/// A request the server refuses: the reference's error code and a reason in our words, naming
/// the problem. The one refusal type of the server's parts (sessions, presence, locks, stream
/// channels, storage, peer status, invitations, the shared stores of a cluster); the connection
/// answers it as an `error` frame with the request's id.
public struct RequestRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error code (AGORA_REFERENCE §5).
    public var code: RTMErrorCode
    /// What is wrong, for the client's developer.
    public var reason: String

    /// A refusal with `code` and `reason`.
    public init(code: RTMErrorCode, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// "`reason` (`code`)".
    public var description: String { "\(reason) (\(code.rawValue))" }
}
