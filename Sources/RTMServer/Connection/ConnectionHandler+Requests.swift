import Foundation
import NIOCore
import NIOWebSocket
import RTMAuth
import RTMProtocol

extension ConnectionHandler {
    /// Runs one decoded JSON request: through the gate (`pass`: admission, the access decision,
    /// the authorization hook), then its handler.
    func handle(_ frame: Frame, context: ChannelHandlerContext) {
        guard let kind = RequestKind(frame.type) else {
            guard lifecycle.maySend else { return }
            return send(.error(id: frame.id, .invalidFrame, "unknown frame type '\(frame.type)'"), context: context)
        }
        if kind == .login { lifecycle.loginAttempted() }
        switch pass(.json(kind, frame)) {
        case .passed:
            run(kind, frame, GatePass(), context: context)
        case .passedWith(let pass):
            run(kind, frame, pass, context: context)
        case .refused(let refusal):
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
        case .ignored:
            break
        case .awaiting(let answer, let pass):
            // Everything the client sends meanwhile waits for the answer (`hold`).
            hold(until: answer, context: context) { [self] verdict in
                intake.operation = frame.type
                switch verdict {
                case .deny(let refusal):
                    send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
                case .allow(let rewrite):
                    var pass = pass
                    pass.rewrite = rewrite
                    run(kind, Self.rewritten(frame, rewrite), pass, context: context)
                }
                if kind == .login { noteLoginOutcome() }
            }
        }
        // A login waiting for the hook's answer is counted when it comes.
        if kind == .login, intake.held == nil { noteLoginOutcome() }
    }

    /// Runs a request the gate passed: one case per request, no `default`.
    private func run(_ kind: RequestKind, _ frame: Frame, _ pass: GatePass, context: ChannelHandlerContext) {
        switch kind {
        case .ping:
            send(Frame(type: .pong, ts: frame.ts), context: context)
        case .login:
            login(frame, pass, context: context)
        case .join:
            joinStream(frame, pass, context: context)
        case .renewToken:
            if let membership = stream { return renewStreamToken(frame, pass, membership: membership, context: context) }
            guard let key = lifecycle.session else { return }
            renewToken(frame, pass, key: key, context: context)
        case .leave, .joinTopic, .leaveTopic, .publishTopic, .subscribeTopic, .unsubscribeTopic:
            guard let membership = stream else { return }   // admitted on a joined STREAM connection only
            handleStream(frame, membership: membership, context: context)
        case .logout:
            guard let key = lifecycle.session else { return }
            leaveFanout()
            hub.logout(connection)
            hub.closeStreams(of: key)   // K-4: logout ends the STREAM connections too
            send(Frame(type: .ok, id: frame.id), context: context)
            closeConnection(context: context, code: .normalClosure)
        case .subscribe, .unsubscribe, .publish, .sendUser, .ackUser, .setState, .removeState, .getState, .whoNow, .whereNow:
            guard let key = lifecycle.session else { return }   // admitted on a MESSAGE session only
            runChannelRequest(kind, frame, key: key, context: context)
        case .getMessages, .setMetadata, .replaceMetadata, .updateMetadata, .removeMetadata, .getMetadata, .subscribeMetadata,
             .unsubscribeMetadata, .setLock, .acquireLock, .releaseLock, .revokeLock, .removeLock, .getLocks:
            guard let key = lifecycle.session else { return }
            handleService(frame, key: key, context: context)
        case .queryPeersOnlineStatus, .subscribePeersOnlineStatus, .unsubscribePeersOnlineStatus, .getChannelMemberCount,
             .invite, .ackInvitation, .acceptInvitation, .refuseInvitation, .cancelInvitation:
            guard let key = lifecycle.session else { return }
            handlePeerStatus(frame, key: key, context: context)
        }
    }

    /// A MESSAGE session's channel, user-message and presence requests.
    private func runChannelRequest(_ kind: RequestKind, _ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        switch kind {
        case .subscribe: subscribe(frame, key: key, context: context)
        case .unsubscribe: unsubscribe(frame, key: key, context: context)
        case .publish: publish(frame, key: key, context: context)
        case .sendUser: sendUser(frame, key: key, context: context)
        case .ackUser: ackUser(frame, key: key, context: context)
        case .setState, .removeState: changeState(frame, key: key, context: context)
        case .getState: getState(frame, key: key, context: context)
        case .whoNow: whoNow(frame, key: key, context: context)
        case .whereNow: whereNow(frame, key: key, context: context)
        default: preconditionFailure("'\(kind)' is not a channel request")
        }
    }

    // MARK: login

    /// Counts a refused login (the state says whether it was).
    private func noteLoginOutcome() {
        switch lifecycle.state {
        case .loggedIn, .awaitingCluster: break
        default: noteLoginRejected(code: lifecycle.lastErrorCode)
        }
    }

    /// A login the gate passed: its tokens verified, the authorization hook's answer given (its
    /// grants, when it sent some, replace the capability token's).
    private func login(_ frame: Frame, _ pass: GatePass, context: ChannelHandlerContext) {
        let config = hub.configuration
        guard let appId = frame.appId, let userId = frame.userId, let credentials = pass.credentials else { return }
        var access = makeAccess(userId: userId, credentials: credentials)
        if let granted = pass.rewrite?.capabilities {
            // The backend's grants replace the capability token's (and its expiry).
            access = makeAccess(userId: userId, capabilities: granted, expiry: nil, issuedAt: nil, source: .hook)
        }
        let expiresAt = Self.earlier(credentials.tokenExpiry, access.capabilityExpiry)
        let heartbeat = (frame.heartbeatInterval ?? 5).clamped(to: config.heartbeatRange)
        let presence = (frame.presenceTimeout ?? 15).clamped(to: config.presenceTimeoutRange)
        let key = UserKey(appId: appId, userId: userId)
        // Bans and revoked tokens (the admin API).
        if let refusal = hub.moderation.admit(key, token: frame.token, connection: connection.id) {
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
            return
        }
        let (decision, confirmed) = hub.login(key: key, connection: connection, resumeToken: frame.resumeToken, grantsIssuedAt: access.issuedAt,
                                              heartbeat: .fractionalSeconds(heartbeat), presenceTimeout: .fractionalSeconds(presence))
        switch decision {
        case .rejected(let refusal):
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
        case .admitted(let admission):
            connection.sessionAccess = access
            // A session resumed on a node that does not follow its channels (it moved here from
            // another node, or came back after the idle time): answered once they are
            // followed, with what they missed meanwhile ready for replay.
            if admission.resumed, confirmed == nil,
               let following = hub.follow(admission.channels, appId: appId, positions: frame.positions, on: context.eventLoop) {
                lifecycle.awaitCluster(key, access: access)
                return following.assumeIsolated().whenComplete { [self] _ in
                    guard case .awaitingCluster = lifecycle.state, context.channel.isActive else { return }
                    loggedIn(admission, frame: frame, key: key, access: access, heartbeat: heartbeat, expiresAt: expiresAt, context: context)
                }
            }
            guard let confirmed else {
                return loggedIn(admission, frame: frame, key: key, access: access, heartbeat: heartbeat, expiresAt: expiresAt, context: context)
            }
            // A new session: answered once its own `started` came back through the node's log
            // and the user's sessions on other nodes have ended (C-6 across nodes). A single
            // node's in-memory log has confirmed it already (the future is complete: answered
            // now). Meanwhile, in a cluster, the connection is not logged in: its requests are
            // refused (`notLogin`) and a second login is `loginCanceled`; losing the connection
            // gives the admitted session its grace window.
            lifecycle.awaitCluster(key, access: access)
            confirmed.assumeIsolated().whenComplete { [self] _ in
                guard case .awaitingCluster = lifecycle.state, context.channel.isActive else { return }
                loggedIn(admission, frame: frame, key: key, access: access, heartbeat: heartbeat, expiresAt: expiresAt, context: context)
            }
        }
    }

    /// The login admitted: the reply, then what the session has waiting.
    private func loggedIn(_ admission: HubState.Admission, frame: Frame, key: UserKey, access: SessionAccess, heartbeat: Double,
                          expiresAt: Int64?, context: ChannelHandlerContext) {
        let config = hub.configuration
        let (appId, userId) = (key.appId, key.userId)
        hub.metrics.login(resumed: admission.resumed)
        // Liveness from now on follows the client's heartbeat (SPEC H-2), counted from this
        // reply: the client pings only once logged in, and a login that waited for the cluster
        // (C-6 across nodes, up to `clusterLoginTimeout`) must not find its login frame's read
        // already a heartbeat old (the sweep closed such connections at once).
        let timeout = TimeAmount.fractionalSeconds(heartbeat) + config.heartbeatSlack
        lifecycle.read(at: .now())
        lifecycle.loggedIn(key, access: access, readTimeout: timeout,   // its close releases what follows
                           unreachableAfter: hub.peerUnreachableThreshold(heartbeat: .fractionalSeconds(heartbeat)))
        hub.countConnection(.message, opened: true)
        scheduleTokenExpiry(expiresAt)
        for channel in admission.channels {
            joinFanout(channel, appId: appId, features: admission.features[channel] ?? .presence)
        }
        send(Frame(type: .ok, id: frame.id, userId: userId, resumeToken: admission.resumeToken,
                   resumed: admission.resumed, users: admission.channels.isEmpty ? nil : admission.channels,
                   ts: Hub.wallMillis, serverTimeout: Double(timeout.nanoseconds) / 1e9, epoch: hub.epoch)
                .with { $0.expiresAt = expiresAt }, context: context)
        // A resumed session: what its channels published meanwhile (M-2).
        if admission.resumed { replay(admission.channels, appId: appId, frame: frame, context: context) }
        // A resumed session's watches its new grants no longer allow end now.
        if admission.resumed, let access = self.access, !access.isUnrestricted { endForbiddenWatches(key: key, access: access, context: context) }
        // Every user message still waiting for this user, then new ones as they come (M-1).
        hub.mailbox.attach(key, connection: connection, binary: frame.binaryUser == true)
    }

    /// SPEC C-7, T-7: the new token replaces the old one in-band; the session goes on. A new
    /// capability token (never one issued before the current one: the gate refuses it)
    /// replaces the grants, and every watch they no longer allow ends, after the reply; without
    /// one the session keeps its grants and their expiry.
    private func renewToken(_ frame: Frame, _ pass: GatePass, key: UserKey, context: ChannelHandlerContext) {
        guard let credentials = pass.credentials else { return }
        if let refusal = hub.moderation.admit(key, token: frame.token, connection: connection.id) {
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
            return
        }
        let renewed = credentials.capabilities.map { _ in makeAccess(userId: key.userId, credentials: credentials) }
        let expiresAt = Self.earlier(credentials.tokenExpiry, (renewed ?? access)?.capabilityExpiry)
        scheduleTokenExpiry(expiresAt)
        send(Frame(type: .ok, id: frame.id, ts: Hub.wallMillis).with { $0.expiresAt = expiresAt }, context: context)
        if let renewed { adopt(renewed) }
    }

    /// At the token's expiry (wall-clock milliseconds), unless renewed first, the session ends:
    /// the client is told (`kicked`, reason tokenExpired) and the connection closed (§2.13).
    /// It is the connection's deadline from then on (`ServerConnectionStateMachine`), found by
    /// its loop's sweep like every other deadline: no timer of its own.
    func scheduleTokenExpiry(_ expiresAt: Int64?) {
        lifecycle.tokenExpires(at: expiresAt.map { .now() + .milliseconds(max(0, $0 - Hub.wallMillis)) })
    }

    // MARK: channels

    private func subscribe(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        // A channel this node does not follow yet (a cluster): its position is read from the
        // cluster first; the request waits for it, and so does everything sent after it.
        if let following = hub.follow([channel], appId: key.appId, positions: frame.positions, on: context.eventLoop) {
            return hold(until: following, context: context) { [self] followed in
                guard followed else {
                    return send(.error(id: frame.id, .channelSubscribeFailed,
                                       "the channel's position could not be read from the cluster's database; subscribe again"), context: context)
                }
                subscribeFollowed(frame, channel: channel, key: key, context: context)
            }
        }
        subscribeFollowed(frame, channel: channel, key: key, context: context)
    }

    /// A subscribe to a channel this node follows.
    private func subscribeFollowed(_ frame: Frame, channel: String, key: UserKey, context: ChannelHandlerContext) {
        var features = ChannelFeatures(frame)
        var quiet = frame.beQuiet ?? false
        let namespace = (access?.namespaces ?? hub.accessRules.current.namespaces).namespace(of: channel)
        if namespace?.presence == false {
            // No presence in the namespace: members join quietly and get no presence events.
            features.remove(.presence)
            quiet = true
        } else if let access, !access.reveals(.membership(channel: channel)) {
            // No `presence` grant there: the subscription has no presence part (the session does
            // not see the members), though the member itself is seen as any other.
            features.remove(.presence)
        }
        switch hub.subscribe(connection, channel: channel, quiet: quiet, features: features, maxMembers: namespace?.maxMembers) {
        case .rejected(let refusal):
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
        case .subscribed(var snapshot, _):
            // Without the presence part (not asked for, or none in the namespace) nobody is
            // listed: not even members from before the namespace was configured so (a reload).
            if !features.contains(.presence) { snapshot = .init(users: [], states: [:], count: 0, nextPage: nil) }
            // Where the channel is *before* this connection joins its fan-out; everything after
            // that point is replayed (from the client's own position if it sent one, M-2) or
            // arrives live, so nothing falls between the two. The reply carries that position.
            let current = hub.channelPosition(appId: key.appId, channel: channel)
            joinFanout(channel, appId: key.appId, features: features)
            replay(channel, after: frame.positions?[channel] ?? current, appId: key.appId, context: context)
            send(Frame(type: .ok, id: frame.id, channel: channel, seq: current.seq, event: PresenceEventKind.snapshot.rawValue,
                       users: snapshot.users, ts: Hub.wallMillis, epoch: current.epoch, count: snapshot.count,
                       states: snapshot.states.isEmpty ? nil : snapshot.states,
                       withPresence: (frame.withPresence ?? true) && !features.contains(.presence) ? false : nil, page: snapshot.nextPage),
                 context: context)
            sendServiceSnapshots(channel: channel, features: features, key: key, context: context)
        }
    }

    /// Writes a `gap` notice when messages were lost, then the replayed messages. Returns the
    /// channel's epoch.
    @discardableResult
    func replay(_ channel: String, after position: ChannelPosition, appId: String, context: ChannelHandlerContext) -> String {
        let replay = hub.replay(appId: appId, channel: channel, after: position)
        if !replay.messages.isEmpty || replay.lost != nil { hub.metrics.replayed(frames: replay.messages.count, gap: replay.lost != nil) }
        if let lost = replay.lost {
            send(Frame(type: .gap, channel: channel, ts: Hub.wallMillis, epoch: replay.epoch, count: lost), context: context)
        }
        // Replayed messages are pre-encoded WebSocket frames.
        if let outbox, !replay.messages.isEmpty {
            for buffer in replay.messages { outbox.encoded(buffer, flush: false) }
            outbox.flush()
        }
        return replay.epoch
    }

    /// After a resumed login: replay each kept channel from the position the client sent.
    func replay(_ channels: [String], appId: String, frame: Frame, context: ChannelHandlerContext) {
        for channel in channels {
            if let position = frame.positions?[channel] { replay(channel, after: position, appId: appId, context: context) }
        }
    }

    private func unsubscribe(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        leaveFanout(channel, appId: key.appId)
        _ = hub.unsubscribe(connection, channel: channel)
        send(Frame(type: .ok, id: frame.id, channel: channel), context: context)
    }

    /// A JSON publish: the same path as a binary one, one message long.
    private func publish(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context),
              validPayload(frame, stored: frame.storeInHistory == true, context: context) else { return }
        let payload = frame.text.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: frame.data ?? Data())
        let outgoing = Hub.Outgoing(requestID: frame.id ?? 0, msgId: frame.msgId, customType: frame.customType,
                                    isText: frame.text != nil, payload: payload, repliesInJSON: true)
        if let numbers = channelPublisher.publish([outgoing], channel: channel, publisher: key, handler: self, context: context,
                                                  completion: { handler, context, run, result in
                                                      handler.answerPublish(frame, run, channel: channel, key: key, result: result, context: context)
                                                  }) {
            answerPublish(frame, [outgoing], channel: channel, key: key, result: .success(numbers), context: context)
        }
    }

    /// Answers a JSON publish request: `ok` with its number and channel epoch, after the
    /// history record when it asked for one (keyed by the epoch and the number); a failure as
    /// any run's.
    private func answerPublish(_ frame: Frame, _ run: [Hub.Outgoing], channel: String, key: UserKey,
                               result: Result<PublishNumbers, any Error>, context: ChannelHandlerContext) {
        guard case .success(let (seqs, epoch)) = result else {
            return acknowledgeCommitted(run, result: result, context: context)
        }
        let reply = Frame(type: .ok, id: frame.id, seq: seqs[0], epoch: epoch)
        guard frame.storeInHistory == true else { return send(reply, context: context) }
        storeInHistory(appId: key.appId, channelType: "message", channel: channel, publisher: key.userId, frame: frame,
                       dedupKey: "\(epoch):\(seqs[0])", reply: reply, context: context)
    }

    /// A user message (SPEC M-1): stored durably first, acknowledged after the commit, delivered
    /// to the receiver's connection in order, kept until the receiver acknowledges it.
    private func sendUser(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let target = frame.userId else {
            send(.error(id: frame.id, .invalidParameter, "sendUser needs userId (the receiver)"), context: context)
            return
        }
        if let problem = hub.configuration.limits.nameProblem(target, kind: "userId") {
            send(.error(id: frame.id, .invalidUserId, problem), context: context)
            return
        }
        guard validPayload(frame, stored: true, context: context) else { return }
        let message = StoredUserMessage(appId: key.appId, receiver: target, sender: key.userId, text: frame.text,
                                        data: frame.data, customType: frame.customType, ts: Hub.wallMillis)
        let requestID = frame.id
        let channel = context.channel
        let history = frame.storeInHistory == true ? hub.storage : nil
        // Whether the receiver is online is told only with `status` on it.
        let tellsStatus = access?.reveals(.online(target)) ?? true
        hub.mailbox.send(message, from: key, clientMsgId: frame.msgId) { [hub] result in
            if let history, case .success(let receipt) = result {
                // Keyed by the stored message's id: a resend is in the history once (M-3).
                let record = HistoryMessage(publisher: key.userId, text: message.text, data: message.data,
                                            customType: message.customType, ts: message.ts)
                history.appendHistory(appId: key.appId, channelType: "user", channel: HistoryRecord.userPair(key.userId, target),
                                      message: record, dedupKey: "u:\(receipt.id)") { _ in }
            }
            let reply: Frame
            switch result {
            case .success(let receipt):
                // -11035 in `code`: the receiver is offline and the message waits for it.
                reply = Frame(type: .ok, id: requestID, receiverOnline: tellsStatus ? receipt.receiverOnline : nil,
                              code: !tellsStatus || receipt.receiverOnline ? nil : RTMErrorCode.channelReceiverOfflineButMessageStoreSucceeded.rawValue,
                              msgId: UInt64(receipt.id), stored: true)
            case .failure(let error):
                reply = .error(id: requestID, .channelReceiverOfflineAndMessageStoreFailed, "\(error)")   // the mailbox's reason
            }
            hub.reply(reply, to: .sendUser, on: channel)
        }
    }

    /// The receiver's SDK has every user message up to `msgId` (M-1).
    private func ackUser(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let upTo = frame.msgId else {
            send(.error(id: frame.id, .invalidParameter, "ackUser needs msgId"), context: context)
            return
        }
        hub.mailbox.acknowledge(key, upTo: Int64(clamping: upTo), on: connection)
        if frame.id != nil { send(Frame(type: .ok, id: frame.id), context: context) }
    }

    // MARK: presence

    private func changeState(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        let set = frame.type == .setState ? (frame.state ?? [:]) : [:]
        let remove = frame.type == .removeState ? (frame.keys ?? []) : []
        switch hub.changeState(connection, channel: channel, set: set, remove: remove) {
        case .rejected(let refusal):
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
        case .changed(let state, _):
            send(Frame(type: .ok, id: frame.id, channel: channel, state: state), context: context)
        }
    }

    private func getState(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        let user = frame.userId ?? key.userId
        guard let state = hub.state(of: user, appId: key.appId, channel: channel) else {
            send(.error(id: frame.id, .presenceUserNotExist, "user '\(user)' is not in channel '\(channel)'"), context: context)
            return
        }
        send(Frame(type: .ok, id: frame.id, userId: user, channel: channel, state: state), context: context)
    }

    private func whoNow(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        // The cursor is a user id (the previous page's last); anything else is no cursor we gave.
        if let page = frame.page, let problem = hub.configuration.limits.nameProblem(page, kind: "page (the previous reply's cursor)") {
            send(.error(id: frame.id, .invalidParameter, problem), context: context)
            return
        }
        let (snapshot, next, total) = hub.whoNow(appId: key.appId, channel: channel, after: frame.page)
        send(Frame(type: .ok, id: frame.id, channel: channel, users: snapshot.users, count: total,
                   states: frame.includeState == true ? snapshot.states : nil, page: next), context: context)
    }

    private func whereNow(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        let user = frame.userId ?? key.userId
        if let problem = hub.configuration.limits.nameProblem(user, kind: "userId") {
            send(.error(id: frame.id, .invalidUserId, problem), context: context)
            return
        }
        guard let channels = hub.whereNow(UserKey(appId: key.appId, userId: user)) else {
            send(.error(id: frame.id, .presenceUserNotExist, "user '\(user)' is not online"), context: context)
            return
        }
        // Only the channels whose members the session may see (presence there).
        let visible = access.map { access in channels.filter { access.reveals(.membership(channel: $0)) } } ?? channels
        send(Frame(type: .ok, id: frame.id, userId: user, channels: visible), context: context)
    }

    // MARK: validation

    func validChannel(_ frame: Frame, context: ChannelHandlerContext) -> String? {
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

    /// Whether the message of `frame` may be sent (`stored`: a store keeps it: a user message,
    /// a message kept in history); otherwise the refusal is sent.
    private func validPayload(_ frame: Frame, stored: Bool, context: ChannelHandlerContext) -> Bool {
        if (frame.text == nil) == (frame.data == nil) {
            send(.error(id: frame.id, .channelInvalidMessage, "a message needs exactly one of text or data"), context: context)
            return false
        }
        if stored, let text = frame.text, let problem = Limits.storedTextProblem(text.utf8) {
            send(.error(id: frame.id, .channelInvalidMessage, problem), context: context)
            return false
        }
        if let refusal = payloadProblem(size: frame.payloadSize, customType: frame.customType) {
            send(.error(id: frame.id, refusal.code, refusal.reason), context: context)
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
