import NIOCore
import RTMProtocol

/// Every live call invitation (AGORA_REFERENCE §1.8), each an `InvitationStateMachine`. A plain
/// value held under one lock by `Hub`; each call returns the reply, the frames to send and the
/// timers to arm.
struct InvitationTable {
    struct Key: Hashable, Sendable {
        let appId: String
        let id: String
    }

    struct Invitation {
        let caller: UserKey
        let callee: UserKey
        let content: String
        let channel: String?
        var machine: InvitationStateMachine
    }

    /// A frame for a user (sent on its connection if it has one; otherwise it catches up when
    /// its SDK syncs after the reconnection).
    struct Send {
        let user: UserKey
        let frame: Frame
    }

    /// What a call or timer leads to.
    struct Outcome {
        var reply: Result<Frame, InvitationStateMachine.Refusal> = .success(Frame(type: .ok))
        var sends: [Send] = []
        /// Arm a timer for this invitation at this deadline.
        var timer: (key: Key, deadline: NIODeadline)?
        /// It just ended: forget it at this deadline (a late resend still gets its outcome until then).
        var forgetAt: (key: Key, deadline: NIODeadline)?
    }

    let timing: InvitationStateMachine.Timing
    let maxContentBytes: Int
    /// The name rules the callee's id and the channel follow.
    var limits = Limits()
    /// Live (not ended) invitations one caller may have at once.
    var maxLivePerCaller = 100
    private(set) var invitations: [Key: Invitation] = [:]
    /// Live invitations per callee, delivered again when it comes online.
    private var byCallee: [UserKey: Set<Key>] = [:]
    /// Live invitations per caller, canceled when its session ends.
    private var byCaller: [UserKey: Set<Key>] = [:]

    init(timing: InvitationStateMachine.Timing, maxContentBytes: Int) {
        self.timing = timing
        self.maxContentBytes = maxContentBytes
    }

    init(configuration: ServerConfiguration) {
        self.init(timing: .init(remoteOffline: configuration.invitationRemoteOfflineTimeout,
                                noResponse: configuration.invitationNoResponseTimeout, expire: configuration.invitationExpiry),
                  maxContentBytes: configuration.limits.maxPayloadBytes)
        maxLivePerCaller = configuration.invitationMaxOpenPerCaller
        limits = configuration.limits
    }

    /// The caller sends (or re-sends after a reconnection) invitation `id`.
    mutating func invite(_ frame: Frame, caller: UserKey, calleeOnline: (UserKey) -> Bool, now: NIODeadline) -> Outcome {
        guard let id = frame.invitationId, !id.isEmpty, id.utf8.count <= 128 else {
            return Outcome(reply: .failure(.init(code: .invitationInvalidArgument, reason: "invite needs an invitationId of 1 to 128 bytes")))
        }
        let key = Key(appId: caller.appId, id: id)
        if let existing = invitations[key] {
            guard existing.caller == caller, existing.callee.userId == frame.userId else {
                return Outcome(reply: .failure(.init(code: .invitationAlreadySent, reason: "invitation '\(id)' was already sent by another caller or to another callee")))
            }
            // A resend: answered with where it stands (nothing happens twice).
            return Outcome(reply: .success(callerFrame(existing, key: key, type: .ok)))
        }
        guard let calleeId = frame.userId, calleeId != caller.userId else {
            return Outcome(reply: .failure(.init(code: .invitationInvalidArgument, reason: "invite needs a callee userId other than the caller's")))
        }
        if let problem = limits.nameProblem(calleeId, kind: "the callee's userId") {
            return Outcome(reply: .failure(.init(code: .invitationInvalidArgument, reason: problem)))
        }
        if let channel = frame.channel, let problem = limits.nameProblem(channel, kind: "channel") {
            return Outcome(reply: .failure(.init(code: .invitationInvalidArgument, reason: problem)))
        }
        let content = frame.text ?? ""
        guard content.utf8.count <= maxContentBytes else {
            return Outcome(reply: .failure(.init(code: .invitationInvalidArgument, reason: "content is \(content.utf8.count) bytes; the limit is \(maxContentBytes)")))
        }
        guard (byCaller[caller]?.count ?? 0) < maxLivePerCaller else {
            return Outcome(reply: .failure(.init(code: .operationRateExceedLimitation,
                                                 reason: "\(maxLivePerCaller) invitations are still open; wait for some to end")))
        }
        let callee = UserKey(appId: caller.appId, userId: calleeId)
        let machine = InvitationStateMachine(now: now, timing: timing, calleeOnline: calleeOnline(callee))
        let invitation = Invitation(caller: caller, callee: callee, content: content, channel: frame.channel, machine: machine)
        invitations[key] = invitation
        byCallee[callee, default: []].insert(key)
        byCaller[caller, default: []].insert(key)
        var outcome = Outcome(reply: .success(callerFrame(invitation, key: key, type: .ok)))
        outcome.sends = sends(machine.initialNotice, invitation, key: key)
        outcome.timer = machine.deadline.map { (key, $0) }
        return outcome
    }

    /// The callee acknowledges (also its catch-up after a reconnection).
    mutating func acknowledge(_ id: String?, callee: UserKey, now: NIODeadline) -> Outcome {
        change(id, by: callee, asCaller: false, now: now) { machine in .success(machine.acknowledged()) }
    }

    /// The callee accepts or refuses.
    mutating func answer(_ id: String?, callee: UserKey, accept: Bool, response: String, now: NIODeadline) -> Outcome {
        guard response.utf8.count <= maxContentBytes else {
            return Outcome(reply: .failure(.init(code: .invitationInvalidArgument, reason: "response is \(response.utf8.count) bytes; the limit is \(maxContentBytes)")))
        }
        return change(id, by: callee, asCaller: false, now: now) { $0.answer(accept: accept, response: response) }
    }

    /// The caller cancels.
    mutating func cancel(_ id: String?, caller: UserKey, now: NIODeadline) -> Outcome {
        change(id, by: caller, asCaller: true, now: now) { $0.cancel() }
    }

    /// A timer of invitation `key` fired.
    mutating func timerFired(_ key: Key, now: NIODeadline) -> Outcome {
        guard var invitation = invitations[key] else { return Outcome() }
        let notice = invitation.machine.timerFired(now: now)
        invitations[key] = invitation
        return finish(notice, invitation, key: key, now: now, reply: .success(Frame(type: .ok)))
    }

    /// A user came online (logged in, or its session came back): its live invitations are
    /// delivered again.
    mutating func calleeOnline(_ callee: UserKey) -> [Send] {
        var out: [Send] = []
        for key in (byCallee[callee] ?? []).sorted(by: { $0.id < $1.id }) {
            guard var invitation = invitations[key] else { continue }
            let notice = invitation.machine.calleeOnline()
            invitations[key] = invitation
            out += sends(notice, invitation, key: key)
        }
        return out
    }

    /// The caller's session ended (logout, or its grace window ran out): its live invitations
    /// are canceled and their callees told (its SDK forgot them at logout anyway).
    mutating func callerGone(_ caller: UserKey, now: NIODeadline) -> [Outcome] {
        (byCaller[caller] ?? []).sorted { $0.id < $1.id }.map { key in cancel(key.id, caller: caller, now: now) }
    }

    /// The callee's session ended (logout, or its grace window ran out; not a new login, which
    /// gets its live invitations again): its live invitations fail at once, `remoteOffline` to
    /// their callers.
    mutating func calleeGone(_ callee: UserKey, now: NIODeadline) -> [Outcome] {
        (byCallee[callee] ?? []).sorted { $0.id < $1.id }.compactMap { key in
            guard var invitation = invitations[key] else { return nil }
            let notice = invitation.machine.calleeGone()
            invitations[key] = invitation
            return finish(notice, invitation, key: key, now: now, reply: .success(Frame(type: .ok)))
        }
    }

    /// Forgets an ended invitation (its linger time is over).
    mutating func forget(_ key: Key) {
        guard let invitation = invitations[key], invitation.machine.isFinal else { return }
        invitations[key] = nil
    }

    // MARK: helpers

    private mutating func change(_ id: String?, by user: UserKey, asCaller: Bool, now: NIODeadline,
                                 _ event: (inout InvitationStateMachine) -> Result<InvitationStateMachine.Notice, InvitationStateMachine.Refusal>) -> Outcome {
        let key = Key(appId: user.appId, id: id ?? "")
        guard var invitation = invitations[key], (asCaller ? invitation.caller : invitation.callee) == user else {
            return Outcome(reply: .failure(.init(code: .invitationNotStarted, reason: "no invitation '\(key.id)' \(asCaller ? "sent by" : "sent to") '\(user.userId)'")))
        }
        let deadline = invitation.machine.deadline
        switch event(&invitation.machine) {
        case .failure(let refusal):
            return Outcome(reply: .failure(refusal))
        case .success(let notice):
            invitations[key] = invitation
            let view = asCaller ? callerFrame(invitation, key: key, type: .ok) : calleeFrame(invitation, key: key, type: .ok)
            var outcome = finish(notice, invitation, key: key, now: now, reply: .success(view))
            if let next = invitation.machine.deadline, next != deadline { outcome.timer = (key, next) }
            return outcome
        }
    }

    private mutating func finish(_ notice: InvitationStateMachine.Notice, _ invitation: Invitation, key: Key, now: NIODeadline,
                                 reply: Result<Frame, InvitationStateMachine.Refusal>) -> Outcome {
        var outcome = Outcome(reply: reply, sends: sends(notice, invitation, key: key))
        if invitation.machine.isFinal, byCallee[invitation.callee]?.remove(key) != nil {
            if byCallee[invitation.callee]?.isEmpty == true { byCallee[invitation.callee] = nil }
            byCaller[invitation.caller]?.remove(key)
            if byCaller[invitation.caller]?.isEmpty == true { byCaller[invitation.caller] = nil }
            outcome.forgetAt = (key, now + timing.expire)
        }
        return outcome
    }

    private func sends(_ notice: InvitationStateMachine.Notice, _ invitation: Invitation, key: Key) -> [Send] {
        var out: [Send] = []
        if notice.deliver { out.append(Send(user: invitation.callee, frame: calleeFrame(invitation, key: key, type: .remoteInvitation))) }
        if let callee = notice.callee {
            var frame = calleeFrame(invitation, key: key, type: .remoteInvitation)
            frame.event = callee.state.name
            frame.code = callee.code
            out.append(Send(user: invitation.callee, frame: frame))
        }
        if let caller = notice.caller {
            var frame = callerFrame(invitation, key: key, type: .localInvitation)
            frame.event = caller.state.name
            frame.text = caller.response
            frame.code = caller.code
            out.append(Send(user: invitation.caller, frame: frame))
        }
        return out
    }

    /// The caller's view: `event` its state, `text` the response, `code` the error.
    private func callerFrame(_ invitation: Invitation, key: Key, type: FrameType) -> Frame {
        let view = invitation.machine.callerView
        return Frame(type: type, userId: invitation.callee.userId, channel: invitation.channel, text: view.response,
                     event: view.state.name, code: view.code).with { $0.invitationId = key.id }
    }

    /// The callee's view: `event` its state, `text` the content, `code` the error.
    private func calleeFrame(_ invitation: Invitation, key: Key, type: FrameType) -> Frame {
        let view = invitation.machine.calleeView
        return Frame(type: type, userId: invitation.caller.userId, channel: invitation.channel, text: invitation.content,
                     event: view.state.name, code: view.code).with { $0.invitationId = key.id }
    }
}
