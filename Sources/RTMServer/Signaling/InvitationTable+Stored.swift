import NIOCore
import RTMProtocol

/// Call invitations to and from their store (`InvitationStore`): each change as a
/// `StoredInvitation` with wall-clock times, and the table rebuilt from them after a restart,
/// every timer still counted from the first `invite` (AGORA_REFERENCE §1.8).
extension InvitationTable {
    /// What a restart brings back: per invitation, its timer (open) or its forget time (ended),
    /// or its deletion (ended longer ago than its forget window).
    struct Restored {
        var outcomes: [Outcome] = []
        /// The callers of open invitations, with the end of their window to log in again.
        var callerWindows: [(caller: UserKey, deadline: NIODeadline)] = []
        /// Invitations brought back (open and ended).
        var count = 0
    }

    /// Rebuilds the table from the store, `now` being the loop's time of the wall-clock instant
    /// `wallMillis`. An open invitation's timers keep counting from its first `invite` (one due
    /// during the restart fires at once); an ended one is remembered for what is left of its
    /// forget window. The callers of open invitations lost their sessions to the restart, not
    /// by their own doing: each has its grace window, from now, to log in again before its
    /// invitations are canceled (`callerWindowEnded`).
    mutating func restore(_ records: [StoredInvitation], now: NIODeadline, wallMillis: Int64) -> Restored {
        var restored = Restored()
        // Elapsed wall time as loop time; a clock set back counts as no time.
        func loopTime(_ millis: Int64, atMost limit: TimeAmount) -> NIODeadline {
            now - min(.milliseconds(max(0, wallMillis - millis)), limit)
        }
        let longest = max(timing.remoteOffline, timing.noResponse, timing.expire)
        for record in records {
            lastRevision = max(lastRevision, record.revision)
            let key = Key(appId: record.appId, id: record.id)
            guard let state = Self.machineState(record) else { continue }
            var invitation = Invitation(
                caller: UserKey(appId: record.appId, userId: record.caller), callee: UserKey(appId: record.appId, userId: record.callee),
                content: record.content, channel: record.channel,
                machine: InvitationStateMachine(restoring: state, sentAt: loopTime(record.sentAtMillis, atMost: longest), timing: timing),
                callerWindow: .milliseconds(record.callerWindowMillis))
            invitation.revision = record.revision
            if invitation.machine.isFinal {
                let ended = record.endedAtMillis ?? record.sentAtMillis
                guard wallMillis - ended < timing.expire.nanoseconds / 1_000_000 else {
                    restored.outcomes.append(Outcome(stored: [Change(key: key, invitation: nil, revision: record.revision)]))
                    continue
                }
                invitation.endedAt = loopTime(ended, atMost: timing.expire)
                insert(invitation, key: key, live: false)
                restored.outcomes.append(Outcome(forgetAt: (key, (invitation.endedAt ?? now) + timing.expire)))
            } else {
                insert(invitation, key: key, live: true)
                restored.outcomes.append(Outcome(timer: invitation.machine.deadline.map { (key, $0) }))
                awaitCaller(invitation.caller, until: now + invitation.callerWindow)
            }
            restored.count += 1
        }
        restored.callerWindows = awaitedCallers.sorted { $0.key.userId < $1.key.userId }.map { (caller: $0.key, deadline: $0.value) }
        return restored
    }

    /// The state machine's state of a record; nil for a failure this version does not know.
    private static func machineState(_ record: StoredInvitation) -> InvitationStateMachine.State? {
        switch record.stage {
        case .pending: .pending(delivered: false)
        case .delivered: .pending(delivered: true)
        case .received: .received
        case .accepted: .accepted(response: record.response ?? "")
        case .refused: .refused(response: record.response ?? "")
        case .canceled: .canceled
        case .failed: record.failure.flatMap(LocalInvitationError.init(rawValue:)).map { .failed($0) }
        }
    }
}

extension InvitationTable.Change {
    /// The record to store (nil: delete the key), its times on the wall clock: `now` is the
    /// loop's time of the wall-clock instant `wallMillis`.
    func record(now: NIODeadline, wallMillis: Int64) -> StoredInvitation? {
        guard let invitation else { return nil }
        func wall(_ deadline: NIODeadline) -> Int64 { wallMillis - (now - deadline).nanoseconds / 1_000_000 }
        let (stage, failure, response): (StoredInvitation.Stage, Int?, String?) = switch invitation.machine.state {
        case .pending(let delivered): (delivered ? .delivered : .pending, nil, nil)
        case .received: (.received, nil, nil)
        case .accepted(let response): (.accepted, nil, response)
        case .refused(let response): (.refused, nil, response)
        case .canceled: (.canceled, nil, nil)
        case .failed(let error): (.failed, error.rawValue, nil)
        }
        return StoredInvitation(
            appId: key.appId, id: key.id, caller: invitation.caller.userId, callee: invitation.callee.userId,
            content: invitation.content, channel: invitation.channel, sentAtMillis: wall(invitation.machine.sentAt), stage: stage,
            failure: failure, response: response, endedAtMillis: invitation.endedAt.map(wall),
            callerWindowMillis: invitation.callerWindow.nanoseconds / 1_000_000, revision: revision)
    }
}
