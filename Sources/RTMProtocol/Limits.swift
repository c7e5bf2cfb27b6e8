/// Size and count limits (SPEC §8). The server enforces them; the SDK checks them early so the
/// caller gets the error without a round trip.
public struct Limits: Sendable, Equatable {
    /// Channel and user message payload, bytes (32 KB).
    public var maxPayloadBytes: Int = 32 * 1024
    /// User id and channel name length, characters.
    public var maxNameLength: Int = 64
    /// Subscribed message channels per client.
    public var maxChannelsPerClient: Int = 50
    /// Custom message type length, characters.
    public var maxCustomTypeLength: Int = 32
    /// Temporary state pairs per user per channel (SPEC §8: 32).
    public var maxStatePairs: Int = 32
    /// State key length, characters.
    public var maxStateKeyLength: Int = 64
    /// State value length, bytes (UTF-8).
    public var maxStateValueBytes: Int = 1024
    /// Largest WebSocket frame accepted (payload + JSON + base64 overhead).
    public var maxFrameBytes: Int = 64 * 1024

    /// The defaults.
    public init() {}

    /// Characters allowed in user ids and channel names besides ASCII letters and digits
    /// (the reference's set: space and ``!#$%&()+-:;<=.>?@[]^_{}|~,``).
    public static let allowedPunctuation: Set<Character> = Set(" !#$%&()+-:;<=.>?@[]^_{}|~,")

    /// Checks a temporary state (after merging); returns the error code and problem, or nil.
    public func stateProblem(_ state: [String: String]) -> (RTMErrorCode, String)? {
        if state.count > maxStatePairs { return (.presenceStateCountOverflow, "state has \(state.count) pairs; the limit is \(maxStatePairs)") }
        for (key, value) in state {
            if key.isEmpty || key.count > maxStateKeyLength {
                return (.presenceInvalidStateKey, "state key '\(key.prefix(80))' must be 1–\(maxStateKeyLength) characters")
            }
            if value.utf8.count > maxStateValueBytes {
                return (.presenceStateValueSizeOverflow, "value of state key '\(key)' is \(value.utf8.count) bytes; the limit is \(maxStateValueBytes)")
            }
        }
        return nil
    }

    /// Checks a user id or channel name; returns the problem, or nil when valid.
    public func nameProblem(_ name: String, kind: String) -> String? {
        if name.isEmpty { return "\(kind) is empty" }
        if name == "null" { return "\(kind) may not be \"null\"" }
        if name.count > maxNameLength { return "\(kind) is longer than \(maxNameLength) characters" }
        for ch in name where !(ch.isASCII && (ch.isLetter || ch.isNumber)) && !Self.allowedPunctuation.contains(ch) {
            return "\(kind) contains '\(ch)', outside a-z A-Z 0-9 space and !#$%&()+-:;<=.>?@[]^_{}|~,"
        }
        return nil
    }
}
