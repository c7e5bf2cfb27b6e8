import NIOCore
import RTMProtocol

/// Call invitations (AGORA_REFERENCE §1.8): the requests (HubState+Signaling decides), and the
/// invitations a restart brings back from the store.
extension Hub {
    /// Runs one invitation request of `user`. The reply, on `eventLoop`, comes once the change it
    /// made is stored (`InvitationWriter`), and the frames and timers that follow the change go
    /// with it: what a party was told survives a crash. A request that changed nothing (a
    /// resend, a repeated acknowledgement, a refusal) is answered at once.
    func invitationRequest(_ frame: Frame, user: UserKey, on eventLoop: any EventLoop)
        -> EventLoopFuture<Result<Frame, InvitationStateMachine.Refusal>> {
        let now = NIODeadline.now()
        let (reply, actions) = state.withLockedValue { $0.invitationRequest(frame, user: user, now: now) }
        let writes = actions.filter(\.isInvitationStore)
        guard !writes.isEmpty else {
            run(actions)
            return eventLoop.makeSucceededFuture(reply)
        }
        run(writes)
        let rest = actions.filter { !$0.isInvitationStore }
        let promise = eventLoop.makePromise(of: Result<Frame, InvitationStateMachine.Refusal>.self)
        invitationWriter.afterWrites { [self] in
            run(rest)
            promise.succeed(reply)
        }
        return promise.futureResult
    }

    /// Loads the stored invitations into the state (at start, before connections are accepted).
    func restoreInvitations() throws {
        let records = try invitationWriter.loadAll()
        let now = NIODeadline.now(), wallMillis = Self.wallMillis
        modify { $0.restoreInvitations(records, now: now, wallMillis: wallMillis) }
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
