/// One connection's publishes on their way through the cluster backplane (SPEC M-3):
/// the runs of one channel enter the backplane in the order they were read, one call at a time,
/// and the runs read while a call is being committed go together in the next one. Without it a
/// connection's runs raced each other into the database (one task each) and a publisher's
/// later message could take an earlier number. Throughput does not suffer: a call carries
/// everything that arrived during the previous commit (group commit again, per connection).
///
/// A plain value owned by the connection's handler (confined to its event loop).
struct ClusterPublishQueue<Item> {
    /// Channels with a call in flight, and the runs waiting for it to end, in read order.
    private var waiting: [String: [Item]] = [:]

    /// A run was read for `channel`: the items to send now (this one), or nil when a call for
    /// the channel is in flight (it is kept for the next).
    mutating func add(_ item: Item, channel: String) -> [Item]? {
        if waiting[channel] != nil {
            waiting[channel]!.append(item)
            return nil
        }
        waiting[channel] = []
        return [item]
    }

    /// The call for `channel` ended: what waited, to send together now (the channel stays
    /// busy), or nil (the channel is idle).
    mutating func finished(channel: String) -> [Item]? {
        guard let next = waiting[channel], !next.isEmpty else {
            waiting[channel] = nil
            return nil
        }
        waiting[channel] = []
        return next
    }
}
