import Foundation
import NIOCore
import RTMProtocol

/// Token warnings, storage and lock events on the MESSAGE connection (§2.11–2.13).
extension ClientCore {
    /// Schedules `tokenWillExpire` `tokenWillExpireLead` seconds before the token ends. The
    /// delay is computed from the server's own clock (`expiresAt - serverNow`), so a skewed
    /// client clock does not move it.
    func scheduleTokenWarning(expiresAt: Int64?, serverNow: Int64?, channel: String? = nil) {
        if let channel {
            streamChannels[channel]?.tokenWarning?.cancel()
            streamChannels[channel]?.tokenWarning = nil
        } else {
            tokenWarning?.cancel()
            tokenWarning = nil
        }
        guard let expiresAt else { return }
        let remaining = Double(expiresAt - (serverNow ?? Self.wallMillis)) / 1000
        let delay = max(0, remaining - config.tokenWillExpireLead)
        let task = loop.scheduleTask(in: .fractionalSeconds(delay)) { [weak self] in
            guard let self else { return }
            if channel == nil { self.tokenWarning = nil }
            self.emit(.tokenWillExpire(channel: channel))
        }
        if channel == nil { tokenWarning = task } else { streamChannels[channel!]?.tokenWarning = task }
    }

    func receivedStorage(_ frame: Frame) {
        guard let kind = frame.event.flatMap(StorageEventKind.init(rawValue:)),
              let type = frame.storageType.flatMap(StorageType.init(rawValue:)) else { return }
        let target = (type == .channel ? frame.channel : frame.userId) ?? ""
        emit(.storage(StorageEvent(kind: kind, storageType: type, target: target, metadata: frame.metadata ?? Metadata(),
                                   timestamp: frame.ts ?? 0)))
    }

    func receivedLock(_ frame: Frame) {
        guard let kind = frame.event.flatMap(LockEventKind.init(rawValue:)), let channel = frame.channel else { return }
        let locks = frame.locks ?? []
        // Locks this client held that someone else has now, or nobody after a snapshot: they
        // were released while we were away (lockExpired, §2.12).
        var expired: [LockDetail] = []
        for lock in locks where lock.owner != config.userId {
            // Our own release clears heldLocks before its request is sent, so a lockReleased
            // of a lock still listed here was not ours to give.
            if heldLocks[channel]?[lock.lockName] != nil, kind == .snapshot || kind == .lockAcquired || kind == .lockReleased {
                heldLocks[channel]?[lock.lockName] = nil
                expired.append(lock)
            }
        }
        if kind == .snapshot {
            let present = Set(locks.map(\.lockName))
            for (name, _) in heldLocks[channel] ?? [:] where !present.contains(name) {
                heldLocks[channel]?[name] = nil
                expired.append(LockDetail(lockName: name, ttl: 0))
            }
        }
        emit(.lock(LockEvent(kind: kind, channelName: channel, locks: locks, timestamp: frame.ts ?? 0)))
        if !expired.isEmpty {
            emit(.lock(LockEvent(kind: .lockExpired, channelName: channel, locks: expired, timestamp: Self.wallMillis)))
        }
    }

    /// After a login that did not resume the session: subscribe again to users' metadata.
    func restoreMetadataWatches() {
        for user in metadataWatches.sorted() {
            var frame = Frame(type: .subscribeMetadata, userId: user)
            frame.storageType = StorageType.user.rawValue
            request(frame, operation: "subscribeUserMetadata", isInternal: true).whenFailure { [logger] error in
                logger.warning("re-subscribing user metadata failed", metadata: ["user": "\(user)", "error": "\(error)"])
            }
        }
    }
}
