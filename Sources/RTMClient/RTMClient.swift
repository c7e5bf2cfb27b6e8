import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RTMProtocol

/// The client SDK: one MESSAGE connection with exact connection management (SPEC §1–5).
///
/// Creating a client opens nothing (K-1); `login` does. The SDK notices a dead link by its
/// heartbeat, reconnects by itself with jittered backoff, restores subscriptions, queues
/// requests while reconnecting, and reports every transition as a link-state event and as a
/// classic connection-state change.
///
/// ```swift
/// let client = try RTMClient(config: RTMClientConfig(appId: appId, userId: "alice", endpoint: "ws://127.0.0.1:9600"))
/// Task { for await event in client.events() { print(event) } }
/// try await client.login(token: token)
/// try await client.subscribe("room")
/// try await client.publish(channel: "room", message: "hello")
/// ```
public final class RTMClient: Sendable {
    let core: ClientCore
    /// The event loop all client state lives on; delegate callbacks arrive on it.
    public let eventLoop: any EventLoop

    /// Creates a client. Throws when the configuration is invalid (the error names the field).
    public init(config: RTMClientConfig, eventLoop: (any EventLoop)? = nil, logger: Logger = Logger(label: "rtm.client")) throws(RTMError) {
        try config.validate()
        var endpoints: [ClientTransport.Endpoint] = []
        // One trust configuration for every wss:// endpoint (the CA file is read once).
        var tls: ClientTLS?
        for url in config.allEndpoints {
            guard var endpoint = ClientTransport.Endpoint(url) else {
                throw RTMError(.invalidParameter, operation: "config", "endpoint '\(url)' is not ws://host:port[/path] or wss://…")
            }
            if endpoint.secure {
                if tls == nil { tls = try ClientTLS(caFile: config.caFile) }
                endpoint.tls = tls
            }
            endpoints.append(endpoint)
        }
        let loop = eventLoop ?? MultiThreadedEventLoopGroup.singleton.next()
        self.eventLoop = loop
        let rotation = EndpointRotation(endpoints, seed: config.jitterSeed.map { $0 ^ 0x5EED } ?? UInt64.random(in: 0...UInt64.max))
        self.core = ClientCore(config: config, endpoints: rotation, loop: loop, logger: logger)
        let core = self.core
        loop.execute { [weak self] in core.owner = self }
        Self.startPathMonitor(for: self)
    }

    deinit {
        let core = self.core
        core.loop.execute { core.terminate() }   // SPEC R-4: nothing outlives the client
    }

    /// The configuration.
    public var config: RTMClientConfig { core.config }

    // MARK: events

    /// A new stream of every event from now on (each call is its own registration, T-6).
    public func events() -> AsyncStream<RTMEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: RTMEvent.self)
        let core = self.core
        core.loop.execute {
            if core.terminated { continuation.finish(); return }
            let id = core.addSink(continuation)
            continuation.onTermination = { _ in core.loop.execute { core.sinks[id] = nil } }
        }
        return stream
    }

    /// Sets the delegate (held strongly until replaced with nil); events arrive on `eventLoop`.
    public func setDelegate(_ delegate: (any RTMClientDelegate)?) async {
        let core = self.core
        await onLoop { core.delegate = delegate }
    }

    /// The current link state.
    public var linkState: LinkState { get async { await onLoop { [core] in core.machine.linkState } } }

    /// The current classic connection state.
    public var connectionState: ConnectionState { get async { await onLoop { [core] in core.machine.classic } } }

    /// Channels currently subscribed (as the SDK will restore them).
    public var subscribedChannels: [String] { get async { await onLoop { [core] in core.subscriptions } } }

    // MARK: login

    /// Logs in with a token (nil or empty: the app id alone, for apps without a certificate).
    /// Returns when connected; throws on rejection or login timeout (C-1).
    ///
    /// `capability`: a capability token from the app's backend (a JWT, PROTOCOL.md §8.1) that
    /// limits what this session may do on channels and other users; it is sent again at every
    /// re-login, and with stream-channel joins. Requests it does not allow fail with
    /// `notPermitted` (-10104).
    public func login(token: String?, capability: String? = nil) async throws(RTMError) {
        try await login { core in core.token = token; core.capability = capability; core.credentialsProvider = nil }
    }

    /// Logs in asking `tokenProvider` for a fresh token at every (re)login (SPEC T-7).
    /// `capability`: as in `login(token:capability:)`, the same at every login (for one that
    /// changes, use `login(credentialsProvider:)`).
    public func login(tokenProvider: @escaping @Sendable () async throws -> String, capability: String? = nil) async throws(RTMError) {
        try await login(credentialsProvider: { RTMCredentials(token: try await tokenProvider(), capability: capability) })
    }

    /// Logs in asking `credentialsProvider` for a fresh login token and capability token at
    /// every (re)login (SPEC T-7): for a backend whose capability tokens expire, or change
    /// with what the user may do.
    ///
    /// ```swift
    /// try await client.login(credentialsProvider: {
    ///     let issued = try await myBackend.rtmCredentials(for: "alice")
    ///     return RTMCredentials(token: issued.token, capability: issued.capability)
    /// })
    /// ```
    public func login(credentialsProvider: @escaping @Sendable () async throws -> RTMCredentials) async throws(RTMError) {
        try await login { core in core.credentialsProvider = credentialsProvider }
    }

    private func login(_ setup: @escaping @Sendable (ClientCore) -> Void) async throws(RTMError) {
        let core = self.core
        let future: EventLoopFuture<Void> = core.loop.flatSubmit {
            setup(core)
            let promise = core.loop.makePromise(of: Void.self)
            core.loginWaiters.append(promise)
            core.run(core.machine.login(now: .now()))
            return promise.futureResult
        }
        try await Self.wait(future, operation: "login")
    }

    /// Logs out from any state: closes the connection, cancels every timer, clears every cache
    /// (SPEC C-2, K-4, H-4). Members of the channels see the leave at once.
    public func logout() async {
        let core = self.core
        await onLoop { core.run(core.machine.logout(now: .now())) }
    }

    /// Replaces the token in-band, without reconnecting (T-7). After a token-expired stop it
    /// also resumes reconnecting (C-7).
    ///
    /// `capability`: a new capability token replacing the session's (nil: the session keeps
    /// its own). Subscriptions a narrower one no longer allows end at once, each reported as
    /// `RTMEvent.unsubscribed`; the stream channels it no longer allows to join end too (their
    /// link state goes to failed, `joinFailed`).
    public func renewToken(_ token: String, capability: String? = nil) async throws(RTMError) {
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            core.token = token
            if core.machine.isConnected {
                return core.request(Frame(type: .renewToken, token: token).with { $0.capability = capability },
                                    operation: "renewToken").map { reply in
                    // Kept for later logins and stream joins only once the server took it (a
                    // refused one, say older than the session's, must not replace it).
                    if let capability { core.capability = capability }
                    core.scheduleTokenWarning(expiresAt: reply.expiresAt, serverNow: reply.ts)
                    return reply
                }
            }
            if let capability { core.capability = capability }
            core.run(core.machine.tokenRenewed(now: .now()))
            return core.loop.makeSucceededFuture(Frame(type: .ok))
        }
        _ = try await Self.wait(future, operation: "renewToken")
    }

    /// Tells the SDK whether the network is usable (R-2, T-4). `true` while disconnected or
    /// suspended retries at once; `false` stops retrying until it comes back.
    public func setNetworkAvailable(_ available: Bool) {
        let core = self.core
        core.loop.execute { core.run(core.machine.networkChanged(available: available, now: .now())) }
    }

    // MARK: channels and messages

    /// Subscribes to a message channel; returns its members at that moment (the snapshot).
    /// The subscription is restored automatically after every reconnection (C-5).
    @discardableResult
    public func subscribe(_ channel: String, options: SubscribeOptions = SubscribeOptions()) async throws(RTMError) -> [String] {
        try check(channel: channel, operation: "subscribe")
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            core.request(options.frame(channel), operation: "subscribe").map { reply in
                if !core.subscriptions.contains(channel) { core.subscriptions.append(channel) }
                core.subscriptionOptions[channel] = options
                core.noteSubscribed(channel, reply: reply)
                core.emitPresence(.snapshot, channel: channel, frame: reply)
                core.reapplyState(channel)   // state set before subscribing (cached)
                return reply
            }
        }
        return try await Self.wait(future, operation: "subscribe").users ?? []
    }

    /// Unsubscribes (an intentional leave: members are told at once, P-4).
    public func unsubscribe(_ channel: String) async throws(RTMError) {
        try check(channel: channel, operation: "unsubscribe")
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            core.forgetSubscription(channel)   // leaving clears the state too (P-4)
            return core.request(Frame(type: .unsubscribe, channel: channel), operation: "unsubscribe")
        }
        _ = try await Self.wait(future, operation: "unsubscribe")
    }

    /// Publishes text to a message channel (subscribing is not needed). Queued while
    /// reconnecting; fails with `channelPublishMessageTimeout` if not acknowledged within the
    /// request timeout. Returns the message's sequence number in the channel; a sequence
    /// number alone is unique only within one channel epoch (see
    /// ``publishWithReceipt(channel:message:customType:storeInHistory:)``).
    @discardableResult
    public func publish(channel: String, message: String, customType: String? = nil, storeInHistory: Bool = false) async throws(RTMError) -> UInt64 {
        try await publishWithReceipt(channel: channel, message: message, customType: customType, storeInHistory: storeInHistory).seq
    }

    /// Publishes binary data to a message channel.
    @discardableResult
    public func publish(channel: String, data: Data, customType: String? = nil, storeInHistory: Bool = false) async throws(RTMError) -> UInt64 {
        try await publishWithReceipt(channel: channel, data: data, customType: customType, storeInHistory: storeInHistory).seq
    }

    /// Publishes text to a message channel, as ``publish(channel:message:customType:storeInHistory:)``
    /// does, and returns the message's sequence number with its channel epoch (SPEC M-2): the
    /// pair names the message even across a cluster's database failover, after which the
    /// channel's numbering starts again at 1 in a new epoch.
    ///
    /// ```swift
    /// let receipt = try await client.publishWithReceipt(channel: "room", message: "hello")
    /// // receipt.epoch and receipt.seq equal the delivered MessageEvent's epoch and seq
    /// ```
    @discardableResult
    public func publishWithReceipt(channel: String, message: String, customType: String? = nil,
                                   storeInHistory: Bool = false) async throws(RTMError) -> PublishReceipt {
        try await publish(Frame(type: .publish, channel: channel, text: message, customType: customType).with {
            $0.storeInHistory = storeInHistory ? true : nil
        })
    }

    /// Publishes binary data to a message channel and returns its receipt (see
    /// ``publishWithReceipt(channel:message:customType:storeInHistory:)``).
    @discardableResult
    public func publishWithReceipt(channel: String, data: Data, customType: String? = nil,
                                   storeInHistory: Bool = false) async throws(RTMError) -> PublishReceipt {
        try await publish(Frame(type: .publish, channel: channel, data: data, customType: customType).with {
            $0.storeInHistory = storeInHistory ? true : nil
        })
    }

    private func publish(_ frame: Frame) async throws(RTMError) -> PublishReceipt {
        try check(channel: frame.channel ?? "", operation: "publish")
        try check(payload: frame, operation: "publish")
        let core = self.core
        let future = core.loop.flatSubmit {
            var frame = frame
            frame.msgId = core.takeMessageID()   // a resend after a reconnection is published once (M-3)
            return core.request(frame, operation: "publish", timeoutCode: .channelPublishMessageTimeout)
        }
        let reply = try await Self.wait(future, operation: "publish")
        return PublishReceipt(seq: reply.seq ?? 0, epoch: reply.epoch)
    }

    /// Sends a text message to one user (peer-to-peer). It is stored on the server before this
    /// returns, delivered in order, and kept until the receiver's SDK has it, also when the
    /// receiver is offline now (the receipt says so) or its connection dies (SPEC M-1).
    @discardableResult
    public func publish(toUser userId: String, message: String, customType: String? = nil, storeInHistory: Bool = false) async throws(RTMError) -> UserMessageReceipt {
        try await send(Frame(type: .sendUser, userId: userId, text: message, customType: customType).with {
            $0.storeInHistory = storeInHistory ? true : nil
        })
    }

    /// Sends binary data to one user (see `publish(toUser:message:customType:)`).
    @discardableResult
    public func publish(toUser userId: String, data: Data, customType: String? = nil, storeInHistory: Bool = false) async throws(RTMError) -> UserMessageReceipt {
        try await send(Frame(type: .sendUser, userId: userId, data: data, customType: customType).with {
            $0.storeInHistory = storeInHistory ? true : nil
        })
    }

    private func send(_ frame: Frame) async throws(RTMError) -> UserMessageReceipt {
        if let problem = Limits().nameProblem(frame.userId ?? "", kind: "userId") {
            throw RTMError(.invalidUserId, operation: "publish", problem)
        }
        try check(payload: frame, operation: "publish")
        let core = self.core
        let future = core.loop.flatSubmit {
            var frame = frame
            frame.msgId = core.takeMessageID()   // a resend is stored once (M-3)
            return core.request(frame, operation: "publish", timeoutCode: .channelPublishMessageTimeout)
        }
        let reply = try await Self.wait(future, operation: "publish")
        return UserMessageReceipt(receiverOnline: reply.receiverOnline ?? false, receiverStatusKnown: reply.receiverOnline != nil,
                                  stored: reply.stored ?? false, messageId: reply.msgId ?? 0)
    }

    // MARK: helpers

    func check(channel: String, operation: String) throws(RTMError) {
        if let problem = Limits().nameProblem(channel, kind: "channel name") {
            throw RTMError(.invalidChannelName, operation: operation, problem)
        }
    }

    private func check(payload frame: Frame, operation: String) throws(RTMError) {
        if let (code, problem) = Limits().payloadProblem(size: frame.payloadSize, customType: frame.customType) {
            throw RTMError(code, operation: operation, problem)
        }
        // A text the server stores (a user message, a message kept in history) without NUL.
        if frame.type == .sendUser || frame.storeInHistory == true, let text = frame.text,
           let problem = Limits.storedTextProblem(text.utf8) {
            throw RTMError(.channelInvalidMessage, operation: operation, problem)
        }
    }

    private func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        // Submitting to a running event loop cannot fail unless the loop is shut down.
        (try? await eventLoop.submit(body).get()) ?? body()
    }

    static func wait<T: Sendable>(_ future: EventLoopFuture<T>, operation: String) async throws(RTMError) -> T {
        do {
            return try await future.get()
        } catch let error as RTMError {
            throw error
        } catch {
            throw RTMError(.notConnected, operation: operation, "\(error)")
        }
    }
}

extension RTMClient {
    /// Timers currently scheduled (for tests of SPEC R-4). Call on `eventLoop`.
    var pendingTimerCount: Int { core.timers.count }
}
