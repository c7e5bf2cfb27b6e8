import NIOCore
import RTMProtocol

/// Call invitations on the client (AGORA_REFERENCE §1.8). The server decides every outcome; the
/// SDK records what it is told (`InvitationBook`) and reports each state once.
extension ClientCore {
    /// The `invite` request of a local invitation (also resent after reconnections).
    static func inviteFrame(_ invitation: LocalInvitation) -> Frame {
        Frame(type: .invite, userId: invitation.calleeId, channel: invitation.channelId, text: invitation.content)
            .with { $0.invitationId = invitation.id }
    }

    /// A `localInvitation` frame, or the reply to `invite` / `cancelInvitation`.
    func applyLocalInvitation(_ frame: Frame) {
        if let invitation = invitations.applyLocal(frame) { emit(.call(.local(invitation))) }
    }

    /// A `remoteInvitation` frame, or the reply to `ackInvitation` / an answer. Every delivery
    /// of a live invitation is acknowledged (the caller then sees `receivedByRemote`), a repeated
    /// one too: idempotent, and it answers a caller that re-sent it to a restarted server.
    func applyRemoteInvitation(_ frame: Frame, response: String? = nil) {
        if let invitation = invitations.applyRemote(frame, response: response) { emit(.call(.remote(invitation))) }
        if frame.type == .remoteInvitation, frame.event == RemoteInvitationState.invitationReceived.name,
           let id = frame.invitationId, invitations.remote[id]?.state.isFinal == false {
            acknowledge(id)
        }
    }

    /// Sends the acknowledgement, whose reply is the callee's view now.
    private func acknowledge(_ id: String) {
        request(Frame(type: .ackInvitation).with { $0.invitationId = id }, operation: "ackInvitation", isInternal: true)
            .whenComplete { [self] result in
                switch result {
                case .success(let reply): applyRemoteInvitation(reply)
                case .failure(let error): logger.warning("acknowledging an invitation failed", metadata: ["id": "\(id)", "error": "\(error)"])
                }
            }
    }

    /// After every login: the live invitations catch up with what happened meanwhile (their
    /// requests are answered with the server's view; nothing is lost, nothing reported twice).
    func restoreInvitations() {
        for invitation in invitations.local.values where !invitation.state.isFinal {
            request(Self.inviteFrame(invitation), operation: "sendLocalInvitation", isInternal: true).whenSuccess { [self] reply in
                applyLocalInvitation(reply)
            }
        }
        for invitation in invitations.remote.values where !invitation.state.isFinal {
            acknowledge(invitation.id)
        }
    }
}
