import NIOCore
import RTMProtocol

/// Call invitations (AGORA_REFERENCE §1.8): the requests (HubState+Signaling decides).
extension Hub {
    /// Runs one invitation request of `user`; returns the reply.
    func invitationRequest(_ frame: Frame, user: UserKey) -> Result<Frame, InvitationStateMachine.Refusal> {
        let now = NIODeadline.now()
        return modify { $0.invitationRequest(frame, user: user, now: now) }
    }
}
