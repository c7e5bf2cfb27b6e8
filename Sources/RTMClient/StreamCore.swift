import Foundation
import NIOCore
import RTMProtocol

/// The one owner of a stream channel's state: its link machine, timers, STREAM connection,
/// requests, joined topics and topic subscriptions. Lives on the client's event loop; every
/// method must run on it. Events go out through the client's `ClientCore`.
final class StreamCore: @unchecked Sendable {
    typealias Machine = StreamLinkMachine

    let name: String
    unowned let client: ClientCore
    var loop: any EventLoop { client.loop }
    var machine: Machine
    var timers: [Machine.Timer: Scheduled<Void>] = [:]
    var connection: (attempt: UInt64, channel: (any Channel)?)?
    var joinRequestID: UInt64?
    var joinOptions = JoinChannelOptions()
    var joinWaiters: [EventLoopPromise<Frame>] = []
    var lastJoinReply: Frame?
    var requests = PendingRequests()
    /// Joined topics → options, rejoined after a reconnection.
    var topics: [String: JoinTopicOptions] = [:]
    /// Subscribed topics → users (nil: every publisher), restored after a reconnection.
    var topicSubscriptions: [String: Set<String>?] = [:]
    var tokenWarning: Scheduled<Void>?
    /// Where the STREAM connection goes: the client's current endpoint, unless set (tests
    /// route it via a proxy).
    var endpoint: ClientTransport.Endpoint {
        get { endpointOverride ?? client.endpoint }
        set { endpointOverride = newValue }
    }
    private var endpointOverride: ClientTransport.Endpoint?

    init(name: String, client: ClientCore, timing: Machine.Timing, seed: UInt64) {
        self.name = name
        self.client = client
        self.machine = Machine(timing: timing, seed: seed)
    }

    // MARK: actions

    func run(_ actions: [Machine.Action]) {
        loop.assertInEventLoop()
        for action in actions { perform(action) }
    }

    private func perform(_ action: Machine.Action) {
        switch action {
        case .open(let attempt):
            open(attempt: attempt)
        case .close(let attempt, let sendLeave):
            close(attempt: attempt, sendLeave: sendLeave)
        case .sendPing(let attempt):
            if connection?.attempt == attempt, let channel = connection?.channel {
                ClientTransport.send(Frame(type: .ping, ts: ClientCore.wallMillis), on: channel)
            }
        case .schedule(let timer, let delay):
            timers.removeValue(forKey: timer)?.cancel()
            timers[timer] = loop.scheduleTask(in: .fractionalSeconds(delay)) { [self] in
                timers[timer] = nil
                run(machine.timerFired(timer, now: .now()))
            }
        case .cancel(let timer):
            timers.removeValue(forKey: timer)?.cancel()
        case .link(let t):
            client.emit(.linkState(LinkStateEvent(
                currentState: t.current, previousState: t.previous, serviceType: .stream, operation: t.operation,
                reasonCode: t.reason, reason: t.message, affectedChannels: [name], unrestoredChannels: [],
                isResumed: false, timestamp: ClientCore.wallMillis)))
            if t.current == .idle || t.current == .failed {
                tokenWarning?.cancel()
                tokenWarning = nil
            }
        case .restoreTopics:
            restoreTopics()
            flushQueue()
        case .completeJoin(let error):
            let waiters = joinWaiters
            joinWaiters = []
            for waiter in waiters {
                if let error { waiter.fail(error) } else { waiter.succeed(lastJoinReply ?? Frame(type: .ok)) }
            }
            if error == nil { flushQueue() }
        case .failRequests(let error, let all):
            // Sent requests die with their connection (a topic message is not sent twice);
            // with `all`, queued ones too.
            PendingRequests.fail(requests.takeSent(all: all), error)
        }
    }

    // MARK: connection

    private func open(attempt: UInt64) {
        connection = (attempt, nil)
        ClientTransport.connect(
            endpoint: endpoint, eventLoop: loop,
            connectTimeout: .fractionalSeconds(client.config.connectTimeout),
            maxFrameSize: Limits().maxFrameBytes,
            onReady: { [weak self] channel in
                guard let self else { channel.close(promise: nil); return }
                self.ready(channel, attempt: attempt)
            },
            onFrame: { [weak self] frame, _ in self?.received(frame, attempt: attempt) },
            onClose: { [weak self] message in self?.closed(attempt: attempt, message: message) })
    }

    private func ready(_ channel: any Channel, attempt: UInt64) {
        guard connection?.attempt == attempt else { channel.close(promise: nil); return }
        connection = (attempt, channel)
        let id = client.takeRequestID()
        joinRequestID = id
        let join = Frame(type: .join, id: id, appId: client.config.appId, userId: client.config.userId,
                         token: joinOptions.token ?? client.token, channel: name,
                         withPresence: joinOptions.withPresence, beQuiet: joinOptions.beQuiet).with {
            $0.withMetadata = joinOptions.withMetadata ? true : nil
            $0.withLock = joinOptions.withLock ? true : nil
            $0.capability = joinOptions.capability ?? client.capability   // stream.join (PROTOCOL.md §8.1)
        }
        ClientTransport.send(join, on: channel)
    }

    private func closed(attempt: UInt64, message: String) {
        guard connection?.attempt == attempt else { return }
        connection = nil
        joinRequestID = nil
        run(machine.connectionClosed(attempt: attempt, message: message, now: .now()))
    }

    private func close(attempt: UInt64, sendLeave: Bool) {
        guard let current = connection, current.attempt == attempt else { return }
        connection = nil
        joinRequestID = nil
        guard let channel = current.channel else { return }
        if sendLeave { ClientTransport.send(Frame(type: .leave, id: client.takeRequestID(), channel: name), on: channel) }
        let deadline = loop.scheduleTask(in: .fractionalSeconds(client.config.closeTimeout)) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in deadline.cancel() }
        channel.close(mode: sendLeave ? .output : .all, promise: nil)
    }

    private func received(_ frame: Frame?, attempt: UInt64) {
        guard connection?.attempt == attempt else { return }
        run(machine.inbound(attempt: attempt))
        guard let frame else { return }
        switch frame.type {
        case .ok, .error:
            guard let id = frame.id else { return }
            if id == joinRequestID {
                joinRequestID = nil
                if frame.type == .ok {
                    lastJoinReply = frame
                    client.scheduleTokenWarning(expiresAt: frame.expiresAt, serverNow: frame.ts, channel: name)
                    run(machine.joined(attempt: attempt))
                    emitSnapshots(frame)
                } else {
                    let code = RTMErrorCode(rawValue: frame.code ?? RTMErrorCode.channelJoinFailed.rawValue)
                    run(machine.joinRejected(attempt: attempt, code: code, reason: frame.reason ?? "join rejected", now: .now()))
                }
            } else {
                if let request = requests.take(id) { PendingRequests.complete(request, with: frame) }
            }
        case .message:
            client.emit(.message(MessageEvent(channelType: .stream, channelName: name, publisher: frame.publisher ?? "",
                                              text: frame.text, data: frame.data, customType: frame.customType, seq: nil,
                                              timestamp: frame.ts ?? 0, topic: frame.topic)))
        case .presence:
            guard let kind = frame.event.flatMap(PresenceEventKind.init(rawValue:)) else { return }
            var event = PresenceEvent(kind: kind, channelName: name, userId: frame.userId ?? "", members: frame.users ?? [], timestamp: frame.ts ?? 0)
            event.channelType = .stream
            client.emit(.presence(event))
        case .topicEvent:
            guard let kind = frame.event.flatMap(TopicEventKind.init(rawValue:)) else { return }
            client.emit(.topic(TopicEvent(kind: kind, channelName: name, userId: frame.userId ?? "", topics: frame.topics ?? [], timestamp: frame.ts ?? 0)))
        case .storage:   // joined withMetadata: the channel's storage events (§2.9)
            client.receivedStorage(frame)
        case .lock:   // joined withLock: the channel's lock events
            client.receivedLock(frame)
        case .kicked:
            let reason = LinkStateChangeReason(rawValue: frame.code ?? LinkStateChangeReason.kickedOutByServer.rawValue)
            run(machine.kicked(attempt: attempt, reason: reason, message: frame.reason ?? "kicked by the server"))
        case .goAway:
            connection?.channel?.close(promise: nil)
        case .watchEnded:
            // The grants no longer allow a part of the membership: forgotten (not asked for
            // again at a rejoin), and the application told.
            switch frame.event.flatMap(WatchEndedEvent.Kind.init(rawValue:)) {
            case .metadata?: joinOptions.withMetadata = false
            case .lock?: joinOptions.withLock = false
            case .topic?: if let topic = frame.topic { topics[topic] = nil }
            default: break
            }
            client.watchEnded(frame)
        default:
            break
        }
    }

    /// On join: the presence snapshot and the topic snapshot (§2.9).
    private func emitSnapshots(_ frame: Frame) {
        var presence = PresenceEvent(kind: .snapshot, channelName: name, userId: "", members: frame.users ?? [], timestamp: frame.ts ?? 0)
        presence.channelType = .stream
        client.emit(.presence(presence))
        client.emit(.topic(TopicEvent(kind: .snapshot, channelName: name, userId: "", topics: frame.topics ?? [], timestamp: frame.ts ?? 0)))
    }

    // MARK: requests

    /// Sends a request once joined (queued while joining or rejoining).
    func request(_ frame: Frame, operation: String) -> EventLoopFuture<Frame> {
        loop.assertInEventLoop()
        let promise = loop.makePromise(of: Frame.self)
        guard machine.linkState == .connected || machine.linkState == .connecting else {
            promise.fail(RTMError(.channelNotJoined, operation: operation, "stream channel '\(name)' is not joined"))
            return promise.futureResult
        }
        let id = client.takeRequestID()
        var frame = frame
        frame.id = id
        var request = PendingRequests.Request(frame: frame, operation: operation, promise: promise)
        let timeout = client.config.requestTimeout
        request.timeout = loop.scheduleTask(in: .fractionalSeconds(timeout)) { [self] in
            guard let request = requests.remove(id) else { return }
            request.promise.fail(RTMError(.requestTimeout, operation: operation, "no reply within \(timeout) s"))
        }
        let channel = machine.linkState == .connected ? connection?.channel : nil
        if requests.admit(request, id: id, connected: channel != nil), let channel { ClientTransport.send(frame, on: channel) }
        return promise.futureResult
    }

    private func flushQueue() {
        guard machine.linkState == .connected, let channel = connection?.channel else { return }
        for frame in requests.dequeue() { ClientTransport.send(frame, on: channel) }
    }

    /// After a rejoin: the topics this client published to and the subscriptions it had.
    private func restoreTopics() {
        guard let channel = connection?.channel else { return }
        for (topic, options) in topics.sorted(by: { $0.key < $1.key }) {
            ClientTransport.send(options.frame(topic, id: client.takeRequestID(), channel: name), on: channel)
        }
        for (topic, users) in topicSubscriptions.sorted(by: { $0.key < $1.key }) {
            var frame = Frame(type: .subscribeTopic, id: client.takeRequestID(), channel: name, users: users.map { $0.sorted() })
            frame.topic = topic
            ClientTransport.send(frame, on: channel)
        }
    }

    /// Logout (K-4): the connection closes, the channel goes idle, its caches are cleared.
    func closeForLogout() {
        run(machine.leave(logout: true))
        topics = [:]
        topicSubscriptions = [:]
    }
}

/// Options of a stream channel's `join` (`AgoraRtmJoinChannelOption`).
public struct JoinChannelOptions: Sendable, Equatable {
    /// Token for this channel; nil: the client's login token.
    public var token: String?
    /// Capability token for this channel's STREAM connection; nil: the client's login one.
    public var capability: String?
    /// Receive the channel's presence events (default true).
    public var withPresence: Bool
    /// Be invisible: not listed, no join/leave events (default false).
    public var beQuiet: Bool
    /// Receive the channel's storage events, a snapshot first (default false). The channel's
    /// metadata is the one `setChannelMetadata` sets for that channel name.
    public var withMetadata: Bool
    /// Receive the channel's lock events, a snapshot first (default false).
    public var withLock: Bool

    /// Options with their defaults.
    public init(token: String? = nil, withPresence: Bool = true, beQuiet: Bool = false, withMetadata: Bool = false, withLock: Bool = false,
                capability: String? = nil) {
        self.token = token
        self.capability = capability
        self.withPresence = withPresence
        self.beQuiet = beQuiet
        self.withMetadata = withMetadata
        self.withLock = withLock
    }
}

/// Options of `joinTopic` (`AgoraRtmJoinTopicOption`).
public struct JoinTopicOptions: Sendable, Equatable {
    /// Delivery order: unordered (0, default) or ordered (1). Topic messages travel on one
    /// ordered connection here, so both are delivered in order.
    public var qos: Int
    /// Priority: highest 0, high 1, normal 4 (default), low 8.
    public var priority: Int
    /// Publisher metadata others see in topic events, ≤ 256 bytes.
    public var meta: String

    /// Options with their defaults.
    public init(qos: Int = 0, priority: Int = 4, meta: String = "") {
        self.qos = qos
        self.priority = priority
        self.meta = meta
    }

    func frame(_ topic: String, id: UInt64?, channel: String) -> Frame {
        Frame(type: .joinTopic, id: id, channel: channel).with {
            $0.topic = topic
            $0.qos = qos
            $0.priority = priority
            $0.meta = meta
        }
    }
}
