/// The `type` of a wire frame. An open set: a type this version does not know decodes to a
/// value that is not one of the constants below, and is answered with an error, never a crash.
public struct FrameType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The string on the wire.
    public let rawValue: String
    /// Wraps a wire string.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The wire string.
    public var description: String { rawValue }

    /// Decodes from a bare JSON string.
    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    /// Encodes as a bare JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    // MARK: client → server
    /// Opens the session (must be the first frame).
    public static let login = FrameType(rawValue: "login")
    /// Liveness probe; the server answers `pong` with the same `ts`.
    public static let ping = FrameType(rawValue: "ping")
    /// Subscribe to a message channel.
    public static let subscribe = FrameType(rawValue: "subscribe")
    /// Unsubscribe from a message channel (an intentional leave, SPEC P-4).
    public static let unsubscribe = FrameType(rawValue: "unsubscribe")
    /// Publish to a message channel.
    public static let publish = FrameType(rawValue: "publish")
    /// Send a user (peer-to-peer) message.
    public static let sendUser = FrameType(rawValue: "sendUser")
    /// Replace the session's token in-band (SPEC T-7).
    public static let renewToken = FrameType(rawValue: "renewToken")
    /// Set (merge) this user's temporary state in a channel (`channel`, `state`).
    public static let setState = FrameType(rawValue: "setState")
    /// Remove keys of this user's temporary state in a channel (`channel`, `keys`).
    public static let removeState = FrameType(rawValue: "removeState")
    /// A user's temporary state in a channel (`channel`, `userId`).
    public static let getState = FrameType(rawValue: "getState")
    /// Who is in a channel (`channel`, `includeState`, `page`): 100 users per page.
    public static let whoNow = FrameType(rawValue: "whoNow")
    /// Which channels a user is in (`userId`).
    public static let whereNow = FrameType(rawValue: "whereNow")
    /// Acknowledge user messages up to `msgId` (cumulative): the server forgets them (SPEC M-1).
    public static let ackUser = FrameType(rawValue: "ackUser")
    /// End the session on purpose (SPEC H-4, P-4).
    public static let logout = FrameType(rawValue: "logout")

    // MARK: server → client
    /// Successful reply to the request with the same `id`.
    public static let ok = FrameType(rawValue: "ok")
    /// Failed reply (with `id`) or a protocol error (without).
    public static let error = FrameType(rawValue: "error")
    /// Answer to `ping`.
    public static let pong = FrameType(rawValue: "pong")
    /// A channel or user message.
    public static let message = FrameType(rawValue: "message")
    /// A presence event in a channel.
    public static let presence = FrameType(rawValue: "presence")
    /// Messages of a channel were missed and could not be replayed (`channel`, `count`; no
    /// `count` = unknown, e.g. the server restarted) (SPEC M-2).
    public static let gap = FrameType(rawValue: "gap")
    /// User messages waiting for this user were dropped (cap or age) before delivery (`count`) (M-1).
    public static let dropped = FrameType(rawValue: "dropped")
    /// The session was ended by the server (another login, token expiry, ban); do not reconnect.
    public static let kicked = FrameType(rawValue: "kicked")
    /// The server is going away (shutdown); reconnect with backoff.
    public static let goAway = FrameType(rawValue: "goaway")
}
