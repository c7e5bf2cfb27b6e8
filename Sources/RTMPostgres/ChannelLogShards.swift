/// Which `NOTIFY` channel carries a log channel's messages, so that a node is sent only the
/// notifications of the channels it follows (`ChannelLogFollower.follow`).
///
/// PostgreSQL delivers a notification only to the sessions that `LISTEN` on its channel name
/// (it still wakes every listening session for every `NOTIFY`, whatever the name: measured,
/// an idle session listening on an unrelated name costs about a third of one listening on the
/// busy one). So data channels' messages go on one of `count` shard channels
/// (`rtm_log_<n>`), and a node listens on the shards of the channels it follows. The cluster's
/// own channels (app "", names starting with '/': sessions, invitations, stream topics) and
/// plain wake-ups stay on `rtm_log`, which every node listens on.
///
/// Every node computes the same shard for a channel (FNV-1a of its app and name: not Swift's
/// per-process `Hasher`).
public enum ChannelLogShards {
    /// How many shard channels data messages are spread over.
    public static let count = 64

    /// Channels every node follows, whatever its subscribers: the cluster's control channels
    /// (app "") and stream channel topics (names starting with '/', which no user channel has).
    public static func isAlwaysFollowed(_ key: ChannelLogKey) -> Bool {
        key.appId.isEmpty || key.channel.utf8.first == UInt8(ascii: "/")
    }

    /// The shard of a data channel (0 ..< `count`).
    public static func shard(of key: ChannelLogKey) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.appId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = (hash ^ 0) &* 0x100_0000_01b3
        for byte in key.channel.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(hash % UInt64(count))
    }

    /// The name of shard `shard`'s notification channel.
    public static func notificationChannel(shard: Int) -> String { "\(PostgresChannelLog.notificationChannel)_\(shard)" }

    /// The notification channel that carries `key`'s messages.
    public static func notificationChannel(for key: ChannelLogKey) -> String {
        isAlwaysFollowed(key) ? PostgresChannelLog.notificationChannel : notificationChannel(shard: shard(of: key))
    }
}
