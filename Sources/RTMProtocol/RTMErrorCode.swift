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
    /// The TLS handshake failed: the server's certificate is not trusted (unknown CA, wrong
    /// host name, expired) or the server does not speak TLS (a `wss://` URL for a `ws://` port).
    public static let tlsHandshakeFailed = RTMErrorCode(rawValue: -10102)
    /// The server's port requires TLS and the client connected with `ws://`: use `wss://`.
    public static let tlsRequired = RTMErrorCode(rawValue: -10103)
    /// The session may not do this: its capability token does not grant the operation on that
    /// channel or user, or the channel is private and needs a grant (this protocol's addition).
    public static let notPermitted = RTMErrorCode(rawValue: -10104)
    /// The client is not subscribed to that channel.
    public static let channelNotSubscribed = RTMErrorCode(rawValue: -11002)
    /// The subscription failed: the channel is full (its namespace's member limit).
    public static let channelSubscribeFailed = RTMErrorCode(rawValue: -11021)
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

    /// Stream channel: not joined.
    public static let channelNotJoined = RTMErrorCode(rawValue: -11001)
    /// Stream channel: joining failed (or rejoining gave up after 20 minutes).
    public static let channelJoinFailed = RTMErrorCode(rawValue: -11007)
    /// Stream channel: the STREAM connection is not up.
    public static let channelNotConnected = RTMErrorCode(rawValue: -11027)
    /// Stream channel: more than 64 users in one topic subscription.
    public static let channelExceedTopicUserLimitation = RTMErrorCode(rawValue: -11003)
    /// Stream channel: the topic name is empty, too long or has characters outside the allowed set.
    public static let channelInvalidTopicName = RTMErrorCode(rawValue: -11008)
    /// Stream channel: the user list is invalid.
    public static let channelInvalidUserList = RTMErrorCode(rawValue: -11011)
    /// Stream channel: the channel is not available (joined too many, or the service refuses it).
    public static let channelNotAvailable = RTMErrorCode(rawValue: -11012)
    /// Stream channel: the topic is not subscribed.
    public static let channelTopicNotSubscribed = RTMErrorCode(rawValue: -11013)
    /// Stream channel: too many joined or subscribed topics.
    public static let channelExceedTopicLimitation = RTMErrorCode(rawValue: -11014)
    /// Stream channel: publishing to a topic that was not joined.
    public static let channelTopicNotJoined = RTMErrorCode(rawValue: -11016)
    /// Stream channel: topic meta over 256 bytes.
    public static let channelInvalidTopicMeta = RTMErrorCode(rawValue: -11018)
    /// Storage: the operation failed (the store could not be written).
    public static let storageOperationFailed = RTMErrorCode(rawValue: -12001)
    /// Storage: too many items in a set.
    public static let storageMetadataItemExceedLimitation = RTMErrorCode(rawValue: -12002)
    /// Storage: an item is invalid.
    public static let storageInvalidMetadataItem = RTMErrorCode(rawValue: -12003)
    /// Storage: an argument is invalid.
    public static let storageInvalidArgument = RTMErrorCode(rawValue: -12004)
    /// Storage: a revision names an item or set that does not exist.
    public static let storageInvalidRevision = RTMErrorCode(rawValue: -12005)
    /// Storage: the set would be over 16 KB.
    public static let storageMetadataLengthOverflow = RTMErrorCode(rawValue: -12006)
    /// Storage: the guarding lock name is invalid.
    public static let storageInvalidLockName = RTMErrorCode(rawValue: -12007)
    /// Storage: the write is guarded by a lock the writer does not hold.
    public static let storageLockNotAcquired = RTMErrorCode(rawValue: -12008)
    /// Storage: a key is empty or has invalid characters.
    public static let storageInvalidKey = RTMErrorCode(rawValue: -12009)
    /// Storage: a key is longer than 32 characters.
    public static let storageKeyLengthOverflow = RTMErrorCode(rawValue: -12011)
    /// Storage: a value is over 16 KB.
    public static let storageValueLengthOverflow = RTMErrorCode(rawValue: -12012)
    /// Storage: a key appears twice in one request.
    public static let storageDuplicateKey = RTMErrorCode(rawValue: -12013)
    /// Storage: compare-and-set failed; the revision changed since it was read.
    public static let storageOutdatedRevision = RTMErrorCode(rawValue: -12014)
    /// Storage: not subscribed to that user's metadata.
    public static let storageNotSubscribe = RTMErrorCode(rawValue: -12015)
    /// Lock: the operation failed.
    public static let lockOperationFailed = RTMErrorCode(rawValue: -14001)
    /// Lock: a lock with that name exists (with another TTL).
    public static let lockAlreadyExist = RTMErrorCode(rawValue: -14004)
    /// Lock: the name is empty, too long or has invalid characters.
    public static let lockInvalidName = RTMErrorCode(rawValue: -14005)
    /// Lock: the caller does not hold the lock.
    public static let lockNotAcquired = RTMErrorCode(rawValue: -14006)
    /// Lock: another user holds the lock.
    public static let lockAcquireFailed = RTMErrorCode(rawValue: -14007)
    /// Lock: no lock with that name.
    public static let lockNotExist = RTMErrorCode(rawValue: -14008)
    /// History: the store could not be read or written.
    public static let historyOperationFailed = RTMErrorCode(rawValue: -15001)
    /// History: start/end are not valid timestamps (negative, or end after start).
    public static let historyInvalidTimestamp = RTMErrorCode(rawValue: -15002)
    /// The channel keeps no history (its namespace has none).
    public static let historyOperationNotPermitted = RTMErrorCode(rawValue: -15004)

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
        -10100: "invalidFrame", -10101: "requestTimeout",
        -10102: "tlsHandshakeFailed", -10103: "tlsRequired", -10104: "notPermitted", -11002: "channelNotSubscribed",
        -11005: "channelInstanceExceedLimitation", -11009: "channelInvalidMessage",
        -11010: "channelMessageLengthExceedLimitation", -11021: "channelSubscribeFailed", -11025: "channelPublishMessageTooFrequent",
        -11026: "channelPublishMessageTimeout", -11029: "channelCustomTypeLengthOverflow",
        -11033: "channelReceiverOffline", -11035: "channelReceiverOfflineButMessageStoreSucceeded",
        -11036: "channelReceiverOfflineAndMessageStoreFailed", -13001: "presenceNotConnected",
        -13004: "presenceCacheTooManyStates", -13005: "presenceStateCountOverflow", -13006: "presenceInvalidStateKey",
        -13009: "presenceStateValueSizeOverflow", -13011: "presenceUserNotExist",
    ].merging([-11001: "channelNotJoined", -11007: "channelJoinFailed", -11027: "channelNotConnected", -11003: "channelExceedTopicUserLimitation", -11008: "channelInvalidTopicName", -11011: "channelInvalidUserList", -11012: "channelNotAvailable", -11013: "channelTopicNotSubscribed", -11014: "channelExceedTopicLimitation", -11016: "channelTopicNotJoined", -11018: "channelInvalidTopicMeta", -12001: "storageOperationFailed", -12002: "storageMetadataItemExceedLimitation", -12003: "storageInvalidMetadataItem", -12004: "storageInvalidArgument", -12005: "storageInvalidRevision", -12006: "storageMetadataLengthOverflow", -12007: "storageInvalidLockName", -12008: "storageLockNotAcquired", -12009: "storageInvalidKey", -12011: "storageKeyLengthOverflow", -12012: "storageValueLengthOverflow", -12013: "storageDuplicateKey", -12014: "storageOutdatedRevision", -12015: "storageNotSubscribe", -14001: "lockOperationFailed", -14004: "lockAlreadyExist", -14005: "lockInvalidName", -14006: "lockNotAcquired", -14007: "lockAcquireFailed", -14008: "lockNotExist", -15001: "historyOperationFailed", -15002: "historyInvalidTimestamp", -15004: "historyOperationNotPermitted"], uniquingKeysWith: { a, _ in a })
}
