/// Who watches whose user metadata (AGORA_REFERENCE §2.11, `subscribeMetadata`), both ways:
/// target → its watchers (to tell them of a change), and watcher → its targets (so that a
/// session's own watches are found, and end with it, without a scan of everyone's). A sub-value
/// of `HubState`: the two tables change together, only through `watch`.
struct MetadataWatches {
    private(set) var watchers: [UserKey: Set<String>] = [:]
    private(set) var watched: [UserKey: Set<String>] = [:]

    /// `watcher` starts (`on`) or stops watching `target`'s metadata.
    mutating func watch(_ target: UserKey, by watcher: String, on: Bool) {
        let watcherKey = UserKey(appId: target.appId, userId: watcher)
        if on {
            watchers[target, default: []].insert(watcher)
            watched[watcherKey, default: []].insert(target.userId)
        } else {
            watchers[target]?.remove(watcher)
            if watchers[target]?.isEmpty == true { watchers[target] = nil }
            watched[watcherKey]?.remove(target.userId)
            if watched[watcherKey]?.isEmpty == true { watched[watcherKey] = nil }
        }
    }

    /// Ends every watch `watcher` holds (its session ended).
    mutating func endWatches(of watcher: UserKey) {
        for target in watched[watcher] ?? [] { watch(UserKey(appId: watcher.appId, userId: target), by: watcher.userId, on: false) }
    }

    /// Who watches `target`'s metadata.
    func watchers(of target: UserKey) -> Set<String> { watchers[target] ?? [] }

    /// Whose metadata `watcher` watches.
    func targets(of watcher: UserKey) -> Set<String> { watched[watcher] ?? [] }
}
