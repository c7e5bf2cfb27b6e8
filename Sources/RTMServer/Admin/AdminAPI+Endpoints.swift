import Foundation
import NIOCore
import OpenAPIRuntime
import RTMAdminAPI
import RTMProtocol

/// The admin API's endpoints: the operations of `openapi/admin.yaml`, whose input and output
/// types (and routes) swift-openapi-generator made (`RTMAdminAPI`). What the document's types
/// do not check (names, ranges, one payload of two) is checked here; a refusal is thrown as an
/// `AdminFailure`, which the listener answers as it is.
extension AdminAPI: APIProtocol {
    func getConsole(_ input: Operations.getConsole.Input) async throws -> Operations.getConsole.Output {
        .ok(.init(body: .html(HTTPBody(AdminConsolePage.html))))
    }

    /// `/v1/info`, once the event loops' counts of refusals are folded in.
    func getInfo(_ input: Operations.getInfo.Input) async throws -> Operations.getInfo.Output {
        try await hub.foldLoopStats(on: hub.fanouts[0].eventLoop).get()
        return .ok(.init(body: .json(info())))
    }

    func info() -> Components.Schemas.Info {
        let counts = hub.connectionCounters
        let now = Hub.wallMillis
        let bans = hub.moderation.withState { $0.activeBans(nowMillis: now).count }
        var info = Components.Schemas.Info(
            version: RTMServer.version, node: node, startedAt: Int(startedAt), uptimeSeconds: Double(now - startedAt) / 1000, now: Int(now),
            apps: hub.configuration.apps.keys.sorted(),
            connections: .init(message: counts.message, stream: counts.stream, peakMessage: counts.peakMessage, open: hub.openConnections.count),
            sessions: hub.sessionCount, channels: hub.channelCount, bans: bans,
            counters: .init(channelMessages: Int(clamping: hub.publishedMessages), userMessages: Int(clamping: hub.mailbox.storedCount)),
            refusals: hub.metrics.refusals.map { key, count in
                .init(operation: key.operation.rawValue, code: key.code, name: RTMErrorCode(rawValue: key.code).description, count: count)
            }.sorted { ($0.count, $1.operation, $1.code) > ($1.count, $0.operation, $0.code) },
            webhooks: hub.webhooks.map { webhooks in
                let stats = webhooks.stats
                return .init(queued: stats.queued, delivered: stats.delivered, failedAttempts: stats.failedAttempts,
                             droppedQueueFull: stats.droppedQueueFull, droppedExpired: stats.droppedExpired,
                             oldestQueuedSeconds: stats.oldestQueuedSeconds, receiverUp: stats.receiverUp, lastFailure: stats.lastFailure)
            })
        if let nodes = hub.clusterNodes(), let me = nodes.first {   // nil on a single node: no cluster to describe
            info.cluster = .init(node: me.node, database: hub.cluster.databaseUp ? .up : .down, liveNodes: hub.cluster.liveNodes, nodes: nodes)
        }
        return info
    }

    func listChannels(_ input: Operations.listChannels.Input) async throws -> Operations.listChannels.Output {
        let appId = try input.query.appId.map { try app($0) }
        let page = try AdminPage(limit: input.query.limit, cursor: input.query.page)
        return .ok(.init(body: .json(hub.channelSummaries(appId: appId, page: page))))
    }

    func getChannel(_ input: Operations.getChannel.Input) async throws -> Operations.getChannel.Output {
        let appId = try app(input.query.appId)
        let name = try channelName(input.path.channel)
        guard let detail = hub.channelDetail(ChannelKey(appId: appId, name: name)) else {
            throw AdminFailure.notFound("channel '\(name)' has no members, subscribers or recent messages")
        }
        return .ok(.init(body: .json(.init(
            appId: appId, name: name, visibleMembers: detail.visible, lastSeq: Int(detail.lastSeq), members: detail.members,
            recent: detail.recent.map { message in
                var item = Components.Schemas.Message(seq: Int(message.seq), ts: Int(message.millis), publisher: message.publisher,
                                                      customType: message.customType)
                if message.isText {
                    item.text = String(buffer: message.payload)
                } else {
                    item.data = Base64EncodedData(Array(message.payload.readableBytesView))
                }
                return item
            }))))
    }

    func listSessions(_ input: Operations.listSessions.Input) async throws -> Operations.listSessions.Output {
        let appId = try input.query.appId.map { try app($0) }
        let page = try AdminPage(limit: input.query.limit, cursor: input.query.page)
        do {
            let sessions = try await hub.sessionSummaries(appId: appId, page: page, node: node, on: hub.fanouts[0].eventLoop).get()
            return .ok(.init(body: .json(sessions)))
        } catch {
            throw AdminFailure(response: .error(.internalServerError, "internalError", "the sessions could not be read: \(error)"))
        }
    }

    func whoNow(_ input: Operations.whoNow.Input) async throws -> Operations.whoNow.Output {
        let appId = try app(input.query.appId)
        let channel = try channelName(input.query.channel)
        let (snapshot, next, total) = hub.whoNow(appId: appId, channel: channel, after: input.query.page)
        let states = input.query.includeState == true
            ? Operations.whoNow.Output.Ok.Body.jsonPayload.statesPayload(
                additionalProperties: snapshot.states.mapValues { Components.Schemas.State(additionalProperties: $0) })
            : nil
        return .ok(.init(body: .json(.init(channel: channel, users: snapshot.users, states: states, total: total, nextPage: next))))
    }

    func whereNow(_ input: Operations.whereNow.Input) async throws -> Operations.whereNow.Output {
        let appId = try app(input.query.appId)
        let user = try userId(input.query.user)
        guard let channels = hub.whereNow(UserKey(appId: appId, userId: user)) else {
            throw AdminFailure.notFound("user '\(user)' is not online", code: RTMErrorCode.presenceUserNotExist.rawValue)
        }
        return .ok(.init(body: .json(.init(user: user, channels: channels))))
    }

    /// §2.8: newest first, `newStart` the cursor for the next page (0: no more).
    func getHistory(_ input: Operations.getHistory.Input) async throws -> Operations.getHistory.Output {
        let query = input.query
        let appId = try app(query.appId)
        let channelType = query.channelType ?? .message
        let channel = try historyChannel(query.channel, channelType: channelType.rawValue)
        let count = try bounded(query.count, "count", fallback: 100, 1...100)
        let start = try bounded(query.start, "start", fallback: 0, 0...Int.max)
        let end = try bounded(query.end, "end", fallback: 0, 0...Int.max)
        let page = try await withCheckedThrowingContinuation { continuation in
            hub.storage.history(appId: appId, channelType: channelType.rawValue, channel: channel, start: start == 0 ? Int64.max : Int64(start),
                                end: Int64(end), count: count) { result in
                continuation.resume(with: result.mapError { failure in
                    AdminFailure(response: .error(.internalServerError, "historyFailed", failure.reason, code: failure.code.rawValue))
                })
            }
        }
        return .ok(.init(body: .json(.init(
            channel: query.channel, channelType: channelType == .user ? .user : .message,
            messages: page.messages.map { message in
                Components.Schemas.Message(ts: Int(message.ts), publisher: message.publisher, text: message.text,
                                           data: message.data.map { Base64EncodedData(Array($0)) }, customType: message.customType)
            },
            newStart: Int(page.newStart)))))
    }

    // MARK: messages

    /// Publishes to a channel as `publisher` (default `admin`): subscribers get it as any
    /// channel message (sequence number, replay, M-2/M-3).
    func publish(_ input: Operations.publish.Input) async throws -> Operations.publish.Output {
        guard case .json(let json) = input.body else { preconditionFailure("the document's only body type") }
        let body = json.value1
        let appId = try app(body.appId)
        let channel = try channelName(body.channel)
        let publisher = try userId(body.publisher ?? "admin", field: "publisher")
        let data = body.data.map { Data($0.data) }
        // Refused with NUL whether or not it is kept in history: the document cannot make one
        // field's rule depend on another.
        try checkPayload(text: body.message, data: data, customType: body.customType, stored: true)
        // The namespace's rules bind the backend's history too (the backend may publish where
        // clients may not, but a no-history channel keeps none).
        if body.storeInHistory == true, let namespace = hub.accessRules.current.namespaces.namespace(of: channel), !namespace.history {
            throw AdminFailure.badRequest("channel '\(channel)' keeps no history (namespace '\(namespace.pattern)'): publish it without storeInHistory",
                                          code: RTMErrorCode.historyOperationNotPermitted.rawValue)
        }
        let payload = body.message.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: data ?? Data())
        let outgoing = Hub.Outgoing(requestID: 0, msgId: nil, customType: body.customType, isText: body.message != nil, payload: payload)
        let seq: UInt64, epoch: String
        do {   // one node: numbered at once; a cluster: answered after the commit (PublishPath)
            let (seqs, published) = try await hub.publishing.publish([outgoing], channel: ChannelKey(appId: appId, name: channel),
                                                                     publisher: UserKey(appId: appId, userId: publisher), hub: hub)
            (seq, epoch) = (seqs[0], published)
        } catch {
            throw AdminFailure(response: .error(.internalServerError, "publishFailed", ClusterCommitFailure.reason(error),
                                                code: RTMErrorCode.channelPublishMessageTimeout.rawValue))
        }
        var result = Operations.publish.Output.Ok.Body.jsonPayload(channel: channel, seq: Int(seq), epoch: epoch)
        if body.storeInHistory == true {
            let record = HistoryMessage(publisher: publisher, text: body.message, data: data, customType: body.customType, ts: Hub.wallMillis)
            let ts = try await withCheckedThrowingContinuation { continuation in
                hub.storage.appendHistory(appId: appId, channelType: "message", channel: channel, message: record, dedupKey: "\(epoch):\(seq)") { stored in
                    continuation.resume(with: stored.mapError { failure in
                        AdminFailure(response: .error(.internalServerError, "historyFailed", failure.reason, code: failure.code.rawValue))
                    })
                }
            }
            result.historyTs = Int(ts)
        }
        return .ok(.init(body: .json(result)))
    }

    /// Sends a user message from `from` (default `admin`), with a client's `sendUser`
    /// semantics (M-1): stored durably before the reply, delivered in order, kept until the
    /// receiver acknowledges it.
    func send(_ input: Operations.send.Input) async throws -> Operations.send.Output {
        guard case .json(let json) = input.body else { preconditionFailure("the document's only body type") }
        let body = json.value1
        let appId = try app(body.appId)
        let receiver = try userId(body.user.value1)
        let sender = try userId(body.from ?? "admin", field: "from")
        let data = body.data.map { Data($0.data) }
        try checkPayload(text: body.message, data: data, customType: body.customType, stored: true)
        let message = StoredUserMessage(appId: appId, receiver: receiver, sender: sender, text: body.message, data: data,
                                        customType: body.customType, ts: Hub.wallMillis)
        let storage = body.storeInHistory == true ? hub.storage : nil
        let receipt = try await withCheckedThrowingContinuation { continuation in
            hub.mailbox.send(message, from: UserKey(appId: appId, userId: sender), clientMsgId: nil) { result in
                continuation.resume(with: result.mapError { error in
                    AdminFailure(response: .error(.internalServerError, "storeFailed", "\(error)",
                                                  code: RTMErrorCode.channelReceiverOfflineAndMessageStoreFailed.rawValue))
                })
            }
        }
        if let storage {
            let record = HistoryMessage(publisher: sender, text: message.text, data: message.data, customType: message.customType, ts: message.ts)
            storage.appendHistory(appId: appId, channelType: "user", channel: HistoryRecord.userPair(sender, receiver),
                                  message: record, dedupKey: "u:\(receipt.id)") { _ in }
        }
        return .ok(.init(body: .json(.init(user: receiver, messageId: Int(receipt.id), receiverOnline: receipt.receiverOnline))))
    }

    // MARK: sessions

    func disconnect(_ input: Operations.disconnect.Input) async throws -> Operations.disconnect.Output {
        guard case .json(let body) = input.body else { preconditionFailure("the document's only body type") }
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        let disconnected = hub.disconnect(key, reason: body.reason ?? "disconnected by the administrator")
        return .ok(.init(body: .json(.init(user: key.userId, disconnected: disconnected))))
    }

    func kick(_ input: Operations.kick.Input) async throws -> Operations.kick.Output {
        guard case .json(let body) = input.body else { preconditionFailure("the document's only body type") }
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        let reason = body.reason ?? "kicked by the administrator"
        if let seconds = body.banSeconds { return .ok(try ban(key, seconds: seconds, reason: reason)) }
        return .ok(.init(body: .json(.init(user: key.userId, sessionEnded: hub.endSession(key, code: .kickedOutByServer, reason: reason)))))
    }

    func ban(_ input: Operations.ban.Input) async throws -> Operations.ban.Output {
        guard case .json(let body) = input.body else { preconditionFailure("the document's only body type") }
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        return .ok(try ban(key, seconds: body.seconds, reason: body.reason ?? "banned by the administrator"))
    }

    /// Ends the session and refuses the user's logins (-10012 loginRejected) until the ban ends.
    private func ban(_ key: UserKey, seconds: Double, reason: String) throws -> Components.Responses.Kicked {
        guard seconds > 0, seconds <= 366 * 86_400 else { throw AdminFailure.badRequest("ban seconds must be in (0, 31622400]") }
        let until = Hub.wallMillis + Int64(seconds * 1000)
        _ = hub.moderation.withState { $0.ban(key, until: until, reason: reason) }
        let ended = hub.endSession(key, code: .kickedOutByServer, reason: "banned: \(reason)")
        return .init(body: .json(.init(user: key.userId, sessionEnded: ended, bannedUntil: Int(until))))
    }

    func unban(_ input: Operations.unban.Input) async throws -> Operations.unban.Output {
        guard case .json(let body) = input.body else { preconditionFailure("the document's only body type") }
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        return .ok(.init(body: .json(.init(user: key.userId, unbanned: hub.moderation.withState { $0.unban(key) }))))
    }

    func listBans(_ input: Operations.listBans.Input) async throws -> Operations.listBans.Output {
        let appId = try input.query.appId.map { try app($0) }
        let now = Hub.wallMillis
        let bans = hub.moderation.withState { $0.activeBans(nowMillis: now) }.compactMap { key, ban in
            appId == nil || key.appId == appId
                ? Operations.listBans.Output.Ok.Body.jsonPayload.bansPayloadPayload(appId: key.appId, user: key.userId, until: Int(ban.until),
                                                                                    reason: ban.reason)
                : nil
        }
        return .ok(.init(body: .json(.init(bans: bans))))
    }

    /// One token (`token`): refused from now on, and the sessions that logged in with it end.
    /// A user (`user`, no token): every token of the user issued before now is refused, and the
    /// user's session ends. Either way the client gets `kicked` code 16 invalidToken. Every
    /// field given is checked, a `user` and an `appId` beside a token too.
    func revoke(_ input: Operations.revoke.Input) async throws -> Operations.revoke.Output {
        guard case .json(let json) = input.body else { preconditionFailure("the document's only body type") }
        let body = json.value1
        let reason = body.reason ?? "the token was revoked by the administrator"
        if let token = body.token {
            guard !token.isEmpty else { throw AdminFailure.badRequest("field 'token' is empty") }
            if let appId = body.appId { _ = try app(appId) }
            if let user = body.user { _ = try userId(user) }
            let until = ModerationState.expiresAt(token) ?? Hub.wallMillis + 86_400_000
            let connections = hub.moderation.withState { $0.revoke(token: ModerationState.digest(token), until: until) }
            let ended = hub.endSessions(connections: connections, code: .invalidToken, reason: reason)
            return .ok(.init(body: .json(.init(scope: .token, sessionsEnded: ended))))
        }
        guard body.user != nil else { throw AdminFailure.badRequest("revoke needs 'token' or 'user'") }
        let key = UserKey(appId: try app(body.appId), userId: try userId(body.user))
        let before = UInt32(clamping: Hub.wallMillis / 1000)
        _ = hub.moderation.withState { $0.revokeAll(key, before: before) }
        let ended = hub.endSession(key, code: .invalidToken, reason: reason)
        return .ok(.init(body: .json(.init(scope: .user, sessionsEnded: ended ? 1 : 0, before: Int(before)))))
    }
}
