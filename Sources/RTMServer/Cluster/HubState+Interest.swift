import RTMProtocol
import DequeModule
import NIOCore

/// The channels this node follows through its backplane (`ChannelInterest`): asked for when a
/// local subscriber needs one, started with the cluster's position, stopped after the idle
/// time. On a single node every channel is followed and none of this waits.
extension HubState {
    /// A channel a local subscriber needs now, where that subscriber stands (its resume
    /// position, if any) and who waits for it.
    struct FollowNeed {
        var key: ChannelKey
        var after: ChannelPosition?
        var waiter: EventLoopPromise<Bool>?
    }

    /// Local subscribers need these channels' messages (a subscribe, a resumed session): the
    /// ones not followed yet are asked for (`HubAction.follow`), and their requests wait;
    /// returns whether every one is followed already (then nobody waits and no waiter is kept).
    mutating func needFollowing(_ needs: [FollowNeed]) -> (ready: Bool, [HubAction]) {
        // A single node follows every channel (`ChannelInterest.isFollowed`): always ready.
        guard needs.contains(where: { !interest.isFollowed($0.key) }) else {
            for need in needs { _ = interest.need(need.key, waiter: nil) }   // in use again
            let waiters = needs.compactMap(\.waiter)
            return (true, waiters.isEmpty ? [] : [.answerFollow(waiters, true)])
        }
        var follows: [BackplaneFollow] = []
        var ready: [EventLoopPromise<Bool>] = []
        for need in needs {
            switch interest.need(need.key, waiter: need.waiter) {
            case .ready:
                if let waiter = need.waiter { ready.append(waiter) }
            case .wait(let generation?):
                let replayMax = channels[need.key]?.replayMax ?? channels.newChannel(need.key).replayMax
                follows.append(BackplaneFollow(appId: need.key.appId, channel: need.key.name, generation: generation,
                                               after: need.after, replayMax: replayMax))
            case .wait(nil):
                break
            }
        }
        var actions: [HubAction] = []
        if !ready.isEmpty { actions.append(.answerFollow(ready, true)) }
        if !follows.isEmpty { actions.append(.follow(follows)) }
        return (false, actions)
    }

    /// The backplane reports where a channel followed from now on stands: it takes that
    /// position (and the messages after a resuming subscriber's, for replay), and its waiting
    /// requests go on. A channel that already has subscribers here (a follow tried again after
    /// a failure) keeps its position instead: what they missed comes back as `messages` to
    /// apply and deliver, after `gap` for what the start did not bring.
    mutating func followStarted(_ start: BackplaneFollowStart, nowMillis: Int64)
        -> (waiters: [EventLoopPromise<Bool>], gap: BackplaneGap?, messages: [BackplaneMessage]) {
        let key = ChannelKey(appId: start.appId, name: start.channel)
        let waiters = interest.started(key)
        var state = channels.take(key)
        defer {
            channels.put(state, for: key)
            channels.pruneIfUnused(key)
        }
        guard state.loops != 0 else {
            state.epoch = start.epoch
            state.seq = start.seq
            state.recent = Deque(start.recent.suffix(state.replayMax).map {
                RecentMessage(seq: $0.seq, millis: $0.millis, publisher: $0.publisher, customType: $0.customType, isText: $0.isText,
                              payload: $0.payload)
            })
            trim(&state, nowMillis: nowMillis)
            return (waiters, nil, [])
        }
        guard state.epoch == start.epoch else {
            return (waiters, BackplaneGap(appId: key.appId, channel: key.name, epoch: start.epoch, from: 1, to: 0), start.recent)
        }
        guard state.seq < start.seq else { return (waiters, nil, []) }
        let missed = start.recent.filter { $0.seq > state.seq }
        let firstBrought = missed.first?.seq ?? start.seq + 1
        let gap = firstBrought > state.seq + 1
            ? BackplaneGap(appId: key.appId, channel: key.name, epoch: start.epoch, from: state.seq + 1, to: firstBrought - 1) : nil
        return (waiters, gap, missed)
    }

    /// The backplane could not start these follows (the database could not be read): their
    /// requests are answered `false`; a channel that has subscribers here anyway (a resumed
    /// session's) is asked for again after `clusterFollowRetryInterval`.
    mutating func followFailed(_ follows: [BackplaneFollow], now: NIODeadline) -> [HubAction] {
        var waiters: [EventLoopPromise<Bool>] = []
        var actions: [HubAction] = []
        for follow in follows {
            let key = ChannelKey(appId: follow.appId, name: follow.channel)
            guard let failed = interest.failed(key, generation: follow.generation) else { continue }
            waiters += failed
            if (channels[key]?.loops ?? 0) != 0 { actions.append(.schedule(.followRetry(key), at: now + timing.followRetryInterval)) }
        }
        if !waiters.isEmpty { actions.insert(.answerFollow(waiters, false), at: 0) }
        return actions
    }

    /// A failed follow's retry is due: asked for again if the channel still has subscribers
    /// here and is not followed, from where they stand.
    mutating func followRetryDue(_ key: ChannelKey) -> [HubAction] {
        guard let state = channels[key], state.loops != 0, !interest.isFollowed(key) else { return [] }
        return needFollowing([FollowNeed(key: key, after: ChannelPosition(epoch: state.epoch, seq: state.seq))]).1
    }

    /// The sweep: channels without a local subscriber for the idle time (the replay window)
    /// stop being followed; their replay buffers go (they would not be kept up to date).
    mutating func sweepInterest(nowMillis: Int64) -> [HubAction] {
        // Nothing to end on a single node: it never starts a follow.
        let ended = interest.sweep(nowMillis: nowMillis, idleMillis: channels.replayWindowMillis) { (channels[$0]?.loops ?? 0) != 0 }
        guard !ended.isEmpty else { return [] }
        for (key, _) in ended {
            channels.dropReplay(key)
        }
        return [.unfollow(ended.map { BackplaneFollow(appId: $0.0.appId, channel: $0.0.name, generation: $0.1) })]
    }
}
