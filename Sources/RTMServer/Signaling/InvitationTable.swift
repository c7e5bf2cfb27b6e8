import NIOCore
import RTMProtocol

/// Every live call invitation (AGORA_REFERENCE §1.8), each an `InvitationStateMachine`, and the
/// ended ones for their forget window. A plain value held under one lock by `Hub`; each call
/// returns the reply, the frames to send, the timers to arm and the changes for the store
/// (`InvitationStore`, written after the lock; InvitationTable+Stored).
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
        /// The caller's session grace window when it sent it: after a server restart, how long
        /// the caller has to log in again before its live invitations are canceled.
        let callerWindow: TimeAmount
        /// When it ended (final states): it is forgotten `timing.expire` after.
        var endedAt: NIODeadline?
        /// The revision of its last change given to the store.
        var revision: UInt64 = 0
    }

    /// A change for the store: `invitation` as it is now, or (nil) the key forgotten.
    struct Change {
        let key: Key
        let invitation: Invitation?
        /// Orders the changes of one invitation (the store keeps the highest).
        let revision: UInt64
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
        /// Changes for the store, in order.
        var stored: [Change] = []
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
    /// Callers of restored invitations whose session the server's restart cut, with the end of
    /// their window to log in again (InvitationTable+Stored).
    private(set) var awaitedCallers: [UserKey: NIODeadline] = [:]
    /// The last revision given to a change (restored: the highest stored).
    var lastRevision: UInt64 = 0

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

    /// The caller sends (or re-sends after a reconnection, or a server restart) invitation `id`;
    /// `callerWindow`: its session's grace window.
    mutating func invite(_ frame: Frame, caller: UserKey, callerWindow: TimeAmount = .zero, calleeOnline: (UserKey) -> Bool,
                         now: NIODeadline) -> Outcome {
        if let refusal = requestProblem(frame, user: caller) { return Outcome(reply: .failure(refusal)) }
        let id = frame.invitationId ?? "", calleeId = frame.userId ?? "", content = frame.text ?? ""
        let key = Key(appId: caller.appId, id: id)
        if let existing = invitations[key], let ended = existing.endedAt, ended + timing.expire <= now {
            // Past its forget time (its timer may not have fired yet): forgotten, by the
            // event's time, the same way wherever the table is applied.
            forgetNow(key)
        }
        if let existing = invitations[key] {
            guard existing.caller == caller, existing.callee.userId == calleeId else {
                return Outcome(reply: .failure(.init(code: .invitationAlreadySent, reason: "invitation '\(id)' was already sent by another caller or to another callee")))
            }
            // A resend: answered with where it stands (nothing happens twice, no timer restarts).
            return Outcome(reply: .success(callerFrame(existing, key: key, type: .ok)))
        }
        guard (byCaller[caller]?.count ?? 0) < maxLivePerCaller else {
            return Outcome(reply: .failure(.init(code: .operationRateExceedLimitation,
                                                 reason: "\(maxLivePerCaller) invitations are still open; wait for some to end")))
        }
        let callee = UserKey(appId: caller.appId, userId: calleeId)
        let machine = InvitationStateMachine(now: now, timing: timing, calleeOnline: calleeOnline(callee))
        let invitation = Invitation(caller: caller, callee: callee, content: content, channel: frame.channel, machine: machine,
                                    callerWindow: callerWindow)
        insert(invitation, key: key, live: true)
        var outcome = Outcome(reply: .success(callerFrame(invitation, key: key, type: .ok)))
        outcome.sends = sends(machine.initialNotice, invitation, key: key)
        outcome.timer = machine.deadline.map { (key, $0) }
        outcome.stored = [stamp(key)]
        return outcome
    }

    /// What is wrong with a request whatever the invitations hold (missing or invalid
    /// fields, -16101); nil when it may be applied.
    func requestProblem(_ frame: Frame, user: UserKey) -> InvitationStateMachine.Refusal? {
        func invalid(_ reason: String) -> InvitationStateMachine.Refusal { .init(code: .invitationInvalidArgument, reason: reason) }
        switch frame.type {
        case .invite:
            guard let id = frame.invitationId, !id.isEmpty, id.utf8.count <= 128 else {
                return invalid("invite needs an invitationId of 1 to 128 bytes")
            }
            guard let calleeId = frame.userId, calleeId != user.userId else {
                return invalid("invite needs a callee userId other than the caller's")
            }
            if let problem = limits.nameProblem(calleeId, kind: "the callee's userId") { return invalid(problem) }
            if let channel = frame.channel, let problem = limits.nameProblem(channel, kind: "channel") { return invalid(problem) }
            let content = frame.text ?? ""
            guard content.utf8.count <= maxContentBytes else {
                return invalid("content is \(content.utf8.count) bytes; the limit is \(maxContentBytes)")
            }
        case .acceptInvitation, .refuseInvitation:
            let response = frame.text ?? ""
            guard response.utf8.count <= maxContentBytes else {
                return invalid("response is \(response.utf8.count) bytes; the limit is \(maxContentBytes)")
            }
        default:
            break
        }
        return nil
    }

    /// Whether `user` has live invitations as the callee (`asCaller` false) or the caller.
    func hasLive(_ user: UserKey, asCaller: Bool) -> Bool {
        !((asCaller ? byCaller[user] : byCallee[user])?.isEmpty ?? true)
    }

    /// A live invitation that has not reached its callee yet.
    func awaitsDelivery(_ key: Key) -> Bool {
        invitations[key]?.machine.state == .pending(delivered: false)
    }

    /// Invitation `key`'s caller and callee.
    func parties(_ key: Key) -> (caller: UserKey, callee: UserKey)? {
        invitations[key].map { ($0.caller, $0.callee) }
    }

    /// When invitation `key`'s next timer is due (nil: unknown or ended).
    func deadline(_ key: Key) -> NIODeadline? {
        invitations[key]?.machine.deadline
    }

    /// A new session of `caller` begins: true when the caller was awaited after a restart
    /// (its invitations stay, and it is no longer awaited), false otherwise.
    mutating func takeAwaited(_ caller: UserKey) -> Bool {
        awaitedCallers.removeValue(forKey: caller) != nil
    }

    /// The window of a caller cut by a restart is over (`now` past it): it is no longer
    /// awaited, and true tells that its invitations are to be canceled.
    mutating func awaitedWindowOver(_ caller: UserKey, now: NIODeadline) -> Bool {
        guard let deadline = awaitedCallers[caller], now >= deadline else { return false }
        awaitedCallers[caller] = nil
        return true
    }

    /// The callee acknowledges (also its catch-up after a reconnection).
    mutating func acknowledge(_ id: String?, callee: UserKey, now: NIODeadline) -> Outcome {
        change(id, by: callee, asCaller: false, now: now) { machine in .success(machine.acknowledged()) }
    }

    /// The callee accepts or refuses.
    mutating func answer(_ id: String?, callee: UserKey, accept: Bool, response: String, now: NIODeadline) -> Outcome {
        if let refusal = requestProblem(Frame(type: accept ? .acceptInvitation : .refuseInvitation, text: response), user: callee) {
            return Outcome(reply: .failure(refusal))
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
        let before = invitation.machine.state
        let notice = invitation.machine.timerFired(now: now)
        return finish(notice, invitation, before: before, key: key, now: now, reply: .success(Frame(type: .ok)))
    }

    /// A user came online (logged in, or its session came back): its live invitations are
    /// delivered again.
    mutating func calleeOnline(_ callee: UserKey, now: NIODeadline) -> [Outcome] {
        (byCallee[callee] ?? []).sorted { $0.id < $1.id }.compactMap { key in
            guard var invitation = invitations[key] else { return nil }
            let before = invitation.machine.state
            let notice = invitation.machine.calleeOnline()
            return finish(notice, invitation, before: before, key: key, now: now, reply: .success(Frame(type: .ok)))
        }
    }

    /// The caller's session ended (logout, or its grace window ran out): its live invitations
    /// are canceled and their callees told (its SDK forgot them at logout anyway).
    mutating func callerGone(_ caller: UserKey, now: NIODeadline) -> [Outcome] {
        awaitedCallers[caller] = nil
        return (byCaller[caller] ?? []).sorted { $0.id < $1.id }.map { key in cancel(key.id, caller: caller, now: now) }
    }

    /// The callee's session ended (logout, or its grace window ran out; not a new login, which
    /// gets its live invitations again): its live invitations fail at once, `remoteOffline` to
    /// their callers.
    mutating func calleeGone(_ callee: UserKey, now: NIODeadline) -> [Outcome] {
        (byCallee[callee] ?? []).sorted { $0.id < $1.id }.compactMap { key in
            guard var invitation = invitations[key] else { return nil }
            let before = invitation.machine.state
            let notice = invitation.machine.calleeGone()
            return finish(notice, invitation, before: before, key: key, now: now, reply: .success(Frame(type: .ok)))
        }
    }

    /// Forgets an ended invitation (its linger time is over); returns its deletion for the store.
    mutating func forget(_ key: Key) -> Change? {
        guard let invitation = invitations[key], invitation.machine.isFinal else { return nil }
        return forgetNow(key)
    }

    @discardableResult
    private mutating func forgetNow(_ key: Key) -> Change {
        invitations[key] = nil
        lastRevision += 1
        return Change(key: key, invitation: nil, revision: lastRevision)
    }

    /// Adds an invitation (new, or restored); `live` ones are indexed by caller and callee.
    mutating func insert(_ invitation: Invitation, key: Key, live: Bool) {
        invitations[key] = invitation
        guard live else { return }
        byCallee[invitation.callee, default: []].insert(key)
        byCaller[invitation.caller, default: []].insert(key)
    }

    /// Every caller of a live invitation lost its session to a restart of the whole cluster
    /// (its log read back): each is awaited until `now` plus its grace window. Returns them
    /// with their windows.
    mutating func awaitLiveCallers(now: NIODeadline) -> [(caller: UserKey, window: TimeAmount)] {
        var windows: [UserKey: TimeAmount] = [:]
        for key in byCaller.values.joined() {
            guard let invitation = invitations[key] else { continue }
            windows[invitation.caller] = max(windows[invitation.caller] ?? .zero, invitation.callerWindow)
        }
        for (caller, window) in windows { awaitCaller(caller, until: now + window) }
        return windows.sorted { $0.key.userId < $1.key.userId }.map { (caller: $0.key, window: $0.value) }
    }

    /// Live invitations.
    var liveCount: Int { byCaller.values.reduce(0) { $0 + $1.count } }

    /// A restored invitation's caller has until `deadline` to log in again.
    mutating func awaitCaller(_ caller: UserKey, until deadline: NIODeadline) {
        awaitedCallers[caller] = max(awaitedCallers[caller] ?? deadline, deadline)
    }

    // MARK: helpers

    private mutating func change(_ id: String?, by user: UserKey, asCaller: Bool, now: NIODeadline,
                                 _ event: (inout InvitationStateMachine) -> Result<InvitationStateMachine.Notice, InvitationStateMachine.Refusal>) -> Outcome {
        let key = Key(appId: user.appId, id: id ?? "")
        guard var invitation = invitations[key], (asCaller ? invitation.caller : invitation.callee) == user else {
            return Outcome(reply: .failure(.init(code: .invitationNotStarted, reason: "no invitation '\(key.id)' \(asCaller ? "sent by" : "sent to") '\(user.userId)'")))
        }
        let deadline = invitation.machine.deadline
        let before = invitation.machine.state
        switch event(&invitation.machine) {
        case .failure(let refusal):
            return Outcome(reply: .failure(refusal))
        case .success(let notice):
            let view = asCaller ? callerFrame(invitation, key: key, type: .ok) : calleeFrame(invitation, key: key, type: .ok)
            var outcome = finish(notice, invitation, before: before, key: key, now: now, reply: .success(view))
            if let next = invitation.machine.deadline, next != deadline { outcome.timer = (key, next) }
            return outcome
        }
    }

    /// Keeps an invitation after an event (`before`: its state until then): the frames its
    /// notice sends, its forget time once it ended, and its change for the store if it changed.
    private mutating func finish(_ notice: InvitationStateMachine.Notice, _ changed: Invitation, before: InvitationStateMachine.State,
                                 key: Key, now: NIODeadline, reply: Result<Frame, InvitationStateMachine.Refusal>) -> Outcome {
        var invitation = changed
        var outcome = Outcome(reply: reply, sends: sends(notice, invitation, key: key))
        if invitation.machine.isFinal, invitation.endedAt == nil {
            invitation.endedAt = now
            if byCallee[invitation.callee]?.remove(key) != nil, byCallee[invitation.callee]?.isEmpty == true { byCallee[invitation.callee] = nil }
            byCaller[invitation.caller]?.remove(key)
            if byCaller[invitation.caller]?.isEmpty == true { byCaller[invitation.caller] = nil }
            outcome.forgetAt = (key, now + timing.expire)
        }
        invitations[key] = invitation
        if invitation.machine.state != before { outcome.stored = [stamp(key)] }
        return outcome
    }

    /// The invitation's change for the store, with the next revision.
    private mutating func stamp(_ key: Key) -> Change {
        lastRevision += 1
        invitations[key]?.revision = lastRevision
        return Change(key: key, invitation: invitations[key], revision: lastRevision)
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
