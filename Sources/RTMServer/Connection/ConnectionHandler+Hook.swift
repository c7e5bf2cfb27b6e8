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

/// Waiting for the authorization hook's answer from the connection's side (the gate, `pass`,
/// asks it): a request the backend must decide waits for its answer, and so does everything
/// the client sent after it (the connection stops reading meanwhile), so that requests still
/// run in the client's order.
extension ConnectionHandler {
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

    /// A publish of a batch waits for the hook's `answer` (`rest`, the batch behind it, waits
    /// too): allowed, it runs first when the batch goes on (with the backend's payload, if it
    /// rewrote it); denied, it is answered with the refusal.
    func awaitHookAboutPublish(_ pending: PendingPublish, answer: EventLoopFuture<HookVerdict>, rest: ArraySlice<PendingPublish>,
                               context: ChannelHandlerContext) {
        intake.held = (intake.held ?? []) + [.publishes(rest)]
        hold(until: answer, context: context) { [self] verdict in
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
