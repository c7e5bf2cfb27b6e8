import RTMProtocol

/// The invitations a client knows: kept across reconnections, cleared on logout. States only
/// move forward (a final state is never left), so a frame that arrives twice or late changes
/// nothing: nothing is reported twice.
struct InvitationBook {
    var local: [String: LocalInvitation] = [:]
    var remote: [String: RemoteInvitation] = [:]

    /// Applies the caller's view from a frame; returns the invitation if its state moved on.
    mutating func applyLocal(_ frame: Frame) -> LocalInvitation? {
        guard let id = frame.invitationId, var invitation = local[id],
              let state = frame.event.flatMap(LocalInvitationState.init(name:)),
              !invitation.state.isFinal, state.rawValue > invitation.state.rawValue else { return nil }
        invitation.state = state
        invitation.response = frame.text ?? invitation.response
        invitation.error = frame.code.flatMap(LocalInvitationError.init(rawValue:))
        local[id] = invitation
        return invitation
    }

    /// Applies the callee's view from a frame (a new invitation is recorded); returns the
    /// invitation if it is new or its state moved on.
    mutating func applyRemote(_ frame: Frame, response: String? = nil) -> RemoteInvitation? {
        guard let id = frame.invitationId, let state = frame.event.flatMap(RemoteInvitationState.init(name:)) else { return nil }
        guard var invitation = remote[id] else {
            guard let caller = frame.userId, !state.isFinal else { return nil }   // an end of one we never had
            let invitation = RemoteInvitation(id: id, callerId: caller, content: frame.text ?? "", channelId: frame.channel,
                                              state: state, response: nil, error: nil)
            remote[id] = invitation
            return invitation
        }
        guard !invitation.state.isFinal, state.rawValue > invitation.state.rawValue else { return nil }
        invitation.state = state
        invitation.response = response ?? invitation.response
        invitation.error = frame.code.flatMap(RemoteInvitationError.init(rawValue:))
        remote[id] = invitation
        return invitation
    }
}
