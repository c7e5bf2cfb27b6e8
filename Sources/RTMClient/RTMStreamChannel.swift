import Foundation
import NIOCore
import RTMProtocol

/// A stream channel (AGORA_REFERENCE §2.9): joined over its own STREAM connection (SPEC K-3),
/// with a 0.5 s heartbeat (H-3), topics to publish to and topic subscriptions. Create it with
/// `RTMClient.createStreamChannel(_:)`; `join` needs the client logged in first.
///
/// Its link-state events (serviceType `.stream`, affectedChannels `[name]`), topic events,
/// stream presence events and topic messages arrive through the client's events and delegate.
/// A lost STREAM connection is rejoined by itself (topics and subscriptions restored) for up to
/// 20 minutes, then the channel goes to failed.
///
/// ```swift
/// let game = try client.createStreamChannel("game")
/// try await game.join()
/// try await game.joinTopic("moves")
/// try await game.subscribeTopic("moves")                 // every publisher
/// try await game.publishTopicMessage(topic: "moves", message: "e2e4")
/// ```
public final class RTMStreamChannel: Sendable {
    /// The channel name.
    public let name: String
    let core: StreamCore
    private let client: RTMClient

    init(name: String, core: StreamCore, client: RTMClient) {
        self.name = name
        self.core = core
        self.client = client
    }

    /// This channel's link state (idle, connecting, connected or failed).
    public var linkState: LinkState { get async { await onLoop { [core] in core.machine.linkState } } }

    /// Joins: opens the STREAM connection. Returns the visible members (the presence snapshot).
    /// Throws `notLogin` before `login` (K-3), and on a rejected join.
    @discardableResult
    public func join(_ options: JoinChannelOptions = JoinChannelOptions()) async throws(RTMError) -> [String] {
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            guard core.client.machine.linkState != .idle, !core.client.machine.isAborted else {
                return core.loop.makeFailedFuture(RTMError(.notLogin, operation: "join",
                                                           "join needs a login first (the MESSAGE connection), SPEC K-3"))
            }
            if core.machine.linkState == .connected { return core.loop.makeSucceededFuture(core.lastJoinReply ?? Frame(type: .ok)) }
            let streams = core.client.streamChannels.values.filter { $0.machine.linkState != .idle && $0.machine.linkState != .failed }
            if streams.count >= Limits().maxStreamChannelsPerClient {
                return core.loop.makeFailedFuture(RTMError(.channelInstanceExceedLimitation, operation: "join",
                                                           "already joined \(Limits().maxStreamChannelsPerClient) stream channels, the limit"))
            }
            core.joinOptions = options
            let promise = core.loop.makePromise(of: Frame.self)
            core.joinWaiters.append(promise)
            core.run(core.machine.join())
            return promise.futureResult
        }
        return try await RTMClient.wait(future, operation: "join").users ?? []
    }

    /// Leaves: closes the STREAM connection at once; the topics and subscriptions are forgotten.
    public func leave() async {
        let core = self.core
        await onLoop {
            core.run(core.machine.leave(logout: false))
            core.topics = [:]
            core.topicSubscriptions = [:]
        }
    }

    /// Joins a topic as a publisher (≤ 8 per channel). Kept across rejoins.
    public func joinTopic(_ topic: String, options: JoinTopicOptions = JoinTopicOptions()) async throws(RTMError) {
        try check(topic: topic, operation: "joinTopic")
        guard options.meta.utf8.count <= Limits().maxTopicMetaBytes else {
            throw RTMError(.channelInvalidTopicMeta, operation: "joinTopic", "meta is \(options.meta.utf8.count) bytes; the limit is \(Limits().maxTopicMetaBytes)")
        }
        let core = self.core
        _ = try await request("joinTopic") {
            core.request(options.frame(topic, id: nil, channel: core.name), operation: "joinTopic").map { reply in
                core.topics[topic] = options
                return reply
            }
        }
    }

    /// Leaves a topic.
    public func leaveTopic(_ topic: String) async throws(RTMError) {
        try check(topic: topic, operation: "leaveTopic")
        let core = self.core
        _ = try await request("leaveTopic") {
            core.topics[topic] = nil
            return core.request(Frame(type: .leaveTopic, channel: core.name).with { $0.topic = topic }, operation: "leaveTopic")
        }
    }

    /// Publishes text to a joined topic (≤ 1 KB). Sent when joined; fails if the connection is
    /// lost before the server confirms it (a topic message is never sent twice).
    public func publishTopicMessage(topic: String, message: String, customType: String? = nil) async throws(RTMError) {
        try await publish(topic, Frame(type: .publishTopic, channel: name, text: message, customType: customType))
    }

    /// Publishes binary data to a joined topic (≤ 1 KB).
    public func publishTopicMessage(topic: String, data: Data, customType: String? = nil) async throws(RTMError) {
        try await publish(topic, Frame(type: .publishTopic, channel: name, data: data, customType: customType))
    }

    private func publish(_ topic: String, _ frame: Frame) async throws(RTMError) {
        try check(topic: topic, operation: "publishTopicMessage")
        let limits = Limits()
        if let (code, problem) = limits.payloadProblem(size: frame.payloadSize, customType: frame.customType,
                                                       maxBytes: limits.maxTopicPayloadBytes, what: "topic message") {
            throw RTMError(code, operation: "publishTopicMessage", problem)
        }
        let core = self.core
        let request = frame.with { $0.topic = topic }
        _ = try await self.request("publishTopicMessage") {
            guard core.topics[topic] != nil else {
                return core.loop.makeFailedFuture(RTMError(.channelTopicNotJoined, operation: "publishTopicMessage",
                                                           "topic '\(topic)' is not joined: joinTopic first"))
            }
            return core.request(request, operation: "publishTopicMessage")
        }
    }

    /// Receives a topic's messages from `users` (≤ 64), or from every publisher when nil.
    /// Returns the users subscribed and those refused. Kept across rejoins.
    @discardableResult
    public func subscribeTopic(_ topic: String, users: [String]? = nil) async throws(RTMError) -> (succeeded: [String], failed: [String]) {
        try check(topic: topic, operation: "subscribeTopic")
        if let users, users.count > Limits().maxTopicUsers {
            throw RTMError(.channelExceedTopicUserLimitation, operation: "subscribeTopic", "\(users.count) users; the limit is \(Limits().maxTopicUsers)")
        }
        let core = self.core
        let reply = try await request("subscribeTopic") {
            core.request(Frame(type: .subscribeTopic, channel: core.name, users: users).with { $0.topic = topic }, operation: "subscribeTopic")
                .map { reply in
                    if let users {
                        let current: Set<String> = (core.topicSubscriptions[topic] ?? nil) ?? []
                        core.topicSubscriptions[topic] = .some(current.union(reply.users ?? users))
                    } else {
                        core.topicSubscriptions[topic] = .some(nil)
                    }
                    return reply
                }
        }
        return (reply.users ?? [], reply.failed ?? [])
    }

    /// Stops receiving a topic (from `users`, or entirely when nil).
    public func unsubscribeTopic(_ topic: String, users: [String]? = nil) async throws(RTMError) {
        try check(topic: topic, operation: "unsubscribeTopic")
        let core = self.core
        _ = try await request("unsubscribeTopic") {
            if let users, case .some(.some(var set)) = core.topicSubscriptions[topic] {
                set.subtract(users)
                core.topicSubscriptions[topic] = set.isEmpty ? nil : .some(set)
            } else {
                core.topicSubscriptions[topic] = nil
            }
            return core.request(Frame(type: .unsubscribeTopic, channel: core.name, users: users).with { $0.topic = topic }, operation: "unsubscribeTopic")
        }
    }

    /// The topics this client joined, and those it subscribed to.
    public var topics: (joined: [String], subscribed: [String]) {
        get async {
            await onLoop { [core] in (core.topics.keys.sorted(), core.topicSubscriptions.keys.sorted()) }
        }
    }

    /// The publishers this client subscribed to on `topic` (`getSubscribedUserList`): nil when
    /// it receives every publisher, empty when the topic is not subscribed.
    public func subscribedUsers(topic: String) async -> [String]? {
        await onLoop { [core] in
            guard let users = core.topicSubscriptions[topic] else { return [] }
            return users.map { $0.sorted() }
        }
    }

    /// Replaces this channel's token in-band (§2.13). `capability`: a new capability token for
    /// this STREAM connection (nil: it keeps its own); one that no longer grants `stream.join`
    /// on the channel is refused with `notPermitted` and the server ends the membership.
    public func renewToken(_ token: String, capability: String? = nil) async throws(RTMError) {
        let core = self.core
        _ = try await request("renewToken") {
            core.joinOptions.token = token
            if let capability { core.joinOptions.capability = capability }
            return core.request(Frame(type: .renewToken, token: token).with { $0.capability = capability },
                                operation: "renewToken").map { reply in
                core.client.scheduleTokenWarning(expiresAt: reply.expiresAt, serverNow: reply.ts, channel: core.name)
                return reply
            }
        }
    }

    // MARK: helpers

    private func check(topic: String, operation: String) throws(RTMError) {
        if let problem = Limits().topicProblem(topic) { throw RTMError(.channelInvalidTopicName, operation: operation, problem) }
    }

    private func request(_ operation: String, _ body: @escaping @Sendable () -> EventLoopFuture<Frame>) async throws(RTMError) -> Frame {
        try await RTMClient.wait(core.loop.flatSubmit(body), operation: operation)
    }

    private func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        (try? await core.loop.submit(body).get()) ?? body()
    }
}

extension RTMClient {
    /// Creates (or returns the existing) stream channel `name`. Nothing is opened until `join`.
    public func createStreamChannel(_ name: String) throws(RTMError) -> RTMStreamChannel {
        try check(channel: name, operation: "createStreamChannel")
        let core = self.core
        let streamCore = core.loop.submit { () -> StreamCore in
            if let existing = core.streamChannels[name] { return existing }
            var timing = StreamLinkMachine.Timing()
            timing.heartbeat = core.config.streamHeartbeatInterval
            timing.pongTimeout = core.config.streamPongTimeout
            timing.attemptTimeout = core.config.connectTimeout
            timing.backoffInitial = core.config.streamBackoffInitial
            timing.backoffMax = core.config.backoffMax
            timing.rejoinWindow = core.config.streamRejoinWindow
            let created = StreamCore(name: name, client: core, timing: timing, seed: core.config.jitterSeed ?? UInt64.random(in: 0...UInt64.max))
            core.streamChannels[name] = created
            return created
        }
        // Created on the loop; wait synchronously unless already on it (a few microseconds).
        let made: StreamCore
        if core.loop.inEventLoop {
            made = core.streamChannels[name]!
        } else {
            guard let value = try? streamCore.wait() else {
                throw RTMError(.notConnected, operation: "createStreamChannel", "the client's event loop is shut down")
            }
            made = value
        }
        return RTMStreamChannel(name: name, core: made, client: self)
    }

    /// Stream channels created on this client, by name.
    public var streamChannelNames: [String] { get async { await onLoopValue { [core] in core.streamChannels.keys.sorted() } } }

    func onLoopValue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        (try? await eventLoop.submit(body).get()) ?? body()
    }
}
