import FuzzSupport
import NIOCore
import RTMProtocol

// The binary frame codec: publishes as the server reads them, `message` / ack frames as the SDK
// reads them, and the varint reader in both forms. Any bytes give a value or an error, never a
// trap or a read outside the buffer.
fuzzMain { bytes in
    let buffer = ByteBuffer(bytes: bytes)
    if case .success(let publish) = BinaryFrame.readPublish(buffer) {
        precondition(publish.payload.readableBytes <= buffer.readableBytes)
        precondition(publish.channelBytes.count <= buffer.readableBytes)
    }
    switch try? BinaryFrame.decode(buffer) {
    case .messages(let messages)?:
        precondition(messages.reduce(0) { $0 + $1.payload.readableBytes } <= buffer.readableBytes)
    case .publishAcks(let acks)?:
        // Epochs are all known (runs covering every ack) or all unknown (no runs).
        precondition(16 * acks.count <= buffer.readableBytes)
        precondition(acks.allSatisfy { $0.epoch == nil } || acks.allSatisfy { $0.epoch != nil })
    default:
        break
    }
    var cursor = buffer
    let fromBuffer = BinaryFrame.readVarint(&cursor)
    var offset = 0
    let fromBytes = BinaryFrame.readVarint(bytes, at: &offset)
    precondition(fromBuffer == fromBytes, "the two varint readers disagree")
    precondition(offset <= bytes.count)
}
