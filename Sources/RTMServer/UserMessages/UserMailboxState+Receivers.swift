import NIOCore

/// Receivers: logins, their reads, and following what other writers commit (SPEC M-1).
///
/// A store several nodes share gives each receiver dense ids committed in order (within a
/// mailbox epoch: a database failover makes them jump once) and names each committed message's
/// predecessor (`CommittedUserMessage.previous`). A connection gets a live message at once when
/// it has that predecessor; anything else (a gap: another node's message, or another node's
/// wake-up) makes the mailbox read the receiver's waiting messages again and deliver those above
/// what the connection has, in order. A read sees every smaller id still stored, so nothing is
/// skipped and nothing is delivered twice (the SDK also drops an id at or below the last it
/// saw). The embedded store has no other writer: it names no predecessor and reports nothing to
/// follow, so none of this is ever triggered on one node; the path is the same.
extension UserMailboxState {
    /// A connection of `key` logged in: its waiting messages (and how many were dropped) are
    /// read, then sent; live commits wait behind that read. It is online at once (receipts say
    /// so).
    mutating func attach(_ key: UserKey, connection: ConnectionRef, binary: Bool) -> Actions {
        var receiver = Receiver(connection: connection, binary: binary, held: [])
        // What an earlier connection acknowledged and the store has not deleted yet (an ack
        // waits for the next commit; the read may run before it): never delivered again (M-1).
        let acknowledged = acknowledgedUncommitted(key)
        if acknowledged > 0 { receiver.delivered = acknowledged }
        online[key] = receiver
        var actions = Actions()
        actions.reads.append(Read(key: key, connection: connection, login: true))
        return actions
    }

    /// That connection is gone: messages wait in the store until the next `attach`; the
    /// store answers its resends from now on (bounded memory).
    mutating func detach(_ key: UserKey, connection: ConnectionRef) {
        guard online[key]?.connection === connection else { return }
        online[key] = nil
        recent[key] = nil
    }

    /// A read of `key`'s waiting messages for `connection` ended (`nil`: it failed). A login's
    /// read sends its messages, then those held meanwhile that it missed.
    mutating func readEnded(_ read: Read, _ result: WaitingRead?) -> Actions {
        var actions = Actions()
        // Gone or replaced meanwhile: the next connection reads for itself.
        guard var receiver = online[read.key], receiver.connection === read.connection else { return actions }
        var gap: Bool
        if read.login {
            let held = receiver.held ?? []
            receiver.held = nil
            if let result, result.dropped > 0 {
                actions.dropped.append(DroppedReport(key: read.key, connection: read.connection, epoch: configuration.storeEpoch,
                                                     count: result.dropped, whileOnline: false))
            }
            gap = deliverRead(result?.messages ?? [], held: held, key: read.key, to: &receiver, &actions)
        } else {
            receiver.rereading = false
            gap = deliverRead(result?.messages ?? [], held: [], key: read.key, to: &receiver, &actions)
        }
        gap = gap || receiver.rereadAgain
        receiver.rereadAgain = false
        online[read.key] = receiver
        if gap { reread(read.key, &actions) }
        return actions
    }

    /// Other writers committed messages for `receivers` (nil: possibly for anyone; a poll, a
    /// reconnection): those online here are read again (nil: after a look at their newest ids).
    mutating func othersCommitted(_ receivers: [UserKey]?) -> Actions {
        var actions = Actions()
        guard let receivers else {
            actions.newest = online.filter { $0.value.held == nil }.map(\.key)
            return actions
        }
        for key in receivers where online[key] != nil { reread(key, &actions) }
        return actions
    }

    /// The newest ids of receivers online here: those with more than their connection has are
    /// read again.
    mutating func newestFound(_ newest: [UserKey: Int64]) -> Actions {
        var actions = Actions()
        for (key, id) in newest where id > online[key]?.delivered ?? .max { reread(key, &actions) }
        return actions
    }

    /// Asks for a read of `key`'s waiting messages (one at a time per receiver; one asked for
    /// meanwhile, or during its login's read, follows it).
    /// Changes the receiver's value in place: `online` keeps its layout (its indices stay valid
    /// for `committed`).
    mutating func reread(_ key: UserKey, _ actions: inout Actions) {
        guard let index = online.index(forKey: key) else { return }
        if online.values[index].held != nil || online.values[index].rereading {
            online.values[index].rereadAgain = true
        } else {
            online.values[index].rereading = true
            actions.reads.append(Read(key: key, connection: online.values[index].connection, login: false))
        }
    }

    /// Delivers `waiting` (a complete read: every id still stored up to its last) above what the
    /// receiver has, then `held` (live commits after that read) while they follow without a
    /// gap. Returns whether there was a gap (to read again). Ids a read skips within an epoch
    /// were dropped before this node could read them: reported before what follows.
    private mutating func deliverRead(_ waiting: [StoredUserMessage], held: [Live], key: UserKey, to receiver: inout Receiver,
                                      _ actions: inout Actions) -> Bool {
        let storeEpoch = configuration.storeEpoch
        var out = waiting.filter { $0.id > receiver.delivered }
        let lost = Self.skipped(out, after: receiver.delivered, epoch: receiver.deliveredEpoch, storeEpoch: storeEpoch)
        if let last = out.last { receiver.markDelivered(last, storeEpoch: storeEpoch) }
        var gap = false
        for live in held where live.message.id > receiver.delivered {
            if let previous = live.previous, previous != receiver.delivered {
                gap = true
                break
            }
            out.append(live.message)
            receiver.markDelivered(live.message, storeEpoch: storeEpoch)
        }
        if lost > 0 {
            actions.dropped.append(DroppedReport(key: key, connection: receiver.connection, epoch: receiver.deliveredEpoch ?? storeEpoch,
                                                 count: Int(lost), whileOnline: true))
        }
        let connection = receiver.connection, binary = receiver.binary
        actions.deliveries.append(contentsOf: out.map { Delivery(connection: connection, binary: binary, message: $0) })
        return gap
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
}
