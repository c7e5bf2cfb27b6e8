import NIOCore
import RTMProtocol

/// What an invitation request is answered with: the requester's view, or a refusal.
typealias InvitationReply = Result<Frame, InvitationStateMachine.Refusal>

/// Peer online status (§1.7) and call invitations (§1.8) as hub events: the frames they send,
/// the timers they arm and the invitation changes to store, as actions.
///
/// Every invitation change is an `InvitationEvent` applied to `InvitationTable`
/// (`applyInvitation`). On a single node an event is applied when it happens
/// (`invitationInput`); in a cluster it is written to the backplane's log and every node
/// applies it when the log brings it back (HubState+InvitationLog), so the one path decides
/// both. The table's clock is the loop's on a single node and the events' wall clock in a
/// cluster (`invitationClock`), the same on every node.
extension HubState {
    /// One instant on the invitations' clock and on the loop's, to arm timers with.
    struct InvitationClock {
        /// Now, on the table's clock.
        let table: NIODeadline
        /// Now, on the loop's clock.
        let loop: NIODeadline

        /// When a deadline of the table's clock is due on the loop's.
        func loopTime(_ deadline: NIODeadline) -> NIODeadline { loop + (deadline - table) }

        /// The loop's clock as the table's (a single node).
        static func onLoop(_ now: NIODeadline) -> InvitationClock { InvitationClock(table: now, loop: now) }
    }

    /// The invitations' clock now: the loop's on a single node, the wall clock in a cluster.
    func invitationClock(now: NIODeadline, wallMillis: Int64) -> InvitationClock {
        invitationRoute.clock(now: now, wallMillis: wallMillis)
    }

    // MARK: sessions

    /// A session of `key` started or resumed (`loggedIn`), or ended: the peer status follows
    /// (§1.7); a callee that came online gets its live invitations again, and the invitations
    /// of a caller whose session ended are canceled (§1.8).
    mutating func signalingSessionChanged(_ key: UserKey, loggedIn: Bool, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        var actions = peerSessionChanged(key, spoke: loggedIn).map { HubAction.send($0.frame, to: $0.connection) }
        if loggedIn {
            if invitations.hasLive(key, asCaller: false) { actions += invitationInput(.calleeOnline, user: key, now: now, wallMillis: wallMillis) }
        } else if invitations.hasLive(key, asCaller: true) {
            actions += invitationInput(.callerGone, user: key, now: now, wallMillis: wallMillis)
        }
        return actions
    }

    /// A new session of `key` (a login that resumed none) ends the earlier one: as
    /// `signalingSessionChanged(loggedIn: false)`, except that a caller whose session a server
    /// restart cut keeps its restored invitations (§1.8; `InvitationTable.takeAwaited`).
    mutating func signalingNewSession(_ key: UserKey, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        let actions = peerSessionChanged(key, spoke: false).map { HubAction.send($0.frame, to: $0.connection) }
        guard !invitations.takeAwaited(key), invitations.hasLive(key, asCaller: true) else { return actions }
        return actions + invitationInput(.callerGone, user: key, now: now, wallMillis: wallMillis)
    }

    /// A session of `key` ended for good (logout, grace window over, an administrator): as
    /// `signalingSessionChanged(loggedIn: false)`, and the invitations it was called with fail
    /// at once (§1.8; a new login would get them again instead).
    mutating func signalingSessionEnded(_ key: UserKey, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        var actions = signalingSessionChanged(key, loggedIn: false, now: now, wallMillis: wallMillis)
        if invitations.hasLive(key, asCaller: false) { actions += invitationInput(.calleeGone, user: key, now: now, wallMillis: wallMillis) }
        return actions
    }

    // MARK: requests

    /// One invitation request of `user`, answered through `reply`: on a single node among the
    /// actions (after the change's store write), in a cluster once its event comes back
    /// through the log, or with a refusal saying the outcome is unknown if it does not within
    /// `clusterLoginTimeout`.
    mutating func invitationRequest(_ frame: Frame, user: UserKey, now: NIODeadline, wallMillis: Int64,
                                    reply: EventLoopPromise<InvitationReply>) -> [HubAction] {
        guard invitationRoute == .logged else {
            let (answer, actions) = invitationRequest(frame, user: user, now: now)
            return actions + [.answerInvitation(reply, answer)]
        }
        if let refusal = invitations.requestProblem(frame, user: user) { return [.answerInvitation(reply, .failure(refusal))] }
        guard var event = requestEvent(frame, user: user, atMillis: wallMillis) else { preconditionFailure("invalid state: '\(frame.type)' is not an invitation request") }
        let number = invitationLog.wait(reply)
        event.request = number
        cluster.send(.invitation(event))
        return [.wakeCluster, .schedule(.invitationReply(number), at: now + timing.clusterLoginTimeout)]
    }

    /// One invitation request of `user` on a single node: the reply, and what follows.
    /// The table refuses what is invalid (`InvitationTable.requestProblem`).
    mutating func invitationRequest(_ frame: Frame, user: UserKey, now: NIODeadline) -> (reply: InvitationReply, actions: [HubAction]) {
        guard let event = requestEvent(frame, user: user, atMillis: 0) else { preconditionFailure("invalid state: '\(frame.type)' is not an invitation request") }
        return applyInvitation(event, at: now, clock: .onLoop(now))
    }

    /// A request as an event: an invite carries the caller's grace window (after a restart it
    /// has that long to come back, P-1) and whether this node delivers it to the callee now.
    private func requestEvent(_ frame: Frame, user: UserKey, atMillis: Int64) -> InvitationEvent? {
        let window = sessions[user].map { $0.heartbeat + heartbeatSlack + $0.presenceTimeout } ?? .zero
        let reached = frame.type == .invite && sessions[UserKey(appId: user.appId, userId: frame.userId ?? "")]?.connection != nil
        return InvitationEvent(request: frame, user: user, callerWindow: window, calleeReached: reached, atMillis: atMillis)
    }

    // MARK: events

    /// An invitation event of this node: applied now on a single node; in a cluster written
    /// to the log, for every node to apply in the log's order.
    mutating func invitationInput(_ op: InvitationEvent.Op, user: UserKey, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        let event = InvitationEvent(appId: user.appId, user: user.userId, op: op, atMillis: wallMillis)
        guard invitationRoute == .logged else { return applyInvitation(event, at: now, clock: .onLoop(now)).actions }
        cluster.send(.invitation(event))
        return [.wakeCluster]
    }

    /// Applies one event to the invitations at `tableNow` (the table's clock): the reply to
    /// its request, and the frames, timers and store changes that follow.
    mutating func applyInvitation(_ event: InvitationEvent, at tableNow: NIODeadline, clock: InvitationClock)
        -> (reply: InvitationReply, actions: [HubAction]) {
        let user = event.key
        let outcomes: [InvitationTable.Outcome]
        switch event.op {
        case .invite(let id, let callee, let content, let channel, let windowMillis, let reached):
            let frame = Frame(type: .invite, userId: callee, channel: channel, text: content).with { $0.invitationId = id }
            outcomes = [invitations.invite(frame, caller: user, callerWindow: .milliseconds(windowMillis), calleeOnline: { _ in reached },
                                           now: tableNow)]
        case .acknowledge(let id):
            outcomes = [invitations.acknowledge(id, callee: user, now: tableNow)]
        case .answer(let id, let accept, let response):
            outcomes = [invitations.answer(id, callee: user, accept: accept, response: response, now: tableNow)]
        case .cancel(let id):
            outcomes = [invitations.cancel(id, caller: user, now: tableNow)]
        case .timer(let id):
            outcomes = [invitations.timerFired(InvitationTable.Key(appId: event.appId, id: id), now: tableNow)]
        case .calleeOnline:
            outcomes = invitations.calleeOnline(user, now: tableNow)
        case .callerGone:
            outcomes = invitations.callerGone(user, now: tableNow)
        case .calleeGone:
            outcomes = invitations.calleeGone(user, now: tableNow)
        }
        return (outcomes.first?.reply ?? .success(Frame(type: .ok)), outcomes.flatMap { invitationActions($0, clock: clock) })
    }

    /// The invitations a restarted single node finds in its store (`now` is the loop's time of
    /// the wall-clock instant `wallMillis`): their timers, still counted from the first invite,
    /// and their callers' windows to log in again (§1.8). A cluster reads them back from its
    /// log instead (`replayInvitations`).
    mutating func restoreInvitations(_ records: [StoredInvitation], now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        let restored = invitations.restore(records, now: now, wallMillis: wallMillis)
        let clock = InvitationClock.onLoop(now)
        var actions = restored.outcomes.flatMap { invitationActions($0, clock: clock) }
        actions += restored.callerWindows.map { .schedule(.invitationCaller($0.caller), at: $0.deadline) }
        if restored.count > 0 { actions.append(.log(.info, "call invitations restored", ["count": "\(restored.count)"])) }
        return actions
    }

    // MARK: timers

    /// A timer of invitation `key` is due. In a cluster the node that has a party's session
    /// writes it to the log (every node with one, or every node when no node has either:
    /// the first applied decides, the others find it changed).
    mutating func invitationTimerFired(_ key: InvitationTable.Key, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        let clock = invitationClock(now: now, wallMillis: wallMillis)
        guard let deadline = invitations.deadline(key), let parties = invitations.parties(key) else { return [] }
        guard clock.table >= deadline else {
            // Early by a clock's step: due a little later. Far from it: a timer of an earlier state.
            return deadline - clock.table <= .milliseconds(100) ? [.schedule(.invitation(key), at: clock.loopTime(deadline))] : []
        }
        // Written by a node that has a party's session, or by every node when none has
        // (on a single node, always: nobody is elsewhere).
        let here = sessions[parties.caller] != nil || sessions[parties.callee] != nil
        let elsewhere = cluster.remote[parties.caller] != nil || cluster.remote[parties.callee] != nil
        guard here || !elsewhere else { return [] }
        return invitationInput(.timer(id: key.id), user: parties.caller, now: now, wallMillis: max(wallMillis, deadline.wallMillis))
    }

    /// The window of a caller whose session a restart cut is over: unless it logged in
    /// meanwhile (here, or on another node), its live invitations are canceled.
    mutating func invitationCallerWindowEnded(_ caller: UserKey, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        guard invitations.awaitedWindowOver(caller, now: invitationClock(now: now, wallMillis: wallMillis).table),
              sessions[caller] == nil, cluster.remote[caller] == nil, invitations.hasLive(caller, asCaller: true) else { return [] }
        return invitationInput(.callerGone, user: caller, now: now, wallMillis: wallMillis)
    }

    /// A session's connection closed without a logout, its last sign of life at `lastSeen`: it
    /// turns unreachable `threshold` after that unless it comes back first (then offline when
    /// its grace window ends, SPEC P-2).
    func peerConnectionLost(_ key: UserKey, lastSeen: NIODeadline, threshold: TimeAmount, now: NIODeadline, loop: Int) -> [HubAction] {
        guard let generation = sessionGeneration(key) else { return [] }
        return [.schedule(.peerUnreachable(key, generation: generation), at: max(now, lastSeen + threshold), loop: loop)]
    }

    /// An invitation outcome's store changes (a single node's store; a cluster's log is its
    /// store), frames and timers.
    func invitationActions(_ outcome: InvitationTable.Outcome, clock: InvitationClock) -> [HubAction] {
        var actions = invitationRoute.keepsStore ? outcome.stored.map { HubAction.storeInvitation($0) } : []
        actions += invitationSends(outcome.sends)
        if let timer = outcome.timer { actions.append(.schedule(.invitation(timer.key), at: clock.loopTime(timer.deadline))) }
        if let forget = outcome.forgetAt { actions.append(.schedule(.forgetInvitation(forget.key), at: clock.loopTime(forget.deadline))) }
        return actions
    }

    /// Frames for users: sent on their connection here. One not connected catches up after
    /// its reconnection (a resent invite or an acknowledgement is answered with the
    /// invitation's state); one connected to another node is told by that node.
    private func invitationSends(_ sends: [InvitationTable.Send]) -> [HubAction] {
        sends.compactMap { send in connection(of: send.user).map { .send(send.frame, to: $0) } }
    }
}

extension NIODeadline {
    /// A wall-clock instant (milliseconds since the Unix epoch) as a deadline: the
    /// invitations' clock in a cluster, the same on every node.
    static func wall(millis: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(max(0, millis)) * 1_000_000) }

    /// This deadline as wall-clock milliseconds (rounded up), for one made by `wall(millis:)`.
    var wallMillis: Int64 { Int64((uptimeNanoseconds + 999_999) / 1_000_000) }
}
