import RTMProtocol

/// An invitation this client sent (`AgoraRtmLocalInvitation`, AGORA_REFERENCE §1.8): a snapshot.
public struct LocalInvitation: Sendable, Equatable, Identifiable {
    /// The invitation's id (chosen by the SDK; pass it to `cancelLocalInvitation`).
    public let id: String
    /// Who is invited.
    public let calleeId: String
    /// What the caller said (≤ 32 KB).
    public let content: String
    /// A channel for the call, if any (the SDK does not join it).
    public let channelId: String?
    /// Where it stands.
    public internal(set) var state: LocalInvitationState
    /// The callee's answer (accepted or refused).
    public internal(set) var response: String?
    /// Why it failed (state `failure`).
    public internal(set) var error: LocalInvitationError?
}

/// An invitation this client received (`AgoraRtmRemoteInvitation`, §1.8): a snapshot.
public struct RemoteInvitation: Sendable, Equatable, Identifiable {
    /// The invitation's id (pass it to `acceptRemoteInvitation` / `refuseRemoteInvitation`).
    public let id: String
    /// Who invites.
    public let callerId: String
    /// What the caller said.
    public let content: String
    /// A channel for the call, if any.
    public let channelId: String?
    /// Where it stands.
    public internal(set) var state: RemoteInvitationState
    /// This callee's answer, once given.
    public internal(set) var response: String?
    /// Why it failed (state `failure`).
    public internal(set) var error: RemoteInvitationError?
}

/// A call invitation changed state (the classic `AgoraRtmCallDelegate` callbacks): each state
/// is reported once, in order, however many reconnections happened.
public enum CallEvent: Sendable, Equatable {
    /// An invitation this client sent: `receivedByRemote` (`localInvitationReceivedByPeer`),
    /// `acceptedByRemote`, `refusedByRemote`, `canceled`, `failure`.
    case local(LocalInvitation)
    /// An invitation to this client: `invitationReceived` (`remoteInvitationReceived`),
    /// `accepted`, `refused`, `canceled`, `failure`.
    case remote(RemoteInvitation)
}
