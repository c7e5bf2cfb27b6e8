import NIOCore
import NIOWebSocket

/// Reassembles messages from frames whose headers passed ``WebSocketRules/checkHeader``, and
/// enforces the rules that span frames (RFC 6455 §5.4, §5.5.1, §8.1): no continuation without a
/// message to continue, no new message inside a fragmented one, at most `maxFragments`
/// fragments and `maxMessageSize` bytes a message, text messages valid UTF-8 (checked fragment
/// by fragment, so a bad fragment fails at once), close payloads well formed. After a close
/// frame nothing more is delivered: a peer sends nothing after its close (RFC 6455 §5.5.1).
package struct WebSocketMessageAssembler: Sendable {
    /// One whole message or control frame.
    package struct Message: Sendable {
        package let opcode: WebSocketOpcode
        /// The payload, unmasked.
        package let data: ByteBuffer
    }

    private struct Partial {
        let opcode: WebSocketOpcode
        var data: ByteBuffer
        var count: Int
    }

    package let maxMessageSize: Int
    package let maxFragments: Int
    /// A fragmented message being reassembled.
    private var partial: Partial?
    /// The UTF-8 state of the text message being read.
    private var utf8 = UTF8Validator()
    /// A close frame was delivered: the peer is done.
    package private(set) var isClosed = false

    package init(maxMessageSize: Int, maxFragments: Int = 64) {
        self.maxMessageSize = maxMessageSize
        self.maxFragments = maxFragments
    }

    /// Takes one frame's unmasked payload; returns a whole message or control frame, or nil
    /// while a fragmented message is incomplete (and for anything after a close frame).
    package mutating func assemble(fin: Bool, opcode: WebSocketOpcode, payload: ByteBuffer) throws(WebSocketViolation) -> Message? {
        guard !isClosed else { return nil }
        switch opcode {
        case .text, .binary:
            guard partial == nil else { throw .protocolError("a new message started before the fragmented one ended") }
            if opcode == .text {
                utf8 = UTF8Validator()
                try checkText(payload, fin: fin)
            }
            if fin { return Message(opcode: opcode, data: payload) }
            partial = Partial(opcode: opcode, data: payload, count: 1)
            return nil
        case .continuation:
            // Taken out while it grows, so the buffer is not shared (no copy per fragment).
            guard var current = partial.take() else { throw .protocolError("a continuation frame without a message to continue") }
            current.count += 1
            guard current.count <= maxFragments else { throw .protocolError("a message in more than \(maxFragments) fragments") }
            guard current.data.readableBytes + payload.readableBytes <= maxMessageSize else {
                throw .tooBig("a message over \(maxMessageSize) bytes")
            }
            if current.opcode == .text { try checkText(payload, fin: fin) }
            current.data.writeImmutableBuffer(payload)
            if fin { return Message(opcode: current.opcode, data: current.data) }
            partial = current
            return nil
        case .connectionClose:
            try WebSocketRules.checkClosePayload(payload)
            isClosed = true
            return Message(opcode: opcode, data: payload)
        default:
            return Message(opcode: opcode, data: payload)   // ping, pong: may come between fragments
        }
    }

    /// RFC 6455 §8.1: a text message must be valid UTF-8 (1007); checked as each fragment comes.
    private mutating func checkText(_ payload: ByteBuffer, fin: Bool) throws(WebSocketViolation) {
        guard utf8.feed(payload), !fin || utf8.isComplete else { throw .invalidUTF8("a text message that is not valid UTF-8") }
    }
}
