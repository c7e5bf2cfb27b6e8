import RTMProtocol

/// A channel attribute of the classic API (`AgoraRtmChannelAttribute`, AGORA_REFERENCE §1.6).
public struct ChannelAttribute: Sendable, Equatable {
    /// Key, ≤ 32 characters.
    public let key: String
    /// Value.
    public let value: String
    /// Who wrote it last.
    public let lastUpdateUserId: String
    /// When, ms since the Unix epoch.
    public let lastUpdateTs: Int64
}

/// The classic (1.x) user and channel attributes (AGORA_REFERENCE §1.6), mapped onto the same
/// store as the metadata API: a user's attributes are its user metadata, a channel's attributes
/// its channel metadata (so both views see the same data, and it survives server restarts).
/// Channel attribute writes record their author and time; `notifyChannelMembers` sends the
/// storage event to every subscriber of the channel (else only to those subscribed
/// `withMetadata`).
extension RTMClient {
    /// Replaces all of this user's attributes.
    public func setLocalUserAttributes(_ attributes: [String: String]) async throws(RTMError) {
        _ = try await metadataRequest(.replaceMetadata, .user, config.userId, Self.metadata(attributes), MetadataOptions(), nil, "setLocalUserAttributes")
    }

    /// Adds or updates some of this user's attributes.
    public func addOrUpdateLocalUserAttributes(_ attributes: [String: String]) async throws(RTMError) {
        _ = try await metadataRequest(.setMetadata, .user, config.userId, Self.metadata(attributes), MetadataOptions(), nil, "addOrUpdateLocalUserAttributes")
    }

    /// Deletes some of this user's attributes (keys that do not exist are ignored).
    public func deleteLocalUserAttributes(keys: [String]) async throws(RTMError) {
        let present = Set(try await getUserMetadata().items.map(\.key))
        let keys = keys.filter(present.contains)
        guard !keys.isEmpty else { return }
        _ = try await metadataRequest(.removeMetadata, .user, config.userId, Metadata(items: keys.map { MetadataItem(key: $0) }),
                                      MetadataOptions(), nil, "deleteLocalUserAttributesByKeys")
    }

    /// Deletes all of this user's attributes.
    public func clearLocalUserAttributes() async throws(RTMError) {
        _ = try await metadataRequest(.removeMetadata, .user, config.userId, Metadata(), MetadataOptions(), nil, "clearLocalUserAttributes")
    }

    /// A user's attributes (all, or only `keys`).
    public func getUserAttributes(userId: String, keys: [String]? = nil) async throws(RTMError) -> [String: String] {
        var out: [String: String] = [:]
        for item in try await getUserMetadata(userId: userId).items where keys?.contains(item.key) ?? true { out[item.key] = item.value }
        return out
    }

    /// Replaces all of a channel's attributes (the caller need not be subscribed).
    public func setChannelAttributes(_ channel: String, _ attributes: [String: String], notifyChannelMembers: Bool = false) async throws(RTMError) {
        try check(channel: channel, operation: "setChannelAttributes")
        _ = try await metadataRequest(.replaceMetadata, .channel, channel, Self.metadata(attributes), Self.recorded, nil,
                                      "setChannelAttributes", notifyAll: notifyChannelMembers)
    }

    /// Adds or updates some of a channel's attributes.
    public func addOrUpdateChannelAttributes(_ channel: String, _ attributes: [String: String], notifyChannelMembers: Bool = false) async throws(RTMError) {
        try check(channel: channel, operation: "addOrUpdateChannelAttributes")
        _ = try await metadataRequest(.setMetadata, .channel, channel, Self.metadata(attributes), Self.recorded, nil,
                                      "addOrUpdateChannelAttributes", notifyAll: notifyChannelMembers)
    }

    /// Deletes some of a channel's attributes (keys that do not exist are ignored).
    public func deleteChannelAttributes(_ channel: String, keys: [String], notifyChannelMembers: Bool = false) async throws(RTMError) {
        let present = Set(try await getChannelMetadata(channel).items.map(\.key))
        let keys = keys.filter(present.contains)
        guard !keys.isEmpty else { return }
        _ = try await metadataRequest(.removeMetadata, .channel, channel, Metadata(items: keys.map { MetadataItem(key: $0) }),
                                      MetadataOptions(), nil, "deleteChannelAttributesByKeys", notifyAll: notifyChannelMembers)
    }

    /// Deletes all of a channel's attributes.
    public func clearChannelAttributes(_ channel: String, notifyChannelMembers: Bool = false) async throws(RTMError) {
        try check(channel: channel, operation: "clearChannelAttributes")
        _ = try await metadataRequest(.removeMetadata, .channel, channel, Metadata(), MetadataOptions(), nil,
                                      "clearChannelAttributes", notifyAll: notifyChannelMembers)
    }

    /// A channel's attributes (all, or only `keys`), sorted by key.
    public func getChannelAttributes(_ channel: String, keys: [String]? = nil) async throws(RTMError) -> [ChannelAttribute] {
        try await getChannelMetadata(channel).items.filter { keys?.contains($0.key) ?? true }.map {
            ChannelAttribute(key: $0.key, value: $0.value, lastUpdateUserId: $0.authorUserId ?? "", lastUpdateTs: $0.updateTs ?? 0)
        }
    }

    private static let recorded = MetadataOptions(recordTs: true, recordUserId: true)

    private static func metadata(_ attributes: [String: String]) -> Metadata {
        Metadata(items: attributes.keys.sorted().map { MetadataItem(key: $0, value: attributes[$0]!) })
    }
}
