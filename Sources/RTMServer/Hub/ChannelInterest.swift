import NIOCore

/// Which channels this node has its backplane deliver (a cluster): only those it has
/// subscribers or replay buffers for, so that a publish costs the database and the nodes in
/// proportion to the nodes interested in its channel (`ChannelBackplane.follow`). A single
/// node has every channel (`followsEverything`) and nothing here ever waits.
///
/// A channel's life here: needed by a local subscriber (a subscribe, a resumed session), it is
/// asked for and the requests wait (`starting`) until the backplane reports where it stands;
/// then it is `followed`. The sweep notes when it first finds no local subscriber, and stops
/// following a channel that has had none for the idle time (the replay window: a subscriber
/// back within it is replayed from this node's buffer; one back later is replayed from the log
/// by the next follow). A part of `HubState`, changed under its lock.
struct ChannelInterest {
    enum Entry {
        /// Asked for (`generation`); these requests go on once it is followed (`true`) or the
        /// backplane could not start it (`false`).
        case starting(generation: UInt64, waiters: [EventLoopPromise<Bool>])
        /// Delivered; `idleSince`: when the sweep first found no local subscriber.
        case followed(generation: UInt64, idleSince: Int64?)
    }

    /// A single node: every channel is this node's.
    let followsEverything: Bool
    private(set) var entries: [ChannelKey: Entry] = [:]
    private var nextGeneration: UInt64 = 1

    init(followsEverything: Bool) {
        self.followsEverything = followsEverything
    }

    /// Whether `key`'s messages reach this node.
    func isFollowed(_ key: ChannelKey) -> Bool {
        if followsEverything { return true }
        if case .followed = entries[key] { return true }
        return false
    }

    /// Channels followed or being started.
    var count: Int { entries.count }

    /// What a request that needs `key` does.
    enum Need: Equatable {
        /// Followed: go on now.
        case ready
        /// Wait for `waiter`; `generation`: ask the backplane for it (nil: asked already).
        case wait(generation: UInt64?)
    }

    /// A local subscriber needs `key` now; `waiter` (if any) is answered once it is followed.
    mutating func need(_ key: ChannelKey, waiter: EventLoopPromise<Bool>?) -> Need {
        if followsEverything { return .ready }
        switch entries[key] {
        case .followed(let generation, _):
            entries[key] = .followed(generation: generation, idleSince: nil)
            return .ready
        case .starting(let generation, var waiters):
            if let waiter { waiters.append(waiter) }
            entries[key] = .starting(generation: generation, waiters: waiters)
            return .wait(generation: nil)
        case nil:
            let generation = nextGeneration
            nextGeneration += 1
            entries[key] = .starting(generation: generation, waiters: waiter.map { [$0] } ?? [])
            return .wait(generation: generation)
        }
    }

    /// The backplane reported where `key` stands: it is followed; returns the waiters.
    mutating func started(_ key: ChannelKey) -> [EventLoopPromise<Bool>] {
        guard case .starting(let generation, let waiters) = entries[key] else { return [] }
        entries[key] = .followed(generation: generation, idleSince: nil)
        return waiters
    }

    /// The backplane could not start follow `generation` of `key`: it is not followed; returns
    /// the waiters (nil: that follow is not the one starting).
    mutating func failed(_ key: ChannelKey, generation: UInt64) -> [EventLoopPromise<Bool>]? {
        guard case .starting(let current, let waiters) = entries[key], current == generation else { return nil }
        entries[key] = nil
        return waiters
    }

    /// The sweep at `nowMillis`: followed channels without a local subscriber (`inUse` false)
    /// for `idleMillis` or more stop being followed; returns them with their generations.
    mutating func sweep(nowMillis: Int64, idleMillis: Int64, inUse: (ChannelKey) -> Bool) -> [(ChannelKey, UInt64)] {
        var ended: [(ChannelKey, UInt64)] = []
        for (key, entry) in entries {
            guard case .followed(let generation, let idleSince) = entry else { continue }
            if inUse(key) {
                if idleSince != nil { entries[key] = .followed(generation: generation, idleSince: nil) }
            } else if let idleSince {
                if nowMillis - idleSince >= idleMillis {
                    entries[key] = nil
                    ended.append((key, generation))
                }
            } else {
                entries[key] = .followed(generation: generation, idleSince: nowMillis)
            }
        }
        return ended
    }
}
