/// Why the link state changed (`AgoraRtmLinkStateChangeReason`, AGORA_REFERENCE.md §2.3).
/// Also carried as `code` in a `kicked` frame. Open for values from newer peers.
public struct LinkStateChangeReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric value.
    public let rawValue: Int
    /// Wraps a numeric value.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// 0
    public static let unknown = Self(rawValue: 0)
    /// 1
    public static let login = Self(rawValue: 1)
    /// 2
    public static let loginSuccess = Self(rawValue: 2)
    /// 3
    public static let loginTimeout = Self(rawValue: 3)
    /// 4
    public static let loginNotAuthorized = Self(rawValue: 4)
    /// 5
    public static let loginRejected = Self(rawValue: 5)
    /// 6
    public static let relogin = Self(rawValue: 6)
    /// 7
    public static let logout = Self(rawValue: 7)
    /// 8
    public static let autoReconnect = Self(rawValue: 8)
    /// 9
    public static let reconnectTimeout = Self(rawValue: 9)
    /// 10
    public static let reconnectSuccess = Self(rawValue: 10)
    /// 11: joining a stream channel.
    public static let join = Self(rawValue: 11)
    /// 12: joined a stream channel.
    public static let joinSuccess = Self(rawValue: 12)
    /// 13: joining a stream channel failed (or rejoining gave up).
    public static let joinFailed = Self(rawValue: 13)
    /// 14: rejoined a stream channel after a loss.
    public static let rejoin = Self(rawValue: 14)
    /// 15: left a stream channel.
    public static let leave = Self(rawValue: 15)
    /// 16
    public static let invalidToken = Self(rawValue: 16)
    /// 17
    public static let tokenExpired = Self(rawValue: 17)
    /// 18
    public static let inconsistentAppId = Self(rawValue: 18)
    /// 19
    public static let invalidChannelName = Self(rawValue: 19)
    /// 20
    public static let invalidUserId = Self(rawValue: 20)
    /// 24
    public static let operationRateExceedLimitation = Self(rawValue: 24)
    /// 27: another client logged in with the same user id.
    public static let sameUidLogin = Self(rawValue: 27)
    /// 28
    public static let kickedOutByServer = Self(rawValue: 28)
    /// 29: heartbeat (keep-alive) timeout.
    public static let keepAliveTimeout = Self(rawValue: 29)
    /// 30: the connection failed or closed.
    public static let connectionError = Self(rawValue: 30)
    /// 32: the network changed (e.g. came back).
    public static let networkChange = Self(rawValue: 32)
    /// 37: login too frequent (server admission control).
    public static let loginTooFrequent = Self(rawValue: 37)
    /// 1001: the server sent `goaway` (it drains or shuts down); the client reconnects by itself,
    /// to another endpoint when it has several. This server's own value (not in the reference;
    /// the number of the WebSocket close code "going away" that follows the frame).
    public static let serverGoingAway = Self(rawValue: 1001)

    /// The reference's lowerCamel name, or the number.
    public var description: String { Self.names[rawValue] ?? "reason \(rawValue)" }

    private static let names: [Int: String] = [
        0: "unknown", 1: "login", 2: "loginSuccess", 3: "loginTimeout", 4: "loginNotAuthorized",
        5: "loginRejected", 6: "relogin", 7: "logout", 8: "autoReconnect", 9: "reconnectTimeout",
        10: "reconnectSuccess", 11: "join", 12: "joinSuccess", 13: "joinFailed", 14: "rejoin",
        15: "leave", 16: "invalidToken", 17: "tokenExpired", 18: "inconsistentAppId",
        19: "invalidChannelName", 20: "invalidUserId", 21: "notInitialized",
        22: "rtmServiceNotConnected", 23: "channelInstanceExceedLimitation",
        24: "operationRateExceedLimitation", 25: "channelInErrorState", 26: "presenceNotConnected",
        27: "sameUidLogin", 28: "kickedOutByServer", 29: "keepAliveTimeout", 30: "connectionError",
        31: "presenceNotReady", 32: "networkChange", 33: "serviceNotSupported",
        34: "streamChannelNotAvailable", 35: "storageNotAvailable", 36: "lockNotAvailable",
        37: "loginTooFrequent", 1001: "serverGoingAway",
    ]
}
