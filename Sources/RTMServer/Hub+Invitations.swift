import NIOCore
import RTMProtocol

/// Call invitations (AGORA_REFERENCE §1.8): the calls, their frames and their timers.
extension Hub {
    /// A session of `key` started or resumed (`loggedIn`), or ended: the peer status follows
    /// (§1.7); a callee that came online gets its live invitations again, and the invitations
    /// of a caller whose session ended are canceled (§1.8).
    func signalingSessionChanged(_ key: UserKey, loggedIn: Bool) {
        peerSessionChanged(key, spoke: loggedIn)
        if loggedIn {
            sendInvitationFrames(invitations.withLockedValue { $0.calleeOnline(key) })
        } else {
            for outcome in invitations.withLockedValue({ $0.callerGone(key, now: .now()) }) { perform(outcome) }
        }
    }

    /// Runs one invitation request of `user`; returns the reply.
    func invitationRequest(_ frame: Frame, user: UserKey) -> Result<Frame, InvitationStateMachine.Refusal> {
        let now = NIODeadline.now()
        let outcome: InvitationTable.Outcome
        switch frame.type {
        case .invite:
            let online: (UserKey) -> Bool = { [self] callee in connection(of: callee) != nil }
            outcome = invitations.withLockedValue { $0.invite(frame, caller: user, calleeOnline: online, now: now) }
        case .ackInvitation:
            outcome = invitations.withLockedValue { $0.acknowledge(frame.invitationId, callee: user, now: now) }
        case .acceptInvitation, .refuseInvitation:
            outcome = invitations.withLockedValue {
                $0.answer(frame.invitationId, callee: user, accept: frame.type == .acceptInvitation, response: frame.text ?? "", now: now)
            }
        case .cancelInvitation:
            outcome = invitations.withLockedValue { $0.cancel(frame.invitationId, caller: user, now: now) }
        default:
            preconditionFailure("invalid state: '\(frame.type)' is not an invitation request")
        }
        perform(outcome)
        return outcome.reply
    }

    private func perform(_ outcome: InvitationTable.Outcome) {
        sendInvitationFrames(outcome.sends)
        guard let loop = fanouts.first?.eventLoop else { return }
        if let timer = outcome.timer {
            loop.scheduleTask(deadline: timer.deadline) { [self] in
                perform(invitations.withLockedValue { $0.timerFired(timer.key, now: .now()) })
            }
        }
        if let forget = outcome.forgetAt {
            loop.scheduleTask(deadline: forget.deadline) { [self] in invitations.withLockedValue { $0.forget(forget.key) } }
        }
    }

    private func sendInvitationFrames(_ sends: [InvitationTable.Send]) {
        for send in sends {
            // Not connected: its SDK catches up after its reconnection (a resent invite or an
            // acknowledgement is answered with the invitation's state).
            if let connection = connection(of: send.user) { Self.send(send.frame, on: connection.channel) }
        }
    }
}
