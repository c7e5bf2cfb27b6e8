import NIOCore
import RTMProtocol

/// One input of the call invitations (AGORA_REFERENCE §1.8): a party's request, a timer, or a
/// party's session coming or going. Every invitation change is decided by applying these, in
/// one order, to `InvitationTable` (`HubState.applyInvitation`).
///
/// On a single node they are applied as they happen. In a cluster every node writes them to
/// the backplane's invitation channel (`InvitationEvent.channel`) and every node applies all
/// of them in the log's one order, each with the writer's time (`atMillis`), so every node
/// holds the same invitations with the same outcomes, whichever nodes the caller and the
/// callee are on; a node tells only its own connections. The log is also where a cluster keeps
/// them: a node that starts reads the channel's recent events back (`ChannelBackplane.controlHistory`).
struct InvitationEvent: Codable, Sendable, Equatable {
    /// The invitation channel's name in the backplane's log (app id ""). User channel names
    /// cannot contain '/', so it never meets a user channel.
    static let channel = "/invitations"

    /// The application.
    var appId: String
    /// Who it is about: the caller (`invite`, `cancel`, `callerGone`), the callee
    /// (`acknowledge`, `answer`, `calleeOnline`, `calleeGone`), anyone (`timer`).
    var user: String
    var op: Op
    /// When it happened, by the writer's clock, in milliseconds since the Unix epoch: the
    /// invitations' "now" for this event on every node.
    var atMillis: Int64
    /// The writer's number for a request whose reply waits for this event to be applied.
    var request: UInt64?

    enum Op: Codable, Sendable, Equatable {
        /// `invite`; `calleeReached`: the writer has the callee's connection and delivers it.
        case invite(id: String, callee: String, content: String, channel: String?, callerWindowMillis: Int64, calleeReached: Bool)
        case acknowledge(id: String)
        case answer(id: String, accept: Bool, response: String)
        case cancel(id: String)
        /// A timer of invitation `id` fell due.
        case timer(id: String)
        /// The callee has a connection: its live invitations are delivered.
        case calleeOnline
        /// The caller's session ended: its live invitations are canceled.
        case callerGone
        /// The callee's session ended for good: its live invitations fail.
        case calleeGone
    }

    var key: UserKey { UserKey(appId: appId, userId: user) }

    /// A party's request as an event (nil: not an invitation request).
    init?(request frame: Frame, user: UserKey, callerWindow: TimeAmount, calleeReached: Bool, atMillis: Int64) {
        let id = frame.invitationId ?? ""
        let op: Op
        switch frame.type {
        case .invite:
            op = .invite(id: id, callee: frame.userId ?? "", content: frame.text ?? "", channel: frame.channel,
                         callerWindowMillis: callerWindow.nanoseconds / 1_000_000, calleeReached: calleeReached)
        case .ackInvitation: op = .acknowledge(id: id)
        case .acceptInvitation, .refuseInvitation: op = .answer(id: id, accept: frame.type == .acceptInvitation, response: frame.text ?? "")
        case .cancelInvitation: op = .cancel(id: id)
        default: return nil
        }
        self.init(appId: user.appId, user: user.userId, op: op, atMillis: atMillis)
    }

    init(appId: String, user: String, op: Op, atMillis: Int64, request: UInt64? = nil) {
        self.appId = appId
        self.user = user
        self.op = op
        self.atMillis = atMillis
        self.request = request
    }
}
