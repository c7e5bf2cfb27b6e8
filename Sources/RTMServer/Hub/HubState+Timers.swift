import NIOCore
import RTMProtocol

/// The hub's timers as events: each `HubTimer` asked for by an action comes back here when it
/// is due, with the time passed in.
extension HubState {
    /// The periods and waits of the hub's timers, from the configuration.
    struct Timing {
        /// Interval-mode presence events.
        var presenceInterval: TimeAmount
        /// Replay buffers trimmed, unused channels forgotten.
        var sweepInterval: TimeAmount
        /// History retention (nil: kept for ever), and how often it is applied.
        var historyRetention: TimeAmount?
        var historyTrimInterval: TimeAmount
        /// The locks' sweep (due locks released, waits tried again).
        var lockSweepInterval: TimeAmount
        /// Cluster mode: how long a new login's reply waits for the cluster.
        var clusterLoginTimeout: TimeAmount
        /// Cluster mode: the wait before a failed follow is tried again.
        var followRetryInterval: TimeAmount

        init(configuration: ServerConfiguration) {
            presenceInterval = max(configuration.presenceInterval, .milliseconds(10))
            // Every window's buffers are trimmed within their window (a replay trims first anyway).
            let windows = [configuration.channelReplayWindow] + configuration.namespaces.compactMap(\.replayWindow)
            sweepInterval = max(windows.min() ?? configuration.channelReplayWindow, .milliseconds(100))
            historyRetention = configuration.historyRetention
            let retention = configuration.historyRetention ?? .hours(1)
            historyTrimInterval = .nanoseconds(max(min(retention.nanoseconds / 2, TimeAmount.hours(1).nanoseconds), 50_000_000))
            lockSweepInterval = max(configuration.lockSweepInterval, .milliseconds(10))
            clusterLoginTimeout = configuration.clusterLoginTimeout
            followRetryInterval = max(configuration.clusterFollowRetryInterval, .milliseconds(10))
        }
    }

    /// The timers that repeat for the server's life, first due one period from `now` (history
    /// trimming at once).
    func periodicTimers(now: NIODeadline) -> [HubAction] {
        var actions: [HubAction] = [
            .schedule(.sweep, at: now + timing.sweepInterval, loop: 0),
            .schedule(.presenceInterval, at: now + timing.presenceInterval, loop: Int.max),
        ]
        if timing.historyRetention != nil { actions.append(.schedule(.historyTrim, at: now, loop: 0)) }
        actions.append(.schedule(.lockSweep, at: now + timing.lockSweepInterval, loop: 0))
        return actions
    }

    /// A timer is due.
    mutating func timerFired(_ timer: HubTimer, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        switch timer {
        case .grace(let grace):
            return graceTimerFired(grace, now: now, wallMillis: wallMillis)
        case .invitation(let key):
            return invitationTimerFired(key, now: now, wallMillis: wallMillis)
        case .forgetInvitation(let key):
            guard let change = invitations.forget(key), invitationRoute.keepsStore else { return [] }
            return [.storeInvitation(change)]
        case .invitationCaller(let caller):
            return invitationCallerWindowEnded(caller, now: now, wallMillis: wallMillis)
        case .invitationReply(let number):
            return invitationReplyTimedOut(number)
        case .peerUnreachable(let key, let generation):
            return peerLostThresholdPassed(key, generation: generation).map { .send($0.frame, to: $0.connection) }
        case .orphan(let orphan):
            return orphanExpired(orphan, now: now, wallMillis: wallMillis) + [.wakeCluster]
        case .clusterLogin(let session, let user):
            guard let promise = loginWaiters.removeValue(forKey: session) else { return [] }
            var actions: [HubAction] = []
            // A session that ended meanwhile (replaced, closed) waited for nothing.
            if sessions[user]?.id == session {
                actions.append(.log(.warning, "a login went ahead without the cluster's confirmation that the user's other sessions ended",
                                    ["user": "\(user.userId)", "session": "\(session)"]))
            }
            return actions + [.answerLogin(promise)]
        case .presenceInterval:
            return takeIntervalEvents(wallMillis: wallMillis).map { .broadcast($0) }
                + [.schedule(.presenceInterval, at: now + timing.presenceInterval, loop: Int.max)]
        case .followRetry(let key):
            return followRetryDue(key)
        case .sweep:
            sweep(nowMillis: wallMillis)
            return sweepInterest(nowMillis: wallMillis) + [.schedule(.sweep, at: now + timing.sweepInterval, loop: 0)]
        case .historyTrim:
            guard let retention = timing.historyRetention else { return [] }
            return [.trimHistory(olderThanMillis: wallMillis - retention.nanoseconds / 1_000_000),
                    .schedule(.historyTrim, at: now + timing.historyTrimInterval, loop: 0)]
        case .lockSweep:
            return [.sweepLocks, .schedule(.lockSweep, at: now + timing.lockSweepInterval, loop: 0)]
        }
    }

    /// A lost connection's grace window ran out: unless it came back, the session ends (P-2):
    /// members see it leave, its STREAM connections close, it is offline to peers (§1.7).
    private mutating func graceTimerFired(_ timer: GraceTimer, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        let channels = sessions[timer.key]?.channels
        let broadcasts = graceExpired(timer, wallMillis: wallMillis)
        // This timer ended it (a stale one finds it resumed, or already ended otherwise).
        let ended = channels != nil && sessions[timer.key] == nil
        var actions: [HubAction] = []
        if ended, let channels {
            webhooks.sessionEnded(timer.key, channels: channels, reason: "connectionTimeout", ts: wallMillis)
            actions.append(.wakeWebhooks)
        }
        if !broadcasts.isEmpty { actions.append(.log(.info, "presence timeout", ["user": "\(timer.key.userId)"])) }
        actions += broadcasts.map { .broadcast($0) }
        actions.append(.wakeCluster)
        if ended {
            // The STREAM connections ride on the MESSAGE session (K-3): it is over.
            actions.append(.closeStreams(timer.key, reason: "the user's session timed out"))
            actions += signalingSessionEnded(timer.key, now: now, wallMillis: wallMillis)   // offline (§1.7), its calls end (§1.8)
        }
        return actions
    }
}
