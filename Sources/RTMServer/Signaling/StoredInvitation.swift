/// One call invitation as an `InvitationStore` keeps it (AGORA_REFERENCE §1.8): who invited
/// whom, with what, when it was first sent (wall clock), where it stands and, once over, how
/// it ended and when. The server writes one after every change of an invitation and reads
/// them all back at start, so that a restart neither forgets an open invitation nor lets an
/// answered one ring again.
public struct StoredInvitation: Sendable, Equatable {
    /// Where an invitation stands.
    public enum Stage: String, Sendable, CaseIterable {
        /// Sent; the callee has not had it yet (it was offline).
        case pending
        /// Sent to the callee's connection; not acknowledged yet.
        case delivered
        /// The callee's SDK acknowledged it.
        case received
        /// The callee accepted it (final).
        case accepted
        /// The callee refused it (final).
        case refused
        /// The caller canceled it, or its session ended (final).
        case canceled
        /// It failed (final): `failure` says why.
        case failed
    }

    /// The application it belongs to.
    public var appId: String
    /// The invitation id the caller chose (unique per application).
    public var id: String
    /// The caller's user id.
    public var caller: String
    /// The callee's user id.
    public var callee: String
    /// The invitation's content.
    public var content: String
    /// The channel id of the call, if any.
    public var channel: String?
    /// When the caller first sent it, in milliseconds since the Unix epoch: every timer of the
    /// invitation counts from it, across restarts too.
    public var sentAtMillis: Int64
    /// Where it stands.
    public var stage: Stage
    /// `failed`: the caller-side error (`LocalInvitationError` raw value).
    public var failure: Int?
    /// `accepted` or `refused`: the callee's response.
    public var response: String?
    /// When it ended (final stages), in milliseconds since the Unix epoch: it is remembered
    /// for `invitationExpiry` after, then forgotten.
    public var endedAtMillis: Int64?
    /// The caller's session grace window when it sent the invitation, in milliseconds: after a
    /// server restart the caller has this long to log in again before its open invitations are
    /// canceled.
    public var callerWindowMillis: Int64
    /// Grows with every change the server makes: a store keeps the highest it has been given
    /// (writes may reach it out of order).
    public var revision: UInt64

    /// Creates a record.
    public init(appId: String, id: String, caller: String, callee: String, content: String, channel: String?,
                sentAtMillis: Int64, stage: Stage, failure: Int? = nil, response: String? = nil, endedAtMillis: Int64? = nil,
                callerWindowMillis: Int64, revision: UInt64) {
        self.appId = appId
        self.id = id
        self.caller = caller
        self.callee = callee
        self.content = content
        self.channel = channel
        self.sentAtMillis = sentAtMillis
        self.stage = stage
        self.failure = failure
        self.response = response
        self.endedAtMillis = endedAtMillis
        self.callerWindowMillis = callerWindowMillis
        self.revision = revision
    }
}
