/// Cluster mode's storage events: whether this node has anyone to tell of a
/// set another node changed.
extension Hub {
    /// A channel's set: the channel has members here; a user's set: someone here watches it.
    func hasStorageSubscribers(_ key: StorageKey) -> Bool {
        read { $0.hasStorageSubscribers(key) }
    }
}
