import Foundation
import NIOCore
import RTMProtocol

/// Call invitations, the classic CallKit (AGORA_REFERENCE §1.8). The server decides every
/// outcome, so an invitation is never accepted twice and a cancel racing an accept ends the
/// same way on both sides; each state change arrives once as a `.call` event (and the
/// delegate's `didReceiveCallEvent`), also across reconnections of either side.
///
/// ```swift
/// let invitation = try await caller.sendLocalInvitation(calleeId: "bob", content: "video?", channelId: "call-42")
/// // bob: .call(.remote(r)) with r.state == .invitationReceived
/// try await callee.acceptRemoteInvitation(r.id, response: "on my way")
/// // caller: .call(.local(l)) with l.state == .acceptedByRemote, l.response == "on my way"
/// ```
extension RTMClient {
    /// Invites `calleeId`. Returns once the server has it (state `sentToRemote`); then events
    /// follow: `receivedByRemote` when the callee's SDK has it, `acceptedByRemote` or
    /// `refusedByRemote` with its response, or `failure`: `remoteOffline` when the callee stays
    /// offline for 30 s (it is delivered as soon as the callee logs in until then),
    /// `remoteNoResponse` when it was online but never acknowledged within 30 s, `expire` when
    /// nobody acted on it within 60 s of sending. Inviting oneself throws
    /// `invitationInvalidArgument` (-16101) without asking the server (which refuses it too).
    @discardableResult
    public func sendLocalInvitation(calleeId: String, content: String = "", channelId: String? = nil) async throws(RTMError) -> LocalInvitation {
        let operation = "sendLocalInvitation"
        if let problem = Limits().nameProblem(calleeId, kind: "calleeId") { throw RTMError(.invitationInvalidArgument, operation: operation, problem) }
        if let channelId { try check(channel: channelId, operation: operation) }
        guard calleeId != config.userId else { throw RTMError(.invitationInvalidArgument, operation: operation, "cannot invite yourself") }
        let invitation = LocalInvitation(id: Self.newInvitationID(), calleeId: calleeId, content: content, channelId: channelId,
                                         state: .sentToRemote, response: nil, error: nil)
        let core = self.core
        let future = core.loop.flatSubmit {
            core.invitations.local[invitation.id] = invitation
            return core.request(ClientCore.inviteFrame(invitation), operation: operation).map { (reply: Frame) -> LocalInvitation in
                core.applyLocalInvitation(reply)
                return core.invitations.local[invitation.id] ?? invitation
            }.flatMapErrorThrowing { (error: any Error) throws -> LocalInvitation in
                core.invitations.local[invitation.id] = nil   // never sent: nothing to follow
                throw error
            }
        }
        return try await Self.wait(future, operation: operation)
    }

    /// Cancels an invitation this client sent; the callee sees `canceled`. Fails with
    /// `invitationAlreadyAccept` / `invitationAlreadyEnd` when it was answered (or failed)
    /// first: then that outcome stands, on both sides.
    public func cancelLocalInvitation(_ id: String) async throws(RTMError) {
        try await invitationCall(.cancelInvitation, id: id, response: nil, operation: "cancelLocalInvitation")
    }

    /// Accepts an invitation to this client; the caller sees `acceptedByRemote` with
    /// `response`. Fails with `invitationAlreadyEnd` when it was canceled (or failed) first.
    public func acceptRemoteInvitation(_ id: String, response: String = "") async throws(RTMError) {
        try await invitationCall(.acceptInvitation, id: id, response: response, operation: "acceptRemoteInvitation")
    }

    /// Refuses an invitation to this client; the caller sees `refusedByRemote` with `response`.
    public func refuseRemoteInvitation(_ id: String, response: String = "") async throws(RTMError) {
        try await invitationCall(.refuseInvitation, id: id, response: response, operation: "refuseRemoteInvitation")
    }

    /// Invitations this client sent (since login), by id.
    public var localInvitations: [String: LocalInvitation] { get async { await onLoopValue { [core] in core.invitations.local } } }

    /// Invitations to this client (since login), by id.
    public var remoteInvitations: [String: RemoteInvitation] { get async { await onLoopValue { [core] in core.invitations.remote } } }

    private func invitationCall(_ type: FrameType, id: String, response: String?, operation: String) async throws(RTMError) {
        let core = self.core
        // The server checks that the invitation exists and is this user's (invitationNotStarted).
        let future: EventLoopFuture<Void> = core.loop.flatSubmit {
            core.request(Frame(type: type, text: response).with { $0.invitationId = id }, operation: operation).map { reply in
                if type == .cancelInvitation { core.applyLocalInvitation(reply) } else { core.applyRemoteInvitation(reply, response: response) }
            }
        }
        try await Self.wait(future, operation: operation)
    }

    static func newInvitationID() -> String {
        String(UInt64.random(in: 1...UInt64.max), radix: 36) + String(UInt32.random(in: 1...UInt32.max), radix: 36)
    }
}
