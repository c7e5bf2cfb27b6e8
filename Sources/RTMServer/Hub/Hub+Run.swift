import NIOCore
import RTMProtocol

/// The hub's one way to change its state and act on it: an event runs under the state lock and
/// returns its actions; `run` performs them after the lock is released. These are the only
/// places that take the state lock (`read` for what only looks).
extension Hub {
    /// Reads the state under the lock; changes nothing.
    func read<Result>(_ body: (HubState) -> Result) -> Result {
        state.withLockedValue { body($0) }
    }

    /// Runs `event` on the state under the lock, and its one ordered hop (`LockedHubAction`)
    /// before the lock is released: the hops of two such events reach each loop in the order of
    /// the events. Allocates nothing (the publish hot path).
    func modify<Result>(inOrder event: (inout HubState) -> (Result, LockedHubAction?)) -> Result {
        state.withLockedValue { state in
            let (result, hop) = event(&state)
            if let hop { runLocked(hop) }
            return result
        }
    }

    /// Performs an ordered hop, under the state lock: a non-blocking hand-over to event loops.
    private func runLocked(_ action: LockedHubAction) {
        switch action {
        case .fanOut(let buffer, let messages, let channel, let loops):
            enqueueRaw(buffer, messages: messages, to: channel, loops: loops)
        case .broadcast(let broadcast):
            perform([broadcast])
        }
    }

    /// Runs `event` on the state under the lock, ends its transaction (`NodeLink`), then
    /// performs the actions they returned.
    @discardableResult
    func modify<Result>(_ event: (inout HubState) -> (Result, [HubAction])) -> Result {
        let (result, actions) = state.withLockedValue { state in
            var (result, actions) = event(&state)
            nodeLink.endTransaction(&state, actions: &actions)
            return (result, actions)
        }
        run(actions)
        return result
    }

    /// Runs `event` on the state under the lock, ends its transaction (`NodeLink`), then
    /// performs the actions they returned.
    func modify(_ event: (inout HubState) -> [HubAction]) {
        run(state.withLockedValue { state in
            var actions = event(&state)
            nodeLink.endTransaction(&state, actions: &actions)
            return actions
        })
    }

    /// Performs actions in their order. Never called under the state lock.
    func run(_ actions: [HubAction]) {
        for action in actions {
            switch action {
            case .broadcast(let broadcast):
                perform([broadcast])
            case .send(let frame, let connection):
                Self.send(frame, on: connection.channel)   // events (the hub's refusals are replies, counted where sent)
            case .kick(let connection, _, let code, let reason):
                Self.close(connection, with: Frame(type: .kicked, code: code.rawValue, reason: reason), code: .normalClosure, reason: reason)
            case .closeReplaced(let connection, let reason):
                Self.closeReplaced(connection, reason: reason)
            case .closeStreams(let user, let reason):
                closeStreams(of: user, reason: reason)
            case .schedule(let timer, let deadline, let loop):
                schedule(timer, at: deadline, loop: loop)
            case .answerLogin(let promise):
                promise.succeed()
            case .wakeCluster:
                nodeLink.wake(hub: self)
            case .wakeWebhooks:
                webhooks?.wake()
            case .lockOwner(let user, let change):
                lockOwnerChanged(user, change)
            case .trimHistory(let before):
                storage.trimHistory(olderThan: before)
            case .sweepLocks:
                sweepLocks()
            case .storeInvitation(let change):
                storeInvitation(change)
            case .answerInvitation(let promise, let reply):
                promise.succeed(reply)
            case .follow(let follows):
                nodeLink.follow(follows, hub: self)
            case .unfollow(let follows):
                nodeLink.unfollow(follows)
            case .answerFollow(let waiters, let followed):
                for waiter in waiters { waiter.succeed(followed) }
            case .log(let level, let message, let metadata):
                logger.log(level: level, message, metadata: metadata)
            }
        }
    }

    /// Hands `timer` back to the state when it is due, on event loop `loop` (an index past the
    /// last loop means the last one).
    private func schedule(_ timer: HubTimer, at deadline: NIODeadline, loop: Int) {
        guard !fanouts.isEmpty else { return }
        fanouts[min(loop, fanouts.count - 1)].eventLoop.scheduleTask(deadline: deadline) { [self] in
            let now = NIODeadline.now()
            modify { $0.timerFired(timer, now: now, wallMillis: Self.wallMillis) }
        }
    }

    /// Starts the timers that repeat for the server's life.
    func startTimers() {
        modify { state in state.periodicTimers(now: .now()) }
    }
}
