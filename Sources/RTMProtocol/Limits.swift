/// Size and count limits (SPEC §8). The server enforces them; the SDK checks them early so the
/// caller gets the error without a round trip.
public struct Limits: Sendable, Equatable {
    /// Channel and user message payload, bytes (32 KB).
    public var maxPayloadBytes: Int = 32 * 1024
    /// User id and channel name length, characters.
    public var maxNameLength: Int = 64
    /// Subscribed message channels per client.
    public var maxChannelsPerClient: Int = 50
    /// Custom message type length, characters (Unicode code points, as JSON Schema's
    /// `maxLength` and most languages' string length count them).
    public var maxCustomTypeLength: Int = 32
    /// Temporary state pairs per user per channel (SPEC §8: 32).
    public var maxStatePairs: Int = 32
    /// State key length, characters.
    public var maxStateKeyLength: Int = 64
    /// State value length, bytes (UTF-8).
    public var maxStateValueBytes: Int = 1024
    /// Metadata key length, characters (§2.11: 32).
    public var maxMetadataKeyLength: Int = 32
    /// Metadata value size, and size of a whole set (keys + values), bytes (§2.11: 16 KB).
    public var maxMetadataBytes: Int = 16 * 1024
    /// Locks per channel (§2.12: 32).
    public var maxLocksPerChannel: Int = 32
    /// Joined stream channels per client (§2.9: 100).
    public var maxStreamChannelsPerClient: Int = 100
    /// Topic message payload, bytes (§2.9: 1 KB).
    public var maxTopicPayloadBytes: Int = 1024
    /// Topic name length, characters (§2.9: 16).
    public var maxTopicNameLength: Int = 16
    /// Topic publisher meta, bytes (§2.9: 256).
    public var maxTopicMetaBytes: Int = 256
    /// Joined topics per stream channel per client (§2.9: 8).
    public var maxJoinedTopics: Int = 8
    /// Subscribed topics per stream channel per client (§2.9: 50).
    public var maxSubscribedTopics: Int = 50
    /// Users per topic subscription (§2.9: 64).
    public var maxTopicUsers: Int = 64
    /// Messages per history query (§2.8: 100).
    public var maxHistoryCount: Int = 100
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

    /// Checks a metadata key; returns the error and problem, or nil.
    public func metadataKeyProblem(_ key: String) -> (RTMErrorCode, String)? {
        if key.isEmpty { return (.storageInvalidKey, "metadata key is empty") }
        if key.count > maxMetadataKeyLength { return (.storageKeyLengthOverflow, "metadata key '\(key.prefix(40))…' is longer than \(maxMetadataKeyLength) characters") }
        if !key.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\0" }) {
            return (.storageInvalidKey, "metadata key '\(key)' must be visible ASCII characters")
        }
        return nil
    }

    /// Checks a topic name; returns the problem, or nil.
    public func topicProblem(_ topic: String) -> String? {
        if topic.isEmpty { return "topic is empty" }
        if topic.count > maxTopicNameLength { return "topic '\(topic)' is longer than \(maxTopicNameLength) characters" }
        return nameProblem(topic, kind: "topic")
    }

    /// Checks a message's size in bytes against `maxBytes` (by default the channel and user
    /// message limit; a topic message has its own) and its custom type's length (SPEC §8);
    /// returns the error and the problem, or nil. The server, its admin API and the SDK all
    /// check a message here, so all three count alike.
    public func payloadProblem(size: Int, customType: String?, maxBytes: Int? = nil, what: String = "payload") -> (RTMErrorCode, String)? {
        let maxBytes = maxBytes ?? maxPayloadBytes
        if size > maxBytes {
            return (.channelMessageLengthExceedLimitation, "\(what) is \(size) bytes; the limit is \(maxBytes)")
        }
        if let customType, customType.unicodeScalars.count > maxCustomTypeLength {
            return (.channelCustomTypeLengthOverflow, "customType is longer than \(maxCustomTypeLength) characters")
        }
        return nil
    }

    /// Checks the text of a message the server stores (a user message, a channel message kept
    /// in history), given as its UTF-8 bytes; returns the problem, or nil. The NUL character
    /// (U+0000) is refused before anything is stored: no store keeps it whole (PostgreSQL's
    /// text cannot hold it, and would fail every message committed with it; SQLite's text ends
    /// there). Binary data carries any bytes.
    public static func storedTextProblem(_ utf8: some Sequence<UInt8>) -> String? {
        utf8.contains(0) ? "text contains the NUL character (U+0000), which a stored message cannot hold: send it as binary data" : nil
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
