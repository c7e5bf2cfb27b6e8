import NIOCore
import RTMProtocol

/// Call invitations across nodes (§1.8): every node writes its invitation events to the
/// backplane's invitation channel (`InvitationEvent.channel`) and applies everyone's in the
/// log's one order, each at its writer's time, so every node holds the same invitations and
/// outcomes; each tells its own connections. A request's reply waits for its event to come
/// back. The log is the cluster's store of invitations: a node that starts applies the
/// channel's recent history first (`replayInvitations`), then what follows live.
struct InvitationLog {
    /// The invitation channel's last number when following started: events up to it come
    /// from its history, later ones live.
    var startSeq: UInt64 = 0
    /// The history has been applied; until then live events wait in `held`.
    var replayed = false
    var held: [(seq: UInt64, event: ClusterEvent)] = []
    /// Requests whose reply waits for their event, by number.
    private var waiting: [UInt64: EventLoopPromise<InvitationReply>] = [:]
    private var lastRequest: UInt64 = 0

    /// Keeps a request's reply until its event is applied; returns its number.
    mutating func wait(_ reply: EventLoopPromise<InvitationReply>) -> UInt64 {
        lastRequest += 1
        waiting[lastRequest] = reply
        return lastRequest
    }

    /// Every reply still waiting.
    mutating func takeAll() -> [EventLoopPromise<InvitationReply>] {
        defer { waiting = [:] }
        return waiting.sorted { $0.key < $1.key }.map(\.value)
    }

    /// The reply of request `number`, if it still waits.
    mutating func take(_ number: UInt64) -> EventLoopPromise<InvitationReply>? {
        waiting.removeValue(forKey: number)
    }
}

extension HubState {
    /// Invitation events read from the log, in order (held until the history is applied).
    mutating func applyInvitationLog(_ entries: [(seq: UInt64, event: ClusterEvent)], now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        guard invitationLog.replayed else {
            invitationLog.held += entries
            return []
        }
        return entries.flatMap { applyLogged($0.event, replaying: false, now: now, wallMillis: wallMillis) }
    }

    /// The invitation channel's history at start (`ChannelBackplane.controlHistory`): applied
    /// up to where following started, without telling anyone (nobody is connected yet); then
    /// the live events that came meanwhile. The callers of the invitations still open lost
    /// their sessions if the whole cluster restarted: each has its grace window, from now, to
    /// log in again before they are canceled (as on a single node).
    mutating func replayInvitations(_ history: [(seq: UInt64, event: ClusterEvent)], now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        var actions: [HubAction] = []
        var applied = 0
        for entry in history where entry.seq <= invitationLog.startSeq {
            actions += applyLogged(entry.event, replaying: true, now: now, wallMillis: wallMillis)
            applied += 1
        }
        let clock = invitationClock(now: now, wallMillis: wallMillis)
        for (caller, window) in invitations.awaitLiveCallers(now: clock.table) {
            actions.append(.schedule(.invitationCaller(caller), at: now + window))
        }
        invitationLog.replayed = true
        let held = invitationLog.held
        invitationLog.held = []
        for entry in held where entry.seq > invitationLog.startSeq {
            actions += applyLogged(entry.event, replaying: false, now: now, wallMillis: wallMillis)
        }
        if applied > 0 {
            actions.append(.log(.info, "call invitations read back from the cluster's log",
                                ["events": "\(applied)", "open": "\(invitations.liveCount)"]))
        }
        return actions
    }

    /// Where the invitation channel stood when following started (`BackplaneEvent.positions`).
    mutating func invitationLogStarts(_ positions: BackplanePositions) {
        guard !invitationLog.replayed else { return }
        invitationLog.startSeq = positions.channels.first { $0.appId.isEmpty && $0.channel == InvitationEvent.channel }?.seq ?? 0
    }

    /// A request still waiting for the cluster after `clusterLoginTimeout`: refused, its
    /// outcome unknown (its event may yet be applied).
    mutating func invitationReplyTimedOut(_ number: UInt64) -> [HubAction] {
        guard let reply = invitationLog.take(number) else { return [] }
        let seconds = Double(timing.clusterLoginTimeout.nanoseconds) / 1e9
        return [.answerInvitation(reply, .failure(.init(
            code: .requestTimeout,
            reason: "the cluster's database did not take the request within \(seconds) s: the outcome is unknown; send it again (an invite or ackInvitation sent again is answered with where the invitation stands)")))]
    }

    /// The server stops: every request still waiting for its event is refused, its outcome
    /// unknown.
    mutating func invitationRepliesStopped() -> [HubAction] {
        invitationLog.takeAll().map { .answerInvitation($0, .failure(.init(
            code: .requestTimeout, reason: "the server stopped before the cluster took the request: the outcome is unknown; send it again"))) }
    }

    /// One event from the log: applied at its writer's time; this node tells its own
    /// connections, answers its own request, and delivers an invitation to a callee connected
    /// here that the writer could not reach.
    private mutating func applyLogged(_ logged: ClusterEvent, replaying: Bool, now: NIODeadline, wallMillis: Int64) -> [HubAction] {
        guard case .invitation(let event) = logged.kind else { return [] }
        let clock = invitationClock(now: now, wallMillis: wallMillis)
        let (reply, applied) = applyInvitation(event, at: .wall(millis: event.atMillis), clock: clock)
        var actions = applied
        if replaying { return actions.filter { !$0.isSend } }
        if logged.from == cluster.instance, let number = event.request, let promise = invitationLog.take(number) {
            actions.append(.answerInvitation(promise, reply))
        }
        if case .invite(let id, let callee, _, _, _, _) = event.op, invitations.awaitsDelivery(InvitationTable.Key(appId: event.appId, id: id)) {
            let calleeKey = UserKey(appId: event.appId, userId: callee)
            if connection(of: calleeKey) != nil { actions += invitationInput(.calleeOnline, user: calleeKey, now: now, wallMillis: wallMillis) }
        }
        return actions
    }
}

extension HubAction {
    /// A frame to one connection.
    var isSend: Bool {
        if case .send = self { true } else { false }
    }
}
