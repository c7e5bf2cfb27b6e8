/// Numeric error codes, the reference service's `AgoraRtmErrorCode` values where one exists
/// (AGORA_REFERENCE.md §2.14). Open: an unknown code from a newer peer is kept as is.
public struct RTMErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code on the wire.
    public let rawValue: Int
    /// Wraps a numeric code.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Not logged in, timed out, or logged out.
    public static let notLogin = RTMErrorCode(rawValue: -10002)
    /// Unknown or disabled app id.
    public static let invalidAppId = RTMErrorCode(rawValue: -10003)
    /// The token does not verify.
    public static let invalidToken = RTMErrorCode(rawValue: -10005)
    /// The user id is empty, too long, or uses characters outside the allowed set.
    public static let invalidUserId = RTMErrorCode(rawValue: -10006)
    /// The channel name is empty, too long, or uses characters outside the allowed set.
    public static let invalidChannelName = RTMErrorCode(rawValue: -10008)
    /// The token has expired.
    public static let tokenExpired = RTMErrorCode(rawValue: -10009)
    /// The server refuses logins for now (admission control): retry later, with backoff.
    public static let loginNoServerResources = RTMErrorCode(rawValue: -10010)
    /// Login did not complete within the login timeout.
    public static let loginTimeout = RTMErrorCode(rawValue: -10011)
    /// The server rejected the login.
    public static let loginRejected = RTMErrorCode(rawValue: -10012)
    /// Login aborted (the client was kicked, e.g. by a login elsewhere; call logout first).
    public static let loginAborted = RTMErrorCode(rawValue: -10013)
    /// A parameter is invalid (the reason names it).
    public static let invalidParameter = RTMErrorCode(rawValue: -10014)
    /// The operation was already requested.
    public static let duplicateOperation = RTMErrorCode(rawValue: -10017)
    /// Too many operations per second.
    public static let operationRateExceedLimitation = RTMErrorCode(rawValue: -10021)
    /// Superseded by a new login, or logout before login completed.
    public static let loginCanceled = RTMErrorCode(rawValue: -10023)
    /// The connection is not open.
    public static let notConnected = RTMErrorCode(rawValue: -10025)
    /// Unknown or malformed frame / operation (this protocol's addition, -10100 range).
    public static let invalidFrame = RTMErrorCode(rawValue: -10100)
    /// The request did not get a reply within the request timeout.
    public static let requestTimeout = RTMErrorCode(rawValue: -10101)
    /// The client is not subscribed to that channel.
    public static let channelNotSubscribed = RTMErrorCode(rawValue: -11002)
    /// Too many subscribed channels for this client.
    public static let channelInstanceExceedLimitation = RTMErrorCode(rawValue: -11005)
    /// Invalid message (neither text nor data, or both).
    public static let channelInvalidMessage = RTMErrorCode(rawValue: -11009)
    /// Payload over the limit (32 KB by default).
    public static let channelMessageLengthExceedLimitation = RTMErrorCode(rawValue: -11010)
    /// Publishing too often.
    public static let channelPublishMessageTooFrequent = RTMErrorCode(rawValue: -11025)
    /// Publish not acknowledged within the request timeout.
    public static let channelPublishMessageTimeout = RTMErrorCode(rawValue: -11026)
    /// Custom type over 32 characters.
    public static let channelCustomTypeLengthOverflow = RTMErrorCode(rawValue: -11029)
    /// User message: the receiver is offline.
    public static let channelReceiverOffline = RTMErrorCode(rawValue: -11033)

    /// User message: the receiver is offline; the message is stored and will be delivered.
    public static let channelReceiverOfflineButMessageStoreSucceeded = RTMErrorCode(rawValue: -11035)
    /// User message: the receiver is offline and the message could not be stored.
    public static let channelReceiverOfflineAndMessageStoreFailed = RTMErrorCode(rawValue: -11036)

    /// Presence: the user is not in that channel.
    public static let presenceNotConnected = RTMErrorCode(rawValue: -13001)
    /// Presence: more than 100 states cached before joining.
    public static let presenceCacheTooManyStates = RTMErrorCode(rawValue: -13004)
    /// Presence: more than 32 state pairs.
    public static let presenceStateCountOverflow = RTMErrorCode(rawValue: -13005)
    /// Presence: a state key is empty or too long.
    public static let presenceInvalidStateKey = RTMErrorCode(rawValue: -13006)
    /// Presence: a state value is too long.
    public static let presenceStateValueSizeOverflow = RTMErrorCode(rawValue: -13009)
    /// Presence: the user is not online.
    public static let presenceUserNotExist = RTMErrorCode(rawValue: -13011)

    /// The reference name of the code, or its number.
    public var description: String {
        Self.names[rawValue] ?? "error \(rawValue)"
    }

    private static let names: [Int: String] = [
        -10002: "notLogin", -10003: "invalidAppId", -10005: "invalidToken", -10006: "invalidUserId",
        -10008: "invalidChannelName", -10009: "tokenExpired", -10010: "loginNoServerResources",
        -10011: "loginTimeout", -10012: "loginRejected", -10013: "loginAborted",
        -10014: "invalidParameter", -10017: "duplicateOperation",
        -10021: "operationRateExceedLimitation", -10023: "loginCanceled", -10025: "notConnected",
        -10100: "invalidFrame", -10101: "requestTimeout", -11002: "channelNotSubscribed",
        -11005: "channelInstanceExceedLimitation", -11009: "channelInvalidMessage",
        -11010: "channelMessageLengthExceedLimitation", -11025: "channelPublishMessageTooFrequent",
        -11026: "channelPublishMessageTimeout", -11029: "channelCustomTypeLengthOverflow",
        -11033: "channelReceiverOffline", -11035: "channelReceiverOfflineButMessageStoreSucceeded",
        -11036: "channelReceiverOfflineAndMessageStoreFailed", -13001: "presenceNotConnected",
        -13004: "presenceCacheTooManyStates", -13005: "presenceStateCountOverflow", -13006: "presenceInvalidStateKey",
        -13009: "presenceStateValueSizeOverflow", -13011: "presenceUserNotExist",
    ]
}
