import RTMProtocol

/// Which kinds of channel events a subscriber receives (subscribe options `withPresence`,
/// `withMetadata`, `withLock`; AGORA_REFERENCE §2.8 `AgoraRtmSubscribeChannelFeature`).
struct ChannelFeatures: OptionSet, Hashable, Sendable {
    let rawValue: UInt8
    /// Presence events.
    static let presence = ChannelFeatures(rawValue: 1)
    /// Storage (channel metadata) events.
    static let metadata = ChannelFeatures(rawValue: 2)
    /// Lock events.
    static let lock = ChannelFeatures(rawValue: 4)

    /// The features a subscribe or join request asks for (presence by default, the others not).
    init(_ frame: Frame) {
        var features: ChannelFeatures = []
        if frame.withPresence ?? true { features.insert(.presence) }
        if frame.withMetadata ?? false { features.insert(.metadata) }
        if frame.withLock ?? false { features.insert(.lock) }
        self = features
    }

    init(rawValue: UInt8) { self.rawValue = rawValue }
}
