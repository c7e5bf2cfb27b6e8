import NIOCore
import RTMProtocol

/// Cluster mode: the store is shared by several nodes (`SharedUserMessageStore`).
/// A receiver's ids are dense and committed in order (within a mailbox epoch: a database failover
/// makes them jump once), so each online receiver keeps the highest id delivered to it: the next id is delivered at once; anything else (a gap: another node's
/// message, or a wake-up from another node) makes the mailbox re-read the receiver's waiting
/// messages and deliver those above it, in order. A read sees every smaller id still stored,
/// so nothing is skipped, and nothing is delivered twice by this node (SPEC M-1; the SDK also
/// drops an id at or below the last it saw). Without a shared store none of this runs.
extension UserMailbox {
    /// Starts following the other nodes' commits (a no-op on a single node).
    func startFollowing() {
        shared?.follow { [weak self] receivers in self?.othersCommitted(receivers) }
    }

    /// Stops following and closes the shared store (after `drain`).
    func stopFollowing() async {
        await shared?.stop()
    }

    /// Other nodes committed messages for `receivers` (nil: possibly for anyone).
    private func othersCommitted(_ receivers: [UserMessageReceiver]?) {
        queue.async { [self] in
            guard let receivers else {
                checkNewest()
                return
            }
            for receiver in receivers {
                let key = UserKey(appId: receiver.appId, userId: receiver.userId)
                if online[key] != nil { sync(key) }
            }
        }
    }

    /// The poll (and a reconnection): one query for the newest id of every online receiver;
    /// those with more than was delivered are re-read. On `queue`.
    private func checkNewest() {
        guard let shared, !online.isEmpty else { return }
        let keys = online.filter { $0.value.held == nil }.map { ($0.key, $0.value.delivered) }
        writer.async { [self] in
            let newest: [UserMessageReceiver: Int64]
            do {
                newest = try shared.newest(keys.map { UserMessageReceiver(appId: $0.0.appId, userId: $0.0.userId) })
            } catch {
                logger.debug("checking for other nodes' user messages failed", metadata: ["error": "\(ClusterCommitFailure.logDescription(error))"])
                return
            }
            queue.async { [self] in
                for (key, delivered) in keys {
                    if let id = newest[UserMessageReceiver(appId: key.appId, userId: key.userId)], id > delivered,
                       let receiver = online[key], id > receiver.delivered { sync(key) }
                }
            }
        }
    }

    /// Re-reads `key`'s waiting messages and delivers those above what it has (one read per
    /// receiver at a time; a request meanwhile reads once more after it). On `queue`.
    func sync(_ key: UserKey) {
        guard let receiver = online[key] else { return }
        guard receiver.held == nil else {
            syncAgain.insert(key)   // logging in: read again once the login's read is delivered
            return
        }
        guard !syncing.contains(key) else {
            syncAgain.insert(key)
            return
        }
        syncing.insert(key)
        let connection = receiver.connection
        let notBefore = Self.wallMillis - maxAgeMillis
        writer.async { [self] in
            let result = Result { try store.pending(appId: key.appId, receiver: key.userId, notBefore: notBefore) }
            queue.async { [self] in
                syncing.remove(key)
                switch result {
                case .success(let waiting):
                    if online[key]?.connection === connection { deliverShared(waiting, key: key) }
                case .failure(let error):
                    logger.warning("reading a receiver's user messages failed", metadata: ["user": "\(key.userId)", "error": "\(ClusterCommitFailure.logDescription(error))"])
                }
                if syncAgain.remove(key) != nil { sync(key) }
            }
        }
    }

    /// Delivers `waiting` (a complete read: every id still stored up to its last) above what
    /// `key` has, then `held` (live commits after that read) while they follow without a gap;
    /// a gap in `held` is read again. On `queue`.
    func deliverShared(_ waiting: [StoredUserMessage], held: [StoredUserMessage] = [], key: UserKey) {
        guard var receiver = online[key] else { return }
        var out = waiting.filter { $0.id > receiver.delivered }
        let lost = Self.skipped(out, after: receiver.delivered, epoch: receiver.deliveredEpoch, storeEpoch: store.epoch)
        if let last = out.last { receiver.markDelivered(last, storeEpoch: store.epoch) }
        var gap = false
        for message in held where message.id > receiver.delivered {
            guard message.id == receiver.delivered + 1 else {
                gap = true
                break
            }
            out.append(message)
            receiver.markDelivered(message, storeEpoch: store.epoch)
        }
        online[key] = receiver
        if lost > 0 { reportDroppedWhileOnline(key, count: lost, to: receiver) }
        deliver(out, to: receiver)
        if gap { sync(key) }
    }

    /// How many ids a complete read skips above `after` within one mailbox epoch: ids are dense
    /// per receiver, and what this connection acknowledged is at or below `after`, so an id
    /// missing there was dropped (the cap or the age, SPEC M-1) before this node could read it.
    /// 0 before the first delivery (`after` 0: a login's read is reported by the store's count).
    static func skipped(_ read: [StoredUserMessage], after: Int64, epoch: String?, storeEpoch: String) -> Int64 {
        guard after > 0 else { return 0 }
        var previous = after, previousEpoch = epoch, lost: Int64 = 0
        for message in read {
            let messageEpoch = message.epoch ?? storeEpoch
            if messageEpoch == previousEpoch, message.id > previous + 1 { lost += message.id - previous - 1 }
            previous = message.id
            previousEpoch = messageEpoch
        }
        return lost
    }

    /// Tells an online receiver, before the messages that follow, that `count` of its messages
    /// were dropped before its node could read them (never silent, SPEC M-1), and takes the
    /// store's count of them so that its next login does not report them again.
    private func reportDroppedWhileOnline(_ key: UserKey, count: Int64, to receiver: Receiver) {
        logger.warning("user messages dropped for an online receiver before its node could read them",
                       metadata: ["user": "\(key.userId)", "count": "\(count)"])
        Hub.send(Frame(type: .dropped, channelType: "user", ts: Self.wallMillis, epoch: receiver.deliveredEpoch ?? store.epoch,
                       count: Int(count)), on: receiver.connection.channel)
        onUndeliverable?(key, Int(count))
        writer.async { [self] in _ = try? store.takeDropped(appId: key.appId, receiver: key.userId) }
    }
}
