import NIOCore
import RTMProtocol

/// Call invitations (AGORA_REFERENCE §1.8): the requests (HubState+Signaling decides), and the
/// invitations a restart brings back: from the store on a single node, from the log in a
/// cluster.
extension Hub {
    /// Runs one invitation request of `user`. The reply, on `eventLoop`, comes once the change it
    /// made is stored (a single node's `InvitationWriter`; in a cluster, once its event is back
    /// from the log), and the frames and timers that follow the change go with it: what a
    /// party was told survives a crash. A request that changed nothing on a single node (a
    /// resend, a repeated acknowledgement, a refusal) is answered at once.
    func invitationRequest(_ frame: Frame, user: UserKey, on eventLoop: any EventLoop) -> EventLoopFuture<InvitationReply> {
        let now = NIODeadline.now()
        let promise = eventLoop.makePromise(of: InvitationReply.self)
        let actions = modify { ($0.invitationRequest(frame, user: user, now: now, wallMillis: Self.wallMillis, reply: promise), []) }
        let writes = actions.filter(\.isInvitationStore)
        guard !writes.isEmpty else {
            run(actions)
            return promise.futureResult
        }
        run(writes)
        let rest = actions.filter { !$0.isInvitationStore }
        invitationWriter.afterWrites { [self] in run(rest) }
        return promise.futureResult
    }

    /// Brings back the invitations of the last run (at start, before connections are
    /// accepted), from where the node's log keeps them (`NodeLink.restoreInvitations`).
    func restoreInvitations() async throws {
        try await nodeLink.restoreInvitations(hub: self)
    }

    /// Hands an invitation change to the store, its times converted to the wall clock.
    func storeInvitation(_ change: InvitationTable.Change) {
        if let record = change.record(now: .now(), wallMillis: Self.wallMillis) {
            invitationWriter.save(record)
        } else {
            invitationWriter.delete(appId: change.key.appId, id: change.key.id, throughRevision: change.revision)
        }
    }
}

extension HubAction {
    /// A change for the invitation store.
    var isInvitationStore: Bool {
        if case .storeInvitation = self { true } else { false }
    }
}
