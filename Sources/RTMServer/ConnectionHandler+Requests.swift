import Foundation
import NIOCore
import NIOWebSocket
import RTMAuth
import RTMProtocol

extension ConnectionHandler {
    /// Runs one decoded request frame.
    func handle(_ frame: Frame, context: ChannelHandlerContext) {
        switch (phase, frame.type) {
        case (_, .ping):
            send(Frame(type: .pong, ts: frame.ts), context: context)
        case (.awaitingLogin, .login):
            login(frame, context: context)
        case (.awaitingLogin, _), (.ended, _):
            send(.error(id: frame.id, .notLogin, "'\(frame.type)' needs a login first"), context: context)
        case (.active(let key), .subscribe):
            subscribe(frame, key: key, context: context)
        case (.active(let key), .unsubscribe):
            unsubscribe(frame, key: key, context: context)
        case (.active(let key), .publish):
            publish(frame, key: key, context: context)
        case (.active(let key), .sendUser):
            sendUser(frame, key: key, context: context)
        case (.active(let key), .renewToken):
            renewToken(frame, key: key, context: context)
        case (.active, .logout):
            phase = .ended
            leaveAllFanout()
            hub.logout(connection)
            send(Frame(type: .ok, id: frame.id), context: context)
            closeConnection(context: context, code: .normalClosure)
        case (.active, .login):
            send(.error(id: frame.id, .duplicateOperation, "already logged in on this connection"), context: context)
        default:
            send(.error(id: frame.id, .invalidFrame, "unknown frame type '\(frame.type)'"), context: context)
        }
    }

    private func leaveAllFanout() {
        guard let appId else { return }
        for channel in localChannels { leaveFanout(channel, appId: appId) }
    }

    // MARK: login

    private func login(_ frame: Frame, context: ChannelHandlerContext) {
        let config = hub.configuration
        guard let appId = frame.appId, let userId = frame.userId else {
            send(.error(id: frame.id, .invalidParameter, "login needs appId and userId"), context: context)
            return
        }
        guard let entry = config.apps[appId] else {
            send(.error(id: frame.id, .invalidAppId, "unknown app id '\(appId)'"), context: context)
            return
        }
        if let problem = config.limits.nameProblem(userId, kind: "userId") {
            send(.error(id: frame.id, .invalidUserId, problem), context: context)
            return
        }
        if let certificate = entry {
            let now = UInt32(clamping: Int(Date().timeIntervalSince1970))
            do {
                _ = try AccessToken006.verifyRTMToken(frame.token ?? "", appId: appId, appCertificate: certificate, userId: userId, now: now)
            } catch {
                let code: RTMErrorCode = error.kind == .expired ? .tokenExpired : .invalidToken
                send(.error(id: frame.id, code, "token rejected: \(error.reason)"), context: context)
                return
            }
        }
        let heartbeat = (frame.heartbeatInterval ?? 5).clamped(to: config.heartbeatRange)
        let presence = (frame.presenceTimeout ?? 15).clamped(to: config.presenceTimeoutRange)
        let key = UserKey(appId: appId, userId: userId)
        switch hub.login(key: key, connection: connection, resumeToken: frame.resumeToken,
                         heartbeat: .fractionalSeconds(heartbeat), presenceTimeout: .fractionalSeconds(presence)) {
        case .rejected(let code, let reason):
            send(.error(id: frame.id, code, reason), context: context)
        case .admitted(let admission):
            self.appId = appId
            phase = .active(key)
            for channel in admission.channels { joinFanout(channel, appId: appId) }
            // Liveness from now on follows the client's heartbeat (SPEC H-2).
            let timeout = TimeAmount.fractionalSeconds(heartbeat) + config.heartbeatSlack
            let pipeline = context.pipeline.syncOperations
            pipeline.removeHandler(name: RTMServer.idleHandlerName).assumeIsolated().whenComplete { _ in
                try? pipeline.addHandler(IdleStateHandler(readTimeout: timeout), position: .first)
            }
            send(Frame(type: .ok, id: frame.id, userId: userId, resumeToken: admission.resumeToken,
                       resumed: admission.resumed, users: admission.channels.isEmpty ? nil : admission.channels,
                       ts: Hub.wallMillis, serverTimeout: Double(timeout.nanoseconds) / 1e9), context: context)
        }
    }

    private func renewToken(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        if case let certificate?? = hub.configuration.apps[key.appId] {
            let now = UInt32(clamping: Int(Date().timeIntervalSince1970))
            do {
                _ = try AccessToken006.verifyRTMToken(frame.token ?? "", appId: key.appId, appCertificate: certificate, userId: key.userId, now: now)
            } catch {
                let code: RTMErrorCode = error.kind == .expired ? .tokenExpired : .invalidToken
                send(.error(id: frame.id, code, "token rejected: \(error.reason)"), context: context)
                return
            }
        }
        send(Frame(type: .ok, id: frame.id), context: context)
    }

    // MARK: channels

    private func subscribe(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        switch hub.subscribe(connection, channel: channel) {
        case .rejected(let code, let reason):
            send(.error(id: frame.id, code, reason), context: context)
        case .subscribed(let members, _):
            joinFanout(channel, appId: key.appId)
            send(Frame(type: .ok, id: frame.id, channel: channel, event: PresenceEventKind.snapshot.rawValue,
                       users: members, ts: Hub.wallMillis), context: context)
        }
    }

    private func unsubscribe(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        leaveFanout(channel, appId: key.appId)
        _ = hub.unsubscribe(connection, channel: channel)
        send(Frame(type: .ok, id: frame.id, channel: channel), context: context)
    }

    private func publish(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context), validPayload(frame, context: context) else { return }
        let message = Frame(type: .message, channel: channel, channelType: "message", publisher: key.userId,
                            text: frame.text, data: frame.data, customType: frame.customType, ts: Hub.wallMillis)
        let seq = hub.publish(appId: key.appId, frame: message, from: connection)
        send(Frame(type: .ok, id: frame.id, seq: seq), context: context)
    }

    private func sendUser(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let target = frame.userId else {
            send(.error(id: frame.id, .invalidParameter, "sendUser needs userId (the receiver)"), context: context)
            return
        }
        if let problem = hub.configuration.limits.nameProblem(target, kind: "userId") {
            send(.error(id: frame.id, .invalidUserId, problem), context: context)
            return
        }
        guard validPayload(frame, context: context) else { return }
        guard let receiver = hub.connection(of: UserKey(appId: key.appId, userId: target)) else {
            send(.error(id: frame.id, .channelReceiverOffline, "user '\(target)' is offline"), context: context)
            return
        }
        let message = Frame(type: .message, channel: target, channelType: "user", publisher: key.userId,
                            text: frame.text, data: frame.data, customType: frame.customType, ts: Hub.wallMillis)
        let buffer = FrameCodec.encode(message, allocator: context.channel.allocator)
        receiver.channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: buffer), promise: nil)
        send(Frame(type: .ok, id: frame.id, receiverOnline: true), context: context)
    }

    // MARK: validation

    private func validChannel(_ frame: Frame, context: ChannelHandlerContext) -> String? {
        guard let channel = frame.channel else {
            send(.error(id: frame.id, .invalidChannelName, "'\(frame.type)' needs a channel"), context: context)
            return nil
        }
        if let problem = hub.configuration.limits.nameProblem(channel, kind: "channel name") {
            send(.error(id: frame.id, .invalidChannelName, problem), context: context)
            return nil
        }
        return channel
    }

    private func validPayload(_ frame: Frame, context: ChannelHandlerContext) -> Bool {
        let limits = hub.configuration.limits
        if (frame.text == nil) == (frame.data == nil) {
            send(.error(id: frame.id, .channelInvalidMessage, "a message needs exactly one of text or data"), context: context)
            return false
        }
        if frame.payloadSize > limits.maxPayloadBytes {
            send(.error(id: frame.id, .channelMessageLengthExceedLimitation,
                        "payload is \(frame.payloadSize) bytes; the limit is \(limits.maxPayloadBytes)"), context: context)
            return false
        }
        if let type = frame.customType, type.count > limits.maxCustomTypeLength {
            send(.error(id: frame.id, .channelCustomTypeLengthOverflow,
                        "customType is longer than \(limits.maxCustomTypeLength) characters"), context: context)
            return false
        }
        guard publishLimiter.tryAcquire(now: .now()) else {
            send(.error(id: frame.id, .channelPublishMessageTooFrequent,
                        "more than \(Int(hub.configuration.publishRatePerSecond)) messages per second"), context: context)
            return false
        }
        return true
    }
}

extension Comparable {
    func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}

extension TimeAmount {
    /// A time amount from fractional seconds.
    static func fractionalSeconds(_ value: Double) -> TimeAmount { .nanoseconds(Int64(value * 1e9)) }
}
