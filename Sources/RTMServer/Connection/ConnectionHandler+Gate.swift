import Foundation
import NIOCore
import RTMAuth
import RTMProtocol

/// A login's, join's or renewToken's verified tokens (the gate's decision for them).
struct Credentials {
    /// When the login token's privilege ends (ms since the Unix epoch; nil: never, or the app
    /// has no certificate).
    var tokenExpiry: Int64?
    /// The capability token's grants; nil: the request carried none.
    var capabilities: Capabilities?
    /// When the capability token stops being accepted (ms; nil: never, or none).
    var capabilityExpiry: Int64?
    /// The capability token's `iat` (Unix seconds; nil: none).
    var issuedAt: UInt32?
}

/// What the gate let a request through with.
struct GatePass {
    /// A login's, join's or renewToken's verified tokens (nil for other requests).
    var credentials: Credentials?
    /// A join's access (its capability token's grants, or its user's MESSAGE session's).
    var access: SessionAccess?
    /// The authorization hook's answer, where it was asked (a login's grants, a publish's
    /// rewritten payload).
    var rewrite: HookRewrite?
}

/// The gate's outcome for one request. The rare cases are boxed, so that the common one (a
/// publish passed) is a small value on the publish fast path.
enum GateOutcome {
    /// Run the request's handler, with nothing learnt on the way.
    case passed
    /// Run the request's handler with what the gate learnt (credentials, a join's access, the
    /// hook's rewrite).
    indirect case passedWith(GatePass)
    /// Answer with this error (the request's id attached).
    case refused(RequestRefusal)
    /// Closing: no answer.
    case ignored
    /// The authorization hook must answer first: then the request is refused (deny) or runs
    /// with the pass and the answer's rewrite (allow). Everything the client sends meanwhile
    /// waits (`hold(until:)`).
    indirect case awaiting(EventLoopFuture<HookVerdict>, GatePass)
}

/// The one gate every client request passes, JSON or binary, on a MESSAGE or a STREAM
/// connection, in the same order: admission (the connection's state, the publish rate) → the
/// session's grants and the server's namespaces (`SessionAccess.refusal(for:)`; for a login, a
/// join or a renewal, its tokens) → the authorization hook, where a namespace (or the connect
/// setting) asks it → the handler. No handler checks access itself, and the hook is asked
/// nowhere else.
extension ConnectionHandler {
    /// Takes `request` through admission, the access decision and the hook. `asked`: the hook
    /// already allowed it (a held request run again). `payload`: a batched publish's payload,
    /// for the hook's question.
    func pass(_ request: ClientRequest, asked: Bool = false, payload: () -> HookQuestion.Publish? = { nil }) -> GateOutcome {
        let kind = request.kind
        // 1. Admission: the connection's state, then the publish rate (channel and user messages).
        // A batched publish is gathered only on a logged-in session, which admits it (the state
        // machine's answer, read without building it for every message).
        let batched: Bool
        if case .batchedPublish = request { batched = true } else { batched = false }
        switch batched && lifecycle.isLoggedIn ? .allowed : lifecycle.admit(kind) {
        case .allowed: break
        case .rejected(let refusal): return .refused(refusal)
        case .ignored: return .ignored
        }
        if kind == .publish || kind == .sendUser,
           !lifecycle.admitPublish(now: lifecycle.lastRead, lateness: fanout.liveness.ticks.lateness(now: lifecycle.lastRead)) {
            return .refused(lifecycle.budgets.publishRefusal)
        }
        // A run of batched publishes to one channel is decided once: the one before it passed.
        if case .batchedPublish(let channel) = request, channel == intake.passedChannel { return .passed }
        // 2. The decision: the session's grants and the namespaces; a login's, join's or
        // renewal's tokens first.
        var pass = GatePass()
        var access = self.access
        switch request {
        case .json(.login, let frame), .json(.join, let frame), .json(.renewToken, let frame):
            switch credentials(frame) {
            case .failure(let refusal): return .refused(refusal)
            case .success(let verified): pass.credentials = verified
            }
            if kind == .join {
                switch streamAccess(frame, credentials: pass.credentials!) {
                case .failure(let refusal): return .refused(refusal)
                case .success(let joined): access = joined
                }
                pass.access = access
            } else if kind == .renewToken, let refusal = olderToken(pass.credentials!) {
                return .refused(refusal)
            }
        default:
            break
        }
        if let access, let refusal = access.refusal(for: request, streamChannel: stream?.channel.name) { return .refused(refusal) }
        // 3. The app's backend, where a namespace (or the connect setting) asks it.
        guard !asked, let hook = hub.authorizationHook, let (question, mode) = hookQuestion(for: request, payload: payload) else {
            if case .batchedPublish(let channel) = request { intake.passedChannel = channel }
            return Self.passed(pass)
        }
        switch hook.cached(question) {
        case .allow(let rewrite)?:
            // A kept allow has no rewrite to apply, so a run of publishes may share it.
            if case .batchedPublish(let channel) = request { intake.passedChannel = channel }
            pass.rewrite = rewrite
            return Self.passed(pass)
        case .deny(let refusal)?:
            return .refused(refusal)
        case nil:
            return .awaiting(hook.ask(question, failure: mode, on: connection.channel.eventLoop), pass)
        }
    }

    /// `.passed` when the gate learnt nothing, else `.passedWith`.
    private static func passed(_ pass: GatePass) -> GateOutcome {
        pass.credentials == nil && pass.access == nil && pass.rewrite == nil ? .passed : .passedWith(pass)
    }

    /// The hook's question about `request` and the failure mode to ask it with; nil: the hook
    /// is not asked about it (its namespace does not say so, or the request is of a kind the
    /// hook never decides).
    private func hookQuestion(for request: ClientRequest, payload: () -> HookQuestion.Publish?) -> (HookQuestion, HookFailureMode)? {
        let namespaces = access?.namespaces ?? hub.accessRules.current.namespaces
        switch request {
        case .json(.login, let frame):
            guard let mode = hub.configuration.authorizationHook?.connect, let appId = frame.appId, let userId = frame.userId else { return nil }
            return (HookQuestion(event: .connect, appId: appId, userId: userId, address: connection.channel.remoteAddress?.ipAddress), mode)
        case .json(.join, let frame):
            guard let appId = frame.appId, let userId = frame.userId, let channel = frame.channel,
                  let mode = namespaces.hook(.subscribe, on: channel) else { return nil }
            return (HookQuestion(event: .subscribe, appId: appId, userId: userId, channel: channel, channelType: "stream"), mode)
        case .json(.subscribe, let frame):
            guard let key = lifecycle.session, let channel = frame.channel, let mode = namespaces.hook(.subscribe, on: channel) else { return nil }
            return (HookQuestion(event: .subscribe, appId: key.appId, userId: key.userId, channel: channel, channelType: "message"), mode)
        case .json(.publish, let frame):
            guard let key = lifecycle.session, let channel = frame.channel, let mode = namespaces.hook(.publish, on: channel) else { return nil }
            let body = frame.text.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: frame.data ?? Data())
            return (HookQuestion(event: .publish, appId: key.appId, userId: key.userId, channel: channel, channelType: "message",
                                 publish: .init(payload: body, isText: frame.text != nil, customType: frame.customType)), mode)
        case .batchedPublish(let channel):
            guard access?.hooksPublishes == true, let key = lifecycle.session, let mode = namespaces.hook(.publish, on: channel),
                  let publish = payload() else { return nil }
            return (HookQuestion(event: .publish, appId: key.appId, userId: key.userId, channel: channel, channelType: "message",
                                 publish: publish), mode)
        case .json, .binarySendUser, .binaryAckUser:
            return nil
        }
    }
}
