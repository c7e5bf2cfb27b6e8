/// The caller's view of a call invitation (`AgoraRtmLocalInvitationState`, AGORA_REFERENCE §1.8).
/// The raw values are the reference's; on the wire the `event` field carries `name`.
public enum LocalInvitationState: Int, Sendable, CaseIterable, WireNamedState {
    /// Created, not sent.
    case idle = 0
    /// Sent; the callee has not acknowledged it yet.
    case sentToRemote = 1
    /// The callee's SDK acknowledged it.
    case receivedByRemote = 2
    /// The callee accepted (`response` holds its answer).
    case acceptedByRemote = 3
    /// The callee refused (`response` holds its answer).
    case refusedByRemote = 4
    /// The caller canceled it.
    case canceled = 5
    /// It failed (`LocalInvitationError`).
    case failure = 6

    /// Accepted, refused, canceled or failed: nothing follows.
    public var isFinal: Bool { rawValue >= Self.acceptedByRemote.rawValue }
}

/// The callee's view of a call invitation (`AgoraRtmRemoteInvitationState`, §1.8).
public enum RemoteInvitationState: Int, Sendable, CaseIterable, WireNamedState {
    /// Nothing yet.
    case idle = 0
    /// Received from the caller.
    case invitationReceived = 1
    /// The acceptance is on its way to the caller (internal).
    case acceptSentToLocal = 2
    /// This callee refused it.
    case refused = 3
    /// This callee accepted it.
    case accepted = 4
    /// The caller canceled it.
    case canceled = 5
    /// It failed (`RemoteInvitationError`).
    case failure = 6

    /// Refused, accepted, canceled or failed: nothing follows.
    public var isFinal: Bool { rawValue >= Self.refused.rawValue }
}

/// A state carried on the wire by its case name (`"acceptedByRemote"`).
public protocol WireNamedState: CaseIterable {}

extension WireNamedState {
    /// The wire name: the case name.
    public var name: String { String(describing: self) }
    /// The state named `name` on the wire.
    public init?(name: String) {
        guard let state = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = state
    }
}

/// Why a local invitation failed (`AgoraRtmLocalInvitationErrorCode`, §1.8).
public enum LocalInvitationError: Int, Sendable, CaseIterable {
    /// No error.
    case ok = 0
    /// The callee stayed offline for 30 s after the invitation was sent.
    case remoteOffline = 1
    /// The callee was online but did not acknowledge within 30 s.
    case remoteNoResponse = 2
    /// Acknowledged, but nobody acted on it within 60 s of sending.
    case expire = 3
    /// The caller is not logged in.
    case notLoggedIn = 4
}

/// Why a remote invitation failed (`AgoraRtmRemoteInvitationErrorCode`, §1.8).
public enum RemoteInvitationError: Int, Sendable, CaseIterable {
    /// No error.
    case ok = 0
    /// This callee's SDK did not acknowledge in time (it was cut off).
    case localOffline = 1
    /// The acceptance could not reach the caller.
    case acceptFailure = 2
    /// Nobody acted on it within 60 s of sending.
    case expire = 3
}

extension FrameType {
    // MARK: call invitations (§1.8)
    /// Caller → server: send (or, after a reconnection, send again) an invitation
    /// (`invitationId`, `userId` callee, `text` content, `channel`). The reply carries the
    /// caller's current view (`event`, `text` response, `code`).
    public static let invite = FrameType(rawValue: "invite")
    /// Callee → server: the invitation arrived (`invitationId`); the reply carries the callee's
    /// current view, so it also serves to catch up after a reconnection.
    public static let ackInvitation = FrameType(rawValue: "ackInvitation")
    /// Callee → server: accept (`invitationId`, `text` response).
    public static let acceptInvitation = FrameType(rawValue: "acceptInvitation")
    /// Callee → server: refuse (`invitationId`, `text` response).
    public static let refuseInvitation = FrameType(rawValue: "refuseInvitation")
    /// Caller → server: cancel (`invitationId`).
    public static let cancelInvitation = FrameType(rawValue: "cancelInvitation")
    /// Server → caller: its invitation's state changed (`invitationId`, `event` a
    /// `LocalInvitationState` name, `userId` callee, `text` response, `code` error).
    public static let localInvitation = FrameType(rawValue: "localInvitation")
    /// Server → callee: an invitation's state changed (`invitationId`, `event` a
    /// `RemoteInvitationState` name, `userId` caller, `text` content, `channel`, `code` error).
    public static let remoteInvitation = FrameType(rawValue: "remoteInvitation")
}

extension RTMErrorCode {
    // `AgoraRtmInvitationApiCallErrorCode` N is carried as -16100 - N.
    /// The invitation call's arguments are invalid (classic 1 `InvalidArgument`).
    public static let invitationInvalidArgument = RTMErrorCode(rawValue: -16101)
    /// No such invitation was sent, or it is not this user's (classic 2 `NotStarted`).
    public static let invitationNotStarted = RTMErrorCode(rawValue: -16102)
    /// The invitation already ended: refused, canceled or failed (classic 3 `AlreadyEnd`).
    public static let invitationAlreadyEnd = RTMErrorCode(rawValue: -16103)
    /// The invitation was already accepted (classic 4 `AlreadyAccept`).
    public static let invitationAlreadyAccept = RTMErrorCode(rawValue: -16104)
    /// This invitation id was already sent, to someone else (classic 5 `AlreadySent`).
    public static let invitationAlreadySent = RTMErrorCode(rawValue: -16105)

    /// The classic `AgoraRtmInvitationApiCallErrorCode` of an invitation error, else nil.
    public var invitationAPICallCode: Int? {
        (-16105 ... -16101).contains(rawValue) ? -16100 - rawValue : nil
    }
}
