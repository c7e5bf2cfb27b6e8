import Foundation
import NIOCore
import RTMProtocol

/// The admin API's endpoints (`openapi/admin.yaml`).
extension AdminAPI {
    /// `/v1/info`, once the event loops' counts of refusals are folded in.
    func info(respond: @escaping Respond) {
        hub.foldLoopStats(on: hub.fanouts[0].eventLoop).whenComplete { [self] _ in respond(.json(info())) }
    }

    func info() -> AdminModels.Info {
        let counts = hub.connectionCounters
        let now = Hub.wallMillis
        let bans = hub.moderation.withState { $0.activeBans(nowMillis: now).count }
        var info = AdminModels.Info(
            version: RTMServer.version, node: node, startedAt: startedAt, uptimeSeconds: Double(now - startedAt) / 1000, now: now,
            apps: hub.configuration.apps.keys.sorted(),
            connections: .init(message: counts.message, stream: counts.stream, peakMessage: counts.peakMessage,
                               open: hub.openConnections.count),
            sessions: hub.sessionCount, channels: hub.channelCount, bans: bans,
            counters: .init(channelMessages: hub.publishedMessages, userMessages: hub.mailbox.storedCount),
            refusals: hub.metrics.refusals.map { key, count in
                AdminModels.Refusal(operation: key.operation.rawValue, code: key.code, name: RTMErrorCode(rawValue: key.code).description, count: count)
            }.sorted { ($0.count, $1.operation, $1.code) > ($1.count, $0.operation, $0.code) },
            webhooks: hub.webhooks?.stats)
        if let nodes = hub.clusterNodes(), let me = nodes.first {   // nil on a single node: no cluster to describe
            info.cluster = AdminModels.Cluster(node: me.node, database: hub.cluster.databaseUp ? "up" : "down",
                                               liveNodes: hub.cluster.liveNodes, nodes: nodes)
        }
        return info
    }

    func channels(_ request: AdminRequest) throws -> AdminModels.Channels {
        let appId = try request.query["appId"].map { try app($0) }
        return hub.channelSummaries(appId: appId, page: try AdminPage(query: request.query))
    }

    func channel(_ name: String, _ request: AdminRequest) throws -> AdminModels.Channel {
        let appId = try app(request.query["appId"])
        let name = try channelName(name)
        guard let detail = hub.channelDetail(ChannelKey(appId: appId, name: name)) else {
            throw AdminFailure.notFound("channel '\(name)' has no members, subscribers or recent messages")
        }
        return AdminModels.Channel(
            appId: appId, name: name, visibleMembers: detail.visible, lastSeq: detail.lastSeq, members: detail.members,
            recent: detail.recent.map { message in
                var item = AdminModels.Message(seq: message.seq, ts: message.millis, publisher: message.publisher, customType: message.customType)
                if message.isText { item.text = String(buffer: message.payload) } else { item.data = Data(message.payload.readableBytesView) }
                return item
            })
    }

    func sessions(_ request: AdminRequest, respond: @escaping Respond) throws {
        let appId = try request.query["appId"].map { try app($0) }
        hub.sessionSummaries(appId: appId, page: try AdminPage(query: request.query), node: node, on: hub.fanouts[0].eventLoop)
            .whenComplete { result in
                switch result {
                case .success(let sessions): respond(.json(sessions))
                case .failure(let error): respond(.error(.internalServerError, "internalError", "the sessions could not be read: \(error)"))
                }
            }
    }

    func whoNow(_ request: AdminRequest) throws -> AdminModels.WhoNow {
        let appId = try app(request.query["appId"])
        let channel = try channelName(request.query["channel"])
        let includeState = try boolQuery(request, "includeState")
        let (snapshot, next, total) = hub.whoNow(appId: appId, channel: channel, after: request.query["page"])
        return AdminModels.WhoNow(channel: channel, users: snapshot.users, states: includeState ? snapshot.states : nil, total: total, nextPage: next)
    }

    func whereNow(_ request: AdminRequest) throws -> AdminModels.WhereNow {
        let appId = try app(request.query["appId"])
        let user = try userId(request.query["user"])
        guard let channels = hub.whereNow(UserKey(appId: appId, userId: user)) else {
            throw AdminFailure.notFound("user '\(user)' is not online", code: RTMErrorCode.presenceUserNotExist.rawValue)
        }
        return AdminModels.WhereNow(user: user, channels: channels)
    }

    /// §2.8: newest first, `newStart` the cursor for the next page (0: no more).
    func history(_ request: AdminRequest, respond: @escaping Respond) throws {
        let appId = try app(request.query["appId"])
        let channelType = request.query["channelType"] ?? "message"
        guard channelType == "message" || channelType == "user" else {
            throw AdminFailure.badRequest("query parameter 'channelType' must be 'message' or 'user'")
        }
        let channel = try historyChannel(request.query["channel"], channelType: channelType)
        let count = try intQuery(request, "count", 100, 1...100)
        let start = try intQuery(request, "start", 0, 0...Int64.max)
        let end = try intQuery(request, "end", 0, 0...Int64.max)
        hub.storage.history(appId: appId, channelType: channelType, channel: channel, start: start == 0 ? Int64.max : start,
                            end: end, count: Int(count)) { result in
            switch result {
            case .success(let page):
                respond(.json(AdminModels.History(
                    channel: request.query["channel"] ?? channel, channelType: channelType,
                    messages: page.messages.map { AdminModels.Message(ts: $0.ts, publisher: $0.publisher, text: $0.text, data: $0.data, customType: $0.customType) },
                    newStart: page.newStart)))
            case .failure(let failure):
                respond(.error(.internalServerError, "historyFailed", failure.reason, code: failure.code.rawValue))
            }
        }
    }

    /// The stored channel `/v1/history` reads. Its characters are checked first (400, as the
    /// document's pattern: 1 to 129 of Name's characters); then whether it can name a channel
    /// (at most 64 characters) or, with `channelType=user`, a conversation (two user ids, `alice:bob`):
    /// one that cannot is answered 404, as a channel or conversation that does not exist.
    private func historyChannel(_ text: String?, channelType: String) throws -> String {
        guard let text, !text.isEmpty else { throw AdminFailure.badRequest("missing query parameter 'channel'") }
        let limits = hub.configuration.limits
        // Name's rules, but up to a conversation's length: two names and a colon.
        var conversation = limits
        conversation.maxNameLength = 2 * limits.maxNameLength + 1
        if let problem = conversation.nameProblem(text, kind: "channel") {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.invalidChannelName.rawValue)
        }
        guard channelType == "user" else {
            if let problem = limits.nameProblem(text, kind: "channel name") {
                throw AdminFailure.notFound("no channel '\(text)': \(problem)", code: RTMErrorCode.invalidChannelName.rawValue)
            }
            return text
        }
        let users = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard users.count == 2, users.allSatisfy({ limits.nameProblem($0, kind: "user id") == nil }) else {
            throw AdminFailure.notFound("no conversation '\(text)': with channelType=user, channel names two user ids, 'userA:userB'",
                                        code: RTMErrorCode.invalidUserId.rawValue)
        }
        return HistoryRecord.userPair(users[0], users[1])
    }

    // MARK: messages

    /// Checks a message body: exactly one of text and data, within the payload and custom type limits.
    private func checkPayload(text: String?, data: Data?, customType: String?) throws {
        guard (text == nil) != (data == nil) else {
            throw AdminFailure.badRequest("a message needs exactly one of 'message' (text) or 'data' (base64)",
                                          code: RTMErrorCode.channelInvalidMessage.rawValue)
        }
        let limits = hub.configuration.limits
        let size = text?.utf8.count ?? data?.count ?? 0
        if size > limits.maxPayloadBytes {
            throw AdminFailure.badRequest("payload is \(size) bytes; the limit is \(limits.maxPayloadBytes)",
                                          code: RTMErrorCode.channelMessageLengthExceedLimitation.rawValue)
        }
        // Counted in Unicode code points, as the document's maxLength (JSON Schema) counts.
        if let customType, customType.unicodeScalars.count > limits.maxCustomTypeLength {
            throw AdminFailure.badRequest("customType is longer than \(limits.maxCustomTypeLength) characters",
                                          code: RTMErrorCode.channelCustomTypeLengthOverflow.rawValue)
        }
    }

    /// Publishes to a channel as `publisher` (default `admin`): subscribers get it as any
    /// channel message (sequence number, replay, M-2/M-3).
    func publish(_ body: AdminModels.PublishRequest, respond: @escaping Respond) throws {
        let appId = try app(body.appId)
        let channel = try channelName(body.channel)
        let publisher = try userId(body.publisher ?? "admin", field: "publisher")
        try checkPayload(text: body.message, data: body.data, customType: body.customType)
        // The namespace's rules bind the backend's history too (the backend may publish where
        // clients may not, but a no-history channel keeps none).
        if body.storeInHistory == true, let namespace = hub.accessRules.current.namespaces.namespace(of: channel), !namespace.history {
            throw AdminFailure.badRequest("channel '\(channel)' keeps no history (namespace '\(namespace.pattern)'): publish it without storeInHistory",
                                          code: RTMErrorCode.historyOperationNotPermitted.rawValue)
        }
        let payload = body.message.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: body.data ?? Data())
        let outgoing = Hub.Outgoing(requestID: 0, msgId: nil, customType: body.customType, isText: body.message != nil, payload: payload)
        let hub = self.hub
        Task {   // one node: numbered at once; a cluster: answered after the commit (PublishPath)
            do {
                let (seqs, epoch) = try await hub.publishing.publish([outgoing], channel: ChannelKey(appId: appId, name: channel),
                                                                     publisher: UserKey(appId: appId, userId: publisher), hub: hub)
                self.published(body, appId: appId, channel: channel, publisher: publisher, seq: seqs[0], epoch: epoch, respond: respond)
            } catch {
                respond(.error(.internalServerError, "publishFailed", ClusterCommitFailure.reason(error),
                               code: RTMErrorCode.channelPublishMessageTimeout.rawValue))
            }
        }
    }

    /// Answers a publish (and stores it in history if asked).
    private func published(_ body: AdminModels.PublishRequest, appId: String, channel: String, publisher: String, seq: UInt64,
                           epoch: String, respond: @escaping Respond) {
        let result = AdminModels.PublishResult(channel: channel, seq: seq, epoch: epoch)
        guard body.storeInHistory == true else { return respond(.json(result)) }
        let record = HistoryMessage(publisher: publisher, text: body.message, data: body.data, customType: body.customType, ts: Hub.wallMillis)
        hub.storage.appendHistory(appId: appId, channelType: "message", channel: channel, message: record, dedupKey: "\(epoch):\(seq)") { stored in
            switch stored {
            case .success(let ts):
                var stored = result
                stored.historyTs = ts
                respond(.json(stored))
            case .failure(let failure): respond(.error(.internalServerError, "historyFailed", failure.reason, code: failure.code.rawValue))
            }
        }
    }

    /// Sends a user message from `from` (default `admin`), with a client's `sendUser`
    /// semantics (M-1): stored durably before the reply, delivered in order, kept until the
    /// receiver acknowledges it.
    func send(_ body: AdminModels.SendRequest, respond: @escaping Respond) throws {
        let appId = try app(body.appId)
        let receiver = try userId(body.user)
        let sender = try userId(body.from ?? "admin", field: "from")
        try checkPayload(text: body.message, data: body.data, customType: body.customType)
        let message = StoredUserMessage(appId: appId, receiver: receiver, sender: sender, text: body.message, data: body.data,
                                        customType: body.customType, ts: Hub.wallMillis)
        let storage = body.storeInHistory == true ? hub.storage : nil
        hub.mailbox.send(message, from: UserKey(appId: appId, userId: sender), clientMsgId: nil) { result in
            switch result {
            case .success(let receipt):
                if let storage {
                    let record = HistoryMessage(publisher: sender, text: message.text, data: message.data, customType: message.customType, ts: message.ts)
                    storage.appendHistory(appId: appId, channelType: "user", channel: HistoryRecord.userPair(sender, receiver),
                                          message: record, dedupKey: "u:\(receipt.id)") { _ in }
                }
                respond(.json(AdminModels.SendResult(user: receiver, messageId: receipt.id, receiverOnline: receipt.receiverOnline)))
            case .failure(let error):
                respond(.error(.internalServerError, "storeFailed", "\(error)",
                               code: RTMErrorCode.channelReceiverOfflineAndMessageStoreFailed.rawValue))
            }
        }
    }

    // MARK: sessions

    func disconnect(_ body: AdminModels.UserRequest) throws -> AdminModels.Disconnected {
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        return AdminModels.Disconnected(user: key.userId, disconnected: hub.disconnect(key, reason: body.reason ?? "disconnected by the administrator"))
    }

    func kick(_ body: AdminModels.KickRequest) throws -> AdminModels.Kicked {
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        let reason = body.reason ?? "kicked by the administrator"
        if let seconds = body.banSeconds { return try ban(key, seconds: seconds, reason: reason) }
        return AdminModels.Kicked(user: key.userId, sessionEnded: hub.endSession(key, code: .kickedOutByServer, reason: reason))
    }

    func ban(_ body: AdminModels.BanRequest) throws -> AdminModels.Kicked {
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        return try ban(key, seconds: body.seconds, reason: body.reason ?? "banned by the administrator")
    }

    /// Ends the session and refuses the user's logins (-10012 loginRejected) until the ban ends.
    private func ban(_ key: UserKey, seconds: Double, reason: String) throws -> AdminModels.Kicked {
        guard seconds > 0, seconds <= 366 * 86_400 else { throw AdminFailure.badRequest("ban seconds must be in (0, 31622400]") }
        let until = Hub.wallMillis + Int64(seconds * 1000)
        _ = hub.moderation.withState { $0.ban(key, until: until, reason: reason) }
        let ended = hub.endSession(key, code: .kickedOutByServer, reason: "banned: \(reason)")
        return AdminModels.Kicked(user: key.userId, sessionEnded: ended, bannedUntil: until)
    }

    func unban(_ body: AdminModels.UserRequest) throws -> AdminModels.Unbanned {
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        return AdminModels.Unbanned(user: key.userId, unbanned: hub.moderation.withState { $0.unban(key) })
    }

    func bans(_ request: AdminRequest) throws -> AdminModels.Bans {
        let appId = try request.query["appId"].map { try app($0) }
        let now = Hub.wallMillis
        return AdminModels.Bans(bans: hub.moderation.withState { $0.activeBans(nowMillis: now) }.compactMap { key, ban in
            appId == nil || key.appId == appId ? AdminModels.Ban(appId: key.appId, user: key.userId, until: ban.until, reason: ban.reason) : nil
        })
    }

    /// One token (`token`): refused from now on, and the sessions that logged in with it end.
    /// A user (`user`, no token): every token of the user issued before now is refused, and the
    /// user's session ends. Either way the client gets `kicked` code 16 invalidToken.
    /// Every field given is checked, a `user` and an `appId` beside a token too.
    func revoke(_ body: AdminModels.RevokeRequest) throws -> AdminModels.Revoked {
        let reason = body.reason ?? "the token was revoked by the administrator"
        if let token = body.token {
            guard !token.isEmpty else { throw AdminFailure.badRequest("field 'token' is empty") }
            if let appId = body.appId { _ = try app(appId) }
            if let user = body.user { _ = try userId(user) }
            let until = ModerationState.expiresAt(token) ?? Hub.wallMillis + 86_400_000
            let connections = hub.moderation.withState { $0.revoke(token: ModerationState.digest(token), until: until) }
            return AdminModels.Revoked(scope: "token", sessionsEnded: hub.endSessions(connections: connections, code: .invalidToken, reason: reason))
        }
        guard body.user != nil else { throw AdminFailure.badRequest("revoke needs 'token' or 'user'") }
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        let before = UInt32(clamping: Hub.wallMillis / 1000)
        _ = hub.moderation.withState { $0.revokeAll(key, before: before) }
        let ended = hub.endSession(key, code: .invalidToken, reason: reason)
        return AdminModels.Revoked(scope: "user", sessionsEnded: ended ? 1 : 0, before: before)
    }
}
