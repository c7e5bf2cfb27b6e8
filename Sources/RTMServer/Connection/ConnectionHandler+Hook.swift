import Foundation
import NIOCore
import RTMProtocol

/// Something the client sent while the authorization hook was being asked: run after the
/// answer, in the order it came.
enum HeldInput {
    /// The rest of a batch of publishes, behind the one asked about.
    case publishes(ArraySlice<ConnectionHandler.PendingPublish>)
    /// What the frame decoder delivered.
    case input(ServerInbound)
}

/// The authorization hook from the connection's side (`AuthorizationHook`): a request the
/// backend must decide waits for its answer, and so does everything the client sent after it
/// (the connection stops reading meanwhile), so that requests still run in the client's order.
/// A kept decision answers at once, without waiting.
extension ConnectionHandler {
    /// Asks the hook about `question`; `then` runs with the verdict on the connection's loop: at
    /// once when the decision is kept, else when the answer comes (bounded by the hook's
    /// timeout), unless the connection has closed meanwhile. Then whatever arrived meanwhile runs.
    func askHook(_ question: HookQuestion, failure: HookFailureMode, context: ChannelHandlerContext,
                 then: @escaping (HookVerdict) -> Void) {
        guard let hook = hub.authorizationHook else { return then(.allow(nil)) }
        if let verdict = hook.cached(question) { return proceed(then, with: verdict, context: context) }
        hold(until: hook.ask(question, failure: failure, on: context.eventLoop), context: context, then: then)
    }

    /// Runs `then` with `future`'s value on the connection's loop once it comes, unless the
    /// connection has closed meanwhile; whatever the client sends until then waits (the
    /// connection stops reading) and runs after it, in order, behind anything `then` waits for
    /// in turn (a subscribe the hook allowed, waiting for its channel's position).
    func hold<Value>(until future: EventLoopFuture<Value>, context: ChannelHandlerContext, then: @escaping (Value) -> Void) {
        if intake.held == nil { intake.held = [] }
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        future.assumeIsolated().whenSuccess { [self] value in
            guard let context = self.context, lifecycle.maySend else {
                intake.held = nil
                return
            }
            proceed(then, with: value, context: context)
        }
    }

    /// Runs `then` with what was waited for, then what was held meanwhile, unless `then` waits
    /// for something in turn: the held inputs then wait behind it.
    private func proceed<Value>(_ then: (Value) -> Void, with value: Value, context: ChannelHandlerContext) {
        let waiting = intake.held
        intake.held = nil
        then(value)
        if intake.held != nil {
            intake.held?.append(contentsOf: waiting ?? [])
        } else {
            intake.held = waiting
            resumeHeld(context: context)
        }
    }

    /// Keeps `inbound` for after the answer.
    func hold(_ inbound: ServerInbound) {
        intake.held?.append(.input(inbound))
    }

    /// Runs what arrived while the hook was asked, in order, until it is done or another
    /// request must wait for the hook; then reads again.
    func resumeHeld(context: ChannelHandlerContext) {
        guard let queue = intake.held else { return }
        intake.held = nil
        for index in queue.indices {
            switch queue[index] {
            case .publishes(let rest): intake.publishes.append(contentsOf: rest)
            case .input(let inbound): process(inbound, context: context)
            }
            if intake.held != nil {   // another question: the rest waits behind it
                intake.held?.append(contentsOf: queue[(index + 1)...])
                return
            }
        }
        flushPublishes(context: context)
        guard intake.held == nil else { return }
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
    }

    /// The hook's question about a publish.
    func publishQuestion(_ publish: BinaryFrame.Publish, channel: String, key: UserKey) -> HookQuestion {
        HookQuestion(event: .publish, appId: key.appId, userId: key.userId, channel: channel, channelType: "message",
                     publish: .init(payload: publish.payload, isText: publish.isText, customType: publish.customType))
    }

    /// A publish of a batch waits for the hook (`rest`, the batch behind it, waits too): allowed,
    /// it runs first when the batch goes on (with the backend's payload, if it rewrote it);
    /// denied, it is answered with the refusal.
    func askHookAboutPublish(_ pending: PendingPublish, channel: String, rest: ArraySlice<PendingPublish>, mode: HookFailureMode,
                             key: UserKey, context: ChannelHandlerContext) {
        intake.held = (intake.held ?? []) + [.publishes(rest)]
        askHook(publishQuestion(pending.publish, channel: channel, key: key), failure: mode, context: context) { [self] verdict in
            switch verdict {
            case .deny(let refusal):
                send(.error(id: pending.publish.requestID, refusal.code, refusal.reason), context: context, operation: .publish)
            case .allow(let rewrite):
                var cleared = pending
                cleared.cleared = true
                if let payload = rewrite?.payload {
                    let limit = hub.configuration.limits.maxPayloadBytes
                    guard payload.readableBytes <= limit else {
                        return send(.error(id: pending.publish.requestID, .channelMessageLengthExceedLimitation,
                                           "the app's backend rewrote the payload to \(payload.readableBytes) bytes; the limit is \(limit)"),
                                    context: context, operation: .publish)
                    }
                    cleared.publish.payload = payload
                    cleared.publish.isText = rewrite?.payloadIsText ?? true
                }
                intake.publishes.insert(cleared, at: 0)
            }
        }
    }

    /// The hook's question about a request that `handle` runs (a subscribe, a JSON publish),
    /// with the namespace's failure mode; nil: the hook is not asked about it.
    func hookQuestion(for frame: Frame) -> (HookQuestion, HookFailureMode)? {
        guard hub.authorizationHook != nil, case .loggedIn(let key, _, _) = lifecycle.state, let channel = frame.channel else { return nil }
        let namespaces = access?.namespaces ?? hub.namespaces.current
        switch frame.type {
        case .subscribe:
            guard let mode = namespaces.hook(.subscribe, on: channel) else { return nil }
            return (HookQuestion(event: .subscribe, appId: key.appId, userId: key.userId, channel: channel, channelType: "message"), mode)
        case .publish:
            guard let mode = namespaces.hook(.publish, on: channel) else { return nil }
            let payload = frame.text.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: frame.data ?? Data())
            return (HookQuestion(event: .publish, appId: key.appId, userId: key.userId, channel: channel, channelType: "message",
                                 publish: .init(payload: payload, isText: frame.text != nil, customType: frame.customType)), mode)
        default:
            return nil
        }
    }

    /// `frame` as the backend rewrote it (a JSON publish's payload).
    static func rewritten(_ frame: Frame, _ rewrite: HookRewrite?) -> Frame {
        guard let payload = rewrite?.payload else { return frame }
        var frame = frame
        if rewrite?.payloadIsText ?? true {
            frame.text = String(decoding: payload.readableBytesView, as: UTF8.self)
            frame.data = nil
        } else {
            frame.data = Data(payload.readableBytesView)
            frame.text = nil
        }
        return frame
    }
}
