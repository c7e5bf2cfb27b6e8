import Foundation
import NIOCore

/// The payload of the `NOTIFY` a node's commit sends (on `rtm_log` or a shard's channel,
/// `ChannelLogShards`): the messages it committed, so that every follower can deliver them
/// without reading them back (else each commit costs one read of the log per node, and a read
/// round trip of latency). The database builds it in the append's transaction, from the
/// numbers it gives (`rtm_append_notify`, migration 10, with `rawLimit` and `maxMessages`
/// from here); `encode` is the same form in Swift, against which the database's is tested.
///
/// A notification is only a shortcut, never the record: followers still read the log when they
/// poll, after every reconnection and on a notification without messages (a batch too large for
/// PostgreSQL's 8000-byte payload, or a node of an earlier release), and `ChannelLogOrdering`
/// drops whichever copy of a message comes second. A message reaches subscribers in its
/// channel's order, once, whichever way it came first.
///
/// The form: `1:` then, in base64, each message as app, channel, epoch, publisher, node (each a
/// 2-byte length and UTF-8), seq and millis (8 bytes each, big-endian), a flags byte (1: has a
/// msgId, 2: has a custom type, 4: text), the msgId (8 bytes) and the custom type when flagged,
/// and the payload (a 4-byte length and its bytes). Binary rather than JSON: encoding and
/// decoding it took a tenth of a node's time under load.
public enum ChannelLogNotice {
    /// The largest payload sent; PostgreSQL refuses 8000 bytes and more.
    public static let maxBytes = 7_900
    private static let prefix = "1:"
    /// The most bytes before base64 that fit `maxBytes` after it.
    static let rawLimit = (maxBytes - prefix.utf8.count) / 4 * 3
    /// The most messages one notification can carry: each takes at least 31 bytes (five
    /// lengths, seq, millis, flags and the payload's length).
    public static let maxMessages = rawLimit / 31

    /// The notification text for `entries`, or nil when it would not fit a notification (the
    /// node then sends a plain wake-up, and the followers read).
    public static func encode(_ entries: [ChannelLogEntry]) -> String? {
        guard !entries.isEmpty, entries.count <= maxMessages else { return nil }
        var buffer = ByteBuffer()
        for entry in entries {
            for text in [entry.appId, entry.channel, entry.epoch, entry.publisher, entry.node] {
                guard write(text, to: &buffer) else { return nil }
            }
            buffer.writeInteger(entry.seq)
            buffer.writeInteger(entry.millis)
            let flags: UInt8 = (entry.msgId != nil ? 1 : 0) | (entry.customType != nil ? 2 : 0) | (entry.isText ? 4 : 0)
            buffer.writeInteger(flags)
            if let msgId = entry.msgId { buffer.writeInteger(msgId) }
            if let customType = entry.customType { guard write(customType, to: &buffer) else { return nil } }
            // Stops as soon as the batch cannot fit, before copying a payload that would not.
            guard buffer.readableBytes + 4 + entry.payload.readableBytes <= rawLimit else { return nil }
            buffer.writeInteger(UInt32(entry.payload.readableBytes))
            buffer.writeImmutableBuffer(entry.payload)
        }
        return prefix + Data(buffer.readableBytesView).base64EncodedString()
    }

    /// The messages a notification carries; nil when it carries none this version can read
    /// (an empty payload: a plain wake-up; another form).
    public static func decode(_ text: String) -> [ChannelLogEntry]? {
        guard text.hasPrefix(prefix), let data = Data(base64Encoded: String(text.dropFirst(prefix.count))) else { return nil }
        var buffer = ByteBuffer(bytes: data)
        var entries: [ChannelLogEntry] = []
        while buffer.readableBytes > 0 {
            guard let appId = read(&buffer), let channel = read(&buffer), let epoch = read(&buffer), let publisher = read(&buffer),
                  let node = read(&buffer), let seq = buffer.readInteger(as: Int64.self), let millis = buffer.readInteger(as: Int64.self),
                  let flags = buffer.readInteger(as: UInt8.self) else { return nil }
            var msgId: UInt64?
            if flags & 1 != 0 { guard let id = buffer.readInteger(as: UInt64.self) else { return nil }; msgId = id }
            var customType: String?
            if flags & 2 != 0 { guard let type = read(&buffer) else { return nil }; customType = type }
            guard let length = buffer.readInteger(as: UInt32.self), let payload = buffer.readSlice(length: Int(length)) else { return nil }
            entries.append(ChannelLogEntry(appId: appId, channel: channel, seq: seq, epoch: epoch, publisher: publisher, node: node,
                                           msgId: msgId, customType: customType, isText: flags & 4 != 0, payload: payload, millis: millis))
        }
        return entries.isEmpty ? nil : entries
    }

    /// Writes `text` with its length; false when it is too long for the form.
    private static func write(_ text: String, to buffer: inout ByteBuffer) -> Bool {
        guard let length = UInt16(exactly: text.utf8.count) else { return false }
        buffer.writeInteger(length)
        buffer.writeString(text)
        return true
    }

    private static func read(_ buffer: inout ByteBuffer) -> String? {
        guard let length = buffer.readInteger(as: UInt16.self) else { return nil }
        return buffer.readString(length: Int(length))
    }
}
