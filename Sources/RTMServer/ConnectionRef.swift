import NIOCore

/// A handle on one client connection that any thread may hold: its id, its NIO channel
/// (thread-safe for writes and close) and the index of the event loop it lives on.
final class ConnectionRef: Sendable, Hashable {
    let id: UInt64
    let channel: any Channel
    let loopIndex: Int

    init(id: UInt64, channel: any Channel, loopIndex: Int) {
        self.id = id
        self.channel = channel
        self.loopIndex = loopIndex
    }

    static func == (lhs: ConnectionRef, rhs: ConnectionRef) -> Bool { lhs.id == rhs.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// (app id, user id): the key of a MESSAGE session. One session per key (SPEC C-6).
struct UserKey: Hashable, Sendable {
    let appId: String
    let userId: String
}

/// (app id, channel name): channels are per application.
struct ChannelKey: Hashable, Sendable {
    let appId: String
    let name: String
}
