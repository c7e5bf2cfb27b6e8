import Foundation
import NIOCore

/// The payload of the `NOTIFY rtm_log` a node sends after its commits: the messages it just
/// committed, so that every follower can deliver them without reading them back (one read of
/// the log per node per publish was most of the database's and the nodes' work per publish).
///
/// A notification is only a shortcut, never the record: followers still read the log when they
/// poll, after every reconnection and on a notification without messages (a batch too large for
/// PostgreSQL's 8000-byte payload, or a node of an earlier release), and `ChannelLogOrdering`
/// drops whichever copy of a message comes second. A message reaches subscribers in its
/// channel's order, once, whichever way it came first.
///
/// The form (JSON): `{"v":1,"m":[{"a":app,"c":channel,"s":seq,"e":epoch,"p":publisher,"n":node,
/// "i":msgId?,"t":customType?,"x":isText,"b":base64 payload,"ts":millis}, …]}`.
public struct ChannelLogNotice: Codable, Sendable {
    /// The largest payload sent; PostgreSQL refuses 8000 bytes and more.
    public static let maxBytes = 7_900

    private struct Message: Codable {
        var a: String, c: String, s: Int64, e: String, p: String, n: String
        var i: UInt64?, t: String?
        var x: Bool, b: String, ts: Int64
    }

    private var v = 1
    private var m: [Message]

    /// The notification text for `entries`, or nil when it would not fit a notification (the
    /// node then sends a plain wake-up, and the followers read).
    public static func encode(_ entries: [ChannelLogEntry]) -> String? {
        guard !entries.isEmpty else { return nil }
        // Each message is at least its payload in base64 and ~80 bytes of names: skip the
        // encoding when that alone is too much.
        let estimate = entries.reduce(0) { $0 + $1.payload.readableBytes * 4 / 3 + 80 }
        guard estimate <= maxBytes else { return nil }
        let notice = ChannelLogNotice(m: entries.map {
            Message(a: $0.appId, c: $0.channel, s: $0.seq, e: $0.epoch, p: $0.publisher, n: $0.node, i: $0.msgId, t: $0.customType,
                    x: $0.isText, b: Data($0.payload.readableBytesView).base64EncodedString(), ts: $0.millis)
        })
        guard let data = try? JSONEncoder().encode(notice), data.count <= maxBytes else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The messages a notification carries; nil when it carries none this version can read
    /// (an empty payload: a plain wake-up).
    public static func decode(_ text: String) -> [ChannelLogEntry]? {
        guard !text.isEmpty, let notice = try? JSONDecoder().decode(ChannelLogNotice.self, from: Data(text.utf8)), notice.v == 1 else {
            return nil
        }
        var entries: [ChannelLogEntry] = []
        entries.reserveCapacity(notice.m.count)
        for message in notice.m {
            guard let bytes = Data(base64Encoded: message.b) else { return nil }
            entries.append(ChannelLogEntry(appId: message.a, channel: message.c, seq: message.s, epoch: message.e, publisher: message.p,
                                           node: message.n, msgId: message.i, customType: message.t, isText: message.x,
                                           payload: ByteBuffer(bytes: bytes), millis: message.ts))
        }
        return entries
    }
}
