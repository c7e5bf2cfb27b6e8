/// Cluster mode's storage events: whether this node has anyone to tell of a
/// set another node changed.
extension Hub {
    /// A channel's set: the channel has members here; a user's set: someone here watches it.
    func hasStorageSubscribers(_ key: StorageKey) -> Bool {
        state.withLockedValue { state in
            switch key.type {
            case .channel: (state.channels[ChannelKey(appId: key.appId, name: key.target)]?.loops ?? 0) != 0
            case .user: !(state.metadataWatchers[UserKey(appId: key.appId, userId: key.target)]?.isEmpty ?? true)
            }
        }
    }
}
