import NIOCore
import RTMProtocol

/// Peer online status (§1.7) and call invitations (§1.8) as hub events: the frames they send,
/// the timers they arm and the invitation changes to store, as actions.
extension HubState {
    /// A session of `key` started or resumed (`loggedIn`), or ended: the peer status follows
    /// (§1.7); a callee that came online gets its live invitations again, and the invitations
    /// of a caller whose session ended are canceled (§1.8).
    mutating func signalingSessionChanged(_ key: UserKey, loggedIn: Bool, now: NIODeadline) -> [HubAction] {
        var actions = peerSessionChanged(key, spoke: loggedIn).map { HubAction.send($0.frame, to: $0.connection) }
        let outcomes = loggedIn ? invitations.calleeOnline(key, now: now) : invitations.callerGone(key, now: now)
        for outcome in outcomes { actions += invitationActions(outcome) }
        return actions
    }

    /// A new session of `key` (a login that resumed none) ends the earlier one: as
    /// `signalingSessionChanged(loggedIn: false)`, except that a caller whose session a server
    /// restart cut keeps its restored invitations (§1.8; `InvitationTable.callerNewSession`).
    mutating func signalingNewSession(_ key: UserKey, now: NIODeadline) -> [HubAction] {
        var actions = peerSessionChanged(key, spoke: false).map { HubAction.send($0.frame, to: $0.connection) }
        for outcome in invitations.callerNewSession(key, now: now) { actions += invitationActions(outcome) }
        return actions
    }

    /// A session of `key` ended for good (logout, grace window over, an administrator): as
    /// `signalingSessionChanged(loggedIn: false)`, and the invitations it was called with fail
    /// at once (§1.8; a new login would get them again instead).
    mutating func signalingSessionEnded(_ key: UserKey, now: NIODeadline) -> [HubAction] {
        var actions = signalingSessionChanged(key, loggedIn: false, now: now)
        for outcome in invitations.calleeGone(key, now: now) { actions += invitationActions(outcome) }
        return actions
    }

    /// One invitation request of `user`: the reply, and what follows.
    mutating func invitationRequest(_ frame: Frame, user: UserKey, now: NIODeadline)
        -> (reply: Result<Frame, InvitationStateMachine.Refusal>, actions: [HubAction]) {
        let outcome: InvitationTable.Outcome
        switch frame.type {
        case .invite:
            let sessions = self.sessions   // read while `invitations` changes (copy on write: no copy)
            // After a restart the caller has its session's grace window to come back (P-1).
            let window = sessions[user].map { $0.heartbeat + heartbeatSlack + $0.presenceTimeout } ?? .zero
            outcome = invitations.invite(frame, caller: user, callerWindow: window, calleeOnline: { sessions[$0]?.connection != nil },
                                         now: now)
        case .ackInvitation:
            outcome = invitations.acknowledge(frame.invitationId, callee: user, now: now)
        case .acceptInvitation, .refuseInvitation:
            outcome = invitations.answer(frame.invitationId, callee: user, accept: frame.type == .acceptInvitation,
                                         response: frame.text ?? "", now: now)
        case .cancelInvitation:
            outcome = invitations.cancel(frame.invitationId, caller: user, now: now)
        default:
            preconditionFailure("invalid state: '\(frame.type)' is not an invitation request")
        }
        return (outcome.reply, invitationActions(outcome))
    }

    /// The invitations a restarted server finds in its store (`now` is the loop's time of the
    /// wall-clock instant `wallMillis`): their timers, still counted from the first invite, and
    /// their callers' windows to log in again (§1.8).
    mutating func restoreInvitations(_ records: [StoredInvitation], now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        let restored = invitations.restore(records, now: now, wallMillis: wallMillis)
        var actions = restored.outcomes.flatMap { invitationActions($0) }
        actions += restored.callerWindows.map { .schedule(.invitationCaller($0.caller), at: $0.deadline) }
        if restored.count > 0 { actions.append(.log(.info, "call invitations restored", ["count": "\(restored.count)"])) }
        return actions
    }

    /// A session's connection closed without a logout, its last sign of life at `lastSeen`: it
    /// turns unreachable `threshold` after that unless it comes back first (then offline when
    /// its grace window ends, SPEC P-2).
    func peerConnectionLost(_ key: UserKey, lastSeen: NIODeadline, threshold: TimeAmount, now: NIODeadline, loop: Int) -> [HubAction] {
        guard let generation = sessionGeneration(key) else { return [] }
        return [.schedule(.peerUnreachable(key, generation: generation), at: max(now, lastSeen + threshold), loop: loop)]
    }

    /// An invitation outcome's store changes, frames and timers.
    func invitationActions(_ outcome: InvitationTable.Outcome) -> [HubAction] {
        var actions = outcome.stored.map { HubAction.storeInvitation($0) }
        actions += invitationSends(outcome.sends)
        if let timer = outcome.timer { actions.append(.schedule(.invitation(timer.key), at: timer.deadline)) }
        if let forget = outcome.forgetAt { actions.append(.schedule(.forgetInvitation(forget.key), at: forget.deadline)) }
        return actions
    }

    /// Frames for users: sent on their connection. One not connected catches up after its
    /// reconnection (a resent invite or an acknowledgement is answered with the invitation's
    /// state).
    private func invitationSends(_ sends: [InvitationTable.Send]) -> [HubAction] {
        sends.compactMap { send in connection(of: send.user).map { .send(send.frame, to: $0) } }
    }
}
