/// The classic peer online state (`AgoraRtmPeerOnlineState`, AGORA_REFERENCE §1.7). Open: a
/// value this version does not know is kept as is.
public struct PeerOnlineState: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The reference's integer value (also the wire value).
    public let rawValue: Int
    /// Wraps a wire value.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Logged in, and the server heard from it recently.
    public static let online = PeerOnlineState(rawValue: 0)
    /// Its session lives, but the server has received nothing from it for more than
    /// `peerUnreachableAfter` (6 s): its link is in trouble. Queries never return it.
    public static let unreachable = PeerOnlineState(rawValue: 1)
    /// Not logged in, logged out, or silent past its session's grace window (30 s by default).
    public static let offline = PeerOnlineState(rawValue: 2)

    /// `online`, `unreachable`, `offline`, or the number.
    public var description: String {
        switch self {
        case .online: "online"
        case .unreachable: "unreachable"
        case .offline: "offline"
        default: "state \(rawValue)"
        }
    }

    /// Decodes from a bare JSON integer.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(Int.self)
    }

    /// Encodes as a bare JSON integer.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// One peer's online status (`AgoraRtmPeerOnlineStatus`): on the wire `{"userId":…,"state":0}`.
public struct PeerOnlineStatus: Codable, Sendable, Hashable {
    /// The peer.
    public var userId: String
    /// Its state.
    public var state: PeerOnlineState
    /// The classic `isOnline` (deprecated there since 1.2.0): true unless offline.
    public var isOnline: Bool { state != .offline }

    /// Creates a status.
    public init(userId: String, state: PeerOnlineState) {
        self.userId = userId
        self.state = state
    }
}

/// Limits of the peer online status calls (AGORA_REFERENCE §1.7; the server's are configurable).
public enum PeerStatusLimits {
    /// Users per `queryPeersOnlineStatus` (and per subscribe/unsubscribe call).
    public static let maxUsersPerCall = 256
    /// Peers one client may be subscribed to at once.
    public static let maxSubscribedPeers = 512
}

extension FrameType {
    // MARK: peer online status (§1.7)
    /// The online state of up to 256 users (`users`); the reply lists them in `peers` (never
    /// `unreachable`: a peer whose session lives is online to a query).
    public static let queryPeersOnlineStatus = FrameType(rawValue: "queryPeersOnlineStatus")
    /// Watch up to 256 more users (`users`), at most 512 in all: the reply carries their status
    /// now (`peers`) and the status version (`seq`); changes come as `peersOnlineStatus` frames.
    public static let subscribePeersOnlineStatus = FrameType(rawValue: "subscribePeersOnlineStatus")
    /// Stop watching users (`users`).
    public static let unsubscribePeersOnlineStatus = FrameType(rawValue: "unsubscribePeersOnlineStatus")
    /// Server → client: watched peers whose state changed (`peers`), with the status version
    /// (`seq`) at the change.
    public static let peersOnlineStatus = FrameType(rawValue: "peersOnlineStatus")
    /// Member counts of up to 32 channels (`channels`) without joining them: the reply's
    /// `memberCounts` maps each channel to its visible members (0 when it does not exist).
    public static let getChannelMemberCount = FrameType(rawValue: "getChannelMemberCount")
}

extension RTMErrorCode {
    /// More than 512 peers would be subscribed (the classic `Overflow` 6 of
    /// `AgoraRtmPeerSubscriptionStatusErrorCode`).
    public static let peerSubscriptionOverflow = RTMErrorCode(rawValue: -16006)
}
