import Foundation
import NIOCore
import NIOWebSocket
import RTMProtocol

/// Storage, locks, history and token expiry on a MESSAGE connection (AGORA_REFERENCE §2.8,
/// §2.11–2.13).
extension ConnectionHandler {
    /// Runs one service request (the gate passed it).
    func handleService(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        switch frame.type {
        case .setMetadata: writeMetadata(.set, frame, key: key, context: context)
        case .replaceMetadata: writeMetadata(.replace, frame, key: key, context: context)
        case .updateMetadata: writeMetadata(.update, frame, key: key, context: context)
        case .removeMetadata: writeMetadata(.remove, frame, key: key, context: context)
        case .getMetadata: getMetadata(frame, key: key, context: context)
        case .subscribeMetadata, .unsubscribeMetadata: watchMetadata(frame, key: key, context: context)
        case .setLock, .acquireLock, .releaseLock, .revokeLock, .removeLock: lock(frame, key: key, context: context)
        case .getLocks:
            guard let channel = validChannel(frame, context: context) else { return }
            let requestID = frame.id, nio = context.channel
            hub.readLocks(appId: key.appId, channel: channel) { [hub] result in
                switch result {
                case .success(let details): Hub.send(Frame(type: .ok, id: requestID, channel: channel).with { $0.locks = details }, on: nio)
                case .failure(let error): hub.reply(.error(id: requestID, .lockOperationFailed, "the lock store failed: \(error)"), to: .getLocks, on: nio)
                }
            }
        case .getMessages: getMessages(frame, key: key, context: context)
        default: preconditionFailure("'\(frame.type)' is not a service request")
        }
    }

    // MARK: storage

    /// The set a request names: a channel's (`channel`) or a user's (`userId`, default the caller).
    private func storageKey(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) -> StorageKey? {
        guard let type = StorageType(rawValue: frame.storageType ?? "channel") else {
            send(.error(id: frame.id, .storageInvalidArgument, "storageType must be 'channel' or 'user', got '\(frame.storageType ?? "")'"), context: context)
            return nil
        }
        switch type {
        case .channel:
            guard let channel = validChannel(frame, context: context) else { return nil }
            return StorageKey(appId: key.appId, type: .channel, target: channel)
        case .user:
            let user = frame.userId ?? key.userId
            if let problem = hub.configuration.limits.nameProblem(user, kind: "userId") {
                send(.error(id: frame.id, .invalidUserId, problem), context: context)
                return nil
            }
            return StorageKey(appId: key.appId, type: .user, target: user)
        }
    }

    private func writeMetadata(_ operation: MetadataDocument.Operation, _ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let storageKey = storageKey(frame, key: key, context: context) else { return }
        let request = frame.metadata ?? Metadata()
        if (operation == .set || operation == .update) && request.items.isEmpty {
            send(.error(id: frame.id, .storageInvalidArgument, "\(frame.type) needs metadata with at least one item"), context: context)
            return
        }
        var options = MetadataDocument.WriteOptions()
        options.recordTs = frame.recordTs ?? false
        options.recordUserId = frame.recordUserId ?? false
        let lockName = frame.lockName.flatMap { $0.isEmpty ? nil : $0 }
        if let lockName, storageKey.type != .channel || hub.configuration.limits.nameProblem(lockName, kind: "lock name") != nil {
            send(.error(id: frame.id, .storageInvalidLockName, "lockName '\(lockName)' is invalid (channel metadata only, ≤ 64 characters)"), context: context)
            return
        }
        let requiredLock = lockName.map { MetadataLockGuard(lockName: $0, owner: key.userId) }
        hub.storage.write(operation, key: storageKey, request: request, options: options, author: key.userId,
                          notifyAll: frame.notifyAll == true && storageKey.type == .channel, requiredLock: requiredLock,
                          reply: Self.metadataReply(frame.id, to: frame.type, on: context.channel, hub: hub))
    }

    /// Answers a metadata request with the set, or with the failure.
    private static func metadataReply(_ requestID: UInt64?, to operation: FrameType, on channel: any Channel, hub: Hub)
        -> @Sendable (Result<Metadata, StorageService.Failure>) -> Void {
        { result in
            switch result {
            case .success(let metadata):
                Hub.send(Frame(type: .ok, id: requestID).with { $0.metadata = metadata }, on: channel)
            case .failure(let failure):
                hub.reply(.error(id: requestID, failure.code, failure.reason), to: operation, on: channel)
            }
        }
    }

    private func getMetadata(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let storageKey = storageKey(frame, key: key, context: context) else { return }
        hub.storage.read(storageKey, reply: Self.metadataReply(frame.id, to: frame.type, on: context.channel, hub: hub))
    }

    /// subscribeMetadata replies with the current set (the snapshot); later changes arrive as
    /// storage events. The subscription lasts as long as the session.
    private func watchMetadata(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        let target = frame.userId ?? key.userId
        if let problem = hub.configuration.limits.nameProblem(target, kind: "userId") {
            send(.error(id: frame.id, .invalidUserId, problem), context: context)
            return
        }
        let on = frame.type == .subscribeMetadata
        hub.watchMetadata(of: UserKey(appId: key.appId, userId: target), watcher: key.userId, on: on)
        guard on else {
            send(Frame(type: .ok, id: frame.id, userId: target), context: context)
            return
        }
        let requestID = frame.id
        let channel = context.channel
        let storageKey = StorageKey(appId: key.appId, type: .user, target: target)
        hub.storage.read(storageKey) { [hub] result in
            switch result {
            case .success(let metadata):
                Hub.send(Frame(type: .ok, id: requestID, userId: target).with { $0.metadata = metadata }, on: channel)
                Hub.send(Hub.storageEvent(storageKey, kind: .snapshot, metadata: metadata), on: channel)
            case .failure(let failure):
                hub.reply(.error(id: requestID, failure.code, failure.reason), to: .subscribeMetadata, on: channel)
            }
        }
    }

    /// After a subscribe with `withMetadata` / `withLock`: the channel's snapshots (§2.11, §2.12).
    func sendServiceSnapshots(channel name: String, features: ChannelFeatures, key: UserKey, context: ChannelHandlerContext) {
        if features.contains(.lock) {
            let nio = context.channel
            hub.readLocks(appId: key.appId, channel: name) { result in
                guard case .success(let details) = result else { return }
                var frame = Frame(type: .lock, channel: name, event: LockEventKind.snapshot.rawValue, ts: Hub.wallMillis)
                frame.locks = details
                Hub.send(frame, on: nio)
            }
        }
        if features.contains(.metadata) {
            let channel = context.channel
            let storageKey = StorageKey(appId: key.appId, type: .channel, target: name)
            hub.storage.read(storageKey) { result in
                if case .success(let metadata) = result {
                    Hub.send(Hub.storageEvent(storageKey, kind: .snapshot, metadata: metadata), on: channel)
                }
            }
        }
    }

    // MARK: locks

    private func lock(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let channel = validChannel(frame, context: context) else { return }
        guard let name = frame.lockName, hub.configuration.limits.nameProblem(name, kind: "lock name") == nil else {
            send(.error(id: frame.id, .lockInvalidName, "lockName '\(frame.lockName ?? "")' must be 1–64 characters of the name set"), context: context)
            return
        }
        let request: LockService.Request
        switch frame.type {
        case .setLock:
            let ttl = frame.ttl ?? 10
            guard hub.configuration.lockTTLRange.contains(ttl) else {
                send(.error(id: frame.id, .invalidParameter, "ttl must be in \(hub.configuration.lockTTLRange.lowerBound)–\(hub.configuration.lockTTLRange.upperBound) s, got \(ttl)"), context: context)
                return
            }
            request = LockService.Request(operation: .set(ttl: ttl, maxLocks: hub.configuration.limits.maxLocksPerChannel))
        case .acquireLock: request = LockService.Request(operation: .acquire, waits: frame.retry ?? false)
        case .releaseLock: request = LockService.Request(operation: .release)
        case .revokeLock:
            guard let owner = frame.userId else {
                send(.error(id: frame.id, .invalidParameter, "revokeLock needs userId (the owner)"), context: context)
                return
            }
            request = LockService.Request(operation: .revoke(owner: owner))
        default: request = LockService.Request(operation: .remove)
        }
        // The reply comes when the lock store answered (for a waiting acquire: when granted).
        hub.lock(request, channel: ChannelKey(appId: key.appId, name: channel), name: name, connection: connection, requestID: frame.id)
    }

    // MARK: history

    private func getMessages(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) {
        guard let (channelType, channel) = historyTarget(frame, key: key, context: context) else { return }
        let limits = hub.configuration.limits
        let count = frame.count ?? limits.maxHistoryCount
        guard (1...limits.maxHistoryCount).contains(count) else {
            send(.error(id: frame.id, .invalidParameter, "count must be 1–\(limits.maxHistoryCount), got \(count)"), context: context)
            return
        }
        let start = (frame.start ?? 0) == 0 ? Int64.max : frame.start!
        let end = frame.end ?? 0
        guard start > 0, end >= 0, end < start else {
            send(.error(id: frame.id, .historyInvalidTimestamp, "need 0 ≤ end < start (ms), got start \(frame.start ?? 0), end \(end)"), context: context)
            return
        }
        let requestID = frame.id
        let nio = context.channel
        hub.storage.history(appId: key.appId, channelType: channelType, channel: channel, start: start, end: end, count: count) { [hub] result in
            switch result {
            case .success(let page):
                Hub.send(Frame(type: .ok, id: requestID, channel: frame.channel, count: page.messages.count).with {
                    $0.messages = page.messages
                    $0.newStart = page.newStart
                }, on: nio)
            case .failure(let failure):
                hub.reply(.error(id: requestID, failure.code, failure.reason), to: .getMessages, on: nio)
            }
        }
    }

    /// A history's name: a message channel, or the conversation with user `channel`.
    private func historyTarget(_ frame: Frame, key: UserKey, context: ChannelHandlerContext) -> (String, String)? {
        guard let channel = validChannel(frame, context: context) else { return nil }
        switch frame.channelType ?? "message" {
        case "message": return ("message", channel)
        case "user": return ("user", HistoryRecord.userPair(key.userId, channel))
        default:
            send(.error(id: frame.id, .invalidParameter, "channelType must be 'message' or 'user'"), context: context)
            return nil
        }
    }

    /// Stores a published message in its channel's history, then replies (`storeInHistory`).
    func storeInHistory(appId: String, channelType: String, channel: String, publisher: String, frame: Frame,
                        dedupKey: String?, reply: Frame, context: ChannelHandlerContext) {
        let message = HistoryMessage(publisher: publisher, text: frame.text, data: frame.data, customType: frame.customType, ts: Hub.wallMillis)
        let nio = context.channel
        let requestID = frame.id
        hub.storage.appendHistory(appId: appId, channelType: channelType, channel: channel, message: message, dedupKey: dedupKey) { [hub] result in
            switch result {
            case .success: hub.reply(reply, to: frame.type, on: nio)
            case .failure(let failure):
                hub.reply(.error(id: requestID, .historyOperationFailed, "delivered, but not stored in history: \(failure.reason)"), to: frame.type, on: nio)
            }
        }
    }

    // MARK: token expiry

    /// The token expired without a renewal: the session ends (`kicked`, reason tokenExpired).
    func tokenExpired(context: ChannelHandlerContext) {
        switch lifecycle.state {
        case .loggedIn(let key, _, _):
            leaveFanout()
            hub.logout(connection)
            hub.closeStreams(of: key, reason: "the token expired")   // the STREAM connections ride on this session
        case .joined(let membership, _):
            hub.streams.leave(membership, connection: connection, reason: .remoteLeave)
        case .accepted, .upgraded, .awaitingCluster, .ending, .closed:
            return
        }
        hub.logger.info("token expired", metadata: ["connection": "\(connection.id)"])
        send(Frame(type: .kicked, code: LinkStateChangeReason.tokenExpired.rawValue, reason: "the token expired"), context: context)
        closeConnection(context: context, code: .policyViolation, reason: "token expired")
    }
}
