import NIOCore
import NIOWebSocket

/// RFC 6455's rules for frame headers and close frames, the same on both sides of the
/// connection (the server's decoder and the SDK's aggregator both apply them).
package enum WebSocketRules {
    /// Checks one frame header (RFC 6455 §5.1, §5.2, §5.5): no reserved bit set (we negotiate
    /// no extension), a known opcode, masked if and only if a client sent it, control frames
    /// whole and at most 125 bytes, no frame over `maxFrameSize`.
    package static func checkHeader(fin: Bool, reservedBits: UInt8, opcode: UInt8, masked: Bool, length: UInt64,
                                    fromClient: Bool, maxFrameSize: Int) throws(WebSocketViolation) {
        // RFC 6455 §5.2: RSV1–3 "MUST be 0 unless an extension is negotiated".
        guard reservedBits == 0 else { throw .protocolError("reserved bits set in a frame (no extension was negotiated)") }
        switch opcode {   // RFC 6455 §5.2: 0x3–0x7 and 0xB–0xF are reserved
        case 0x0, 0x1, 0x2, 0x8, 0x9, 0xA: break
        default: throw .protocolError("unknown WebSocket opcode \(opcode)")
        }
        // RFC 6455 §5.1: a server MUST close on an unmasked client frame, a client on a masked
        // server frame.
        guard masked == fromClient else {
            throw .protocolError(fromClient ? "an unmasked frame from a client (RFC 6455 §5.1)" : "a masked frame from a server (RFC 6455 §5.1)")
        }
        if opcode & 0x8 != 0 {   // RFC 6455 §5.5: control frames
            guard fin else { throw .protocolError("a fragmented control frame") }
            guard length <= 125 else { throw .protocolError("a control frame of \(length) bytes (at most 125)") }
        }
        guard length <= UInt64(maxFrameSize) else { throw .tooBig("a frame of \(length) bytes (at most \(maxFrameSize))") }
    }

    /// Whether a peer may send `code` in a close frame (RFC 6455 §7.4.1 and §7.4.2, with the
    /// IANA registry): 1000–1003, 1007–1014 and 3000–4999. 1004–1006 and 1015 are reserved
    /// (1005 and 1006 are never sent), 0–999 unused, 1016–2999 for future extensions.
    package static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    /// Checks a received close frame's payload (RFC 6455 §5.5.1): empty, or a close code a
    /// peer may send followed by a UTF-8 reason. Anything else is a protocol error (1002).
    package static func checkClosePayload(_ payload: ByteBuffer) throws(WebSocketViolation) {
        guard payload.readableBytes > 0 else { return }
        guard let code = payload.getInteger(at: payload.readerIndex, as: UInt16.self) else {
            throw .protocolError("a close frame with a 1-byte payload")
        }
        guard isValidCloseCode(code) else { throw .protocolError("a close frame with the invalid close code \(code)") }
        let reason = payload.getSlice(at: payload.readerIndex + 2, length: payload.readableBytes - 2) ?? ByteBuffer()
        guard UTF8Validator.isValid(reason) else { throw .protocolError("a close reason that is not valid UTF-8") }
    }

    /// The code that answers a valid close frame: the peer's own, echoed (RFC 6455 §5.5.1), or
    /// 1000 when it gave none.
    package static func closeReplyCode(_ payload: ByteBuffer) -> WebSocketErrorCode {
        payload.getInteger(at: payload.readerIndex, as: UInt16.self).map { WebSocketErrorCode(codeNumber: Int($0)) } ?? .normalClosure
    }
}

extension WebSocketRules {
    /// The close frame that answers a valid close frame with `payload` (RFC 6455 §5.5.1): the
    /// peer's code echoed, masked if a client sends it (§5.1).
    package static func closeReply(to payload: ByteBuffer, isServer: Bool, allocator: ByteBufferAllocator) -> WebSocketFrame {
        var data = allocator.buffer(capacity: 2)
        data.write(webSocketErrorCode: closeReplyCode(payload))
        return WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: isServer ? nil : .random(), data: data)
    }
}
