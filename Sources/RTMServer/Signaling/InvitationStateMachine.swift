import NIOCore
import RTMProtocol

/// One call invitation's life on the server, which alone decides its outcome (AGORA_REFERENCE
/// §1.8): accept, refuse, cancel and the timers all go through this value under the hub's
/// lock, so the first of them wins and an invitation is never accepted twice, and a cancel
/// racing an accept has exactly one outcome, told to both sides. A plain value: events in,
/// what to tell whom out; time is passed in.
struct InvitationStateMachine: Sendable {
    /// The timers (tests shrink them).
    struct Timing: Sendable {
        /// Never delivered to an online callee this long after sending: `remoteOffline` (30 s).
        var remoteOffline: TimeAmount = .seconds(30)
        /// Delivered but not acknowledged this long after sending: `remoteNoResponse` (30 s).
        var noResponse: TimeAmount = .seconds(30)
        /// Acknowledged but neither accepted, refused nor canceled this long after sending:
        /// `expire`, on both sides (60 s).
        var expire: TimeAmount = .seconds(60)
    }

    enum State: Equatable, Sendable {
        /// Sent; the callee has not acknowledged it. `delivered`: it reached an online callee.
        case pending(delivered: Bool)
        /// The callee's SDK acknowledged it.
        case received
        case accepted(response: String)
        case refused(response: String)
        case canceled
        case failed(LocalInvitationError)
    }

    /// What one side is told: its view of the invitation now.
    struct Notice: Equatable {
        /// To the caller: its local invitation's state, with the callee's response or the error.
        var caller: (state: LocalInvitationState, response: String?, code: Int?)?
        /// To the callee: its remote invitation's state, with the error.
        var callee: (state: RemoteInvitationState, code: Int?)?
        /// The invitation (with its content) must be sent to the callee now.
        var deliver = false

        static func == (a: Notice, b: Notice) -> Bool {
            a.deliver == b.deliver && a.caller?.state == b.caller?.state && a.caller?.response == b.caller?.response
                && a.caller?.code == b.caller?.code && a.callee?.state == b.callee?.state && a.callee?.code == b.callee?.code
        }
    }

    /// A call the state does not allow, with the classic API error.
    typealias Refusal = RequestRefusal

    let sentAt: NIODeadline
    let timing: Timing
    private(set) var state: State

    /// A new invitation, sent at `now`; `calleeOnline`: the callee has a connection to deliver it on.
    init(now: NIODeadline, timing: Timing, calleeOnline: Bool) {
        sentAt = now
        self.timing = timing
        state = .pending(delivered: calleeOnline)
    }

    /// An invitation brought back from the store after a restart: first sent at `sentAt` (on
    /// this run's loop clock, so its timers still count from then), in `state`.
    init(restoring state: State, sentAt: NIODeadline, timing: Timing) {
        self.sentAt = sentAt
        self.timing = timing
        self.state = state
    }

    /// The first notice: deliver to the callee when it is online.
    var initialNotice: Notice {
        var notice = Notice()
        notice.deliver = state == .pending(delivered: true)
        return notice
    }

    /// When the next timer is due (nil once final).
    var deadline: NIODeadline? {
        switch state {
        case .pending(let delivered): sentAt + (delivered ? timing.noResponse : timing.remoteOffline)
        case .received: sentAt + timing.expire
        default: nil
        }
    }

    /// Whether nothing can change any more.
    var isFinal: Bool { deadline == nil }

    /// The caller's view now (its `invite` resent after a reconnection is answered with it).
    var callerView: (state: LocalInvitationState, response: String?, code: Int?) {
        switch state {
        case .pending: (.sentToRemote, nil, nil)
        case .received: (.receivedByRemote, nil, nil)
        case .accepted(let response): (.acceptedByRemote, response, nil)
        case .refused(let response): (.refusedByRemote, response, nil)
        case .canceled: (.canceled, nil, nil)
        case .failed(let error): (.failure, nil, error.rawValue)
        }
    }

    /// The callee's view now (its acknowledgement is answered with it).
    var calleeView: (state: RemoteInvitationState, code: Int?) {
        switch state {
        case .pending, .received: (.invitationReceived, nil)
        case .accepted: (.accepted, nil)
        case .refused: (.refused, nil)
        case .canceled: (.canceled, nil)
        case .failed(let error): (.failure, Self.calleeError(error)?.rawValue)
        }
    }

    /// The callee came online (logged in or back): deliver it again unless it is over. The
    /// callee's SDK drops what it already has (nothing twice).
    mutating func calleeOnline() -> Notice {
        switch state {
        case .pending:
            state = .pending(delivered: true)
            return Notice(deliver: true)
        case .received:
            return Notice(deliver: true)
        default:
            return Notice()
        }
    }

    /// The callee's session ended (logout, or its grace window ran out) while it could still
    /// act on the invitation: it fails at once, `remoteOffline` to the caller (who would
    /// otherwise ring until a timer). Its SDK forgot it at logout.
    mutating func calleeGone() -> Notice {
        switch state {
        case .pending, .received:
            state = .failed(.remoteOffline)
            return Notice(caller: callerView)
        default:
            return Notice()
        }
    }

    /// The callee's SDK acknowledged it: the caller hears `receivedByRemote` (once).
    mutating func acknowledged() -> Notice {
        guard case .pending = state else { return Notice() }
        state = .received
        return Notice(caller: callerView)
    }

    /// The callee accepts (`accept`) or refuses. An accept without an acknowledgement first
    /// counts as both. The caller is told.
    mutating func answer(accept: Bool, response: String) -> Result<Notice, Refusal> {
        if let refusal = endedRefusal(accept ? "accept" : "refuse") { return .failure(refusal) }
        var notice = Notice()
        state = accept ? .accepted(response: response) : .refused(response: response)
        notice.caller = callerView
        return .success(notice)
    }

    /// The caller cancels: the callee is told if it may have it.
    mutating func cancel() -> Result<Notice, Refusal> {
        if let refusal = endedRefusal("cancel") { return .failure(refusal) }
        let reachedCallee = state != .pending(delivered: false)
        state = .canceled
        var notice = Notice()
        if reachedCallee { notice.callee = calleeView }
        return .success(notice)
    }

    /// A timer fired at `now`: past the deadline, it fails (remote offline, no response or
    /// expiry), told to the caller and, when it had it, the callee. Early or stale: nothing.
    mutating func timerFired(now: NIODeadline) -> Notice {
        guard let deadline, now >= deadline else { return Notice() }
        let reachedCallee: Bool
        switch state {
        case .pending(let delivered):
            state = .failed(delivered ? .remoteNoResponse : .remoteOffline)
            reachedCallee = delivered
        default:
            state = .failed(.expire)
            reachedCallee = true
        }
        return Notice(caller: callerView, callee: reachedCallee ? calleeView : nil)
    }

    private func endedRefusal(_ call: String) -> Refusal? {
        switch state {
        case .pending, .received: nil
        case .accepted: Refusal(code: .invitationAlreadyAccept, reason: "cannot \(call): the invitation was already accepted")
        case .refused: Refusal(code: .invitationAlreadyEnd, reason: "cannot \(call): the invitation was already refused")
        case .canceled: Refusal(code: .invitationAlreadyEnd, reason: "cannot \(call): the invitation was already canceled")
        case .failed(let error): Refusal(code: .invitationAlreadyEnd, reason: "cannot \(call): the invitation already failed (\(error))")
        }
    }

    /// How the callee sees the caller-side failure.
    static func calleeError(_ error: LocalInvitationError) -> RemoteInvitationError? {
        switch error {
        case .remoteNoResponse: .localOffline
        case .expire: .expire
        default: nil
        }
    }
}
