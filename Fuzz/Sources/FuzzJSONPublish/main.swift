import Foundation
import FuzzSupport
import NIOCore
import RTMProtocol

// The JSON publish fast path against the general codec, which stays the reference.
//
// The reader (`FrameCodec.readPublish`): whatever it accepts, `FrameCodec.decode` accepts too, as
// a publish with the same id, msgId, channel, customType, kind and payload bytes; whatever the
// decoder rejects (the client gets its typed error, with the request's id when it has one), the
// reader rejects too. The reader may leave a valid publish to the decoder (a `\u` escape,
// `storeInHistory`, …): the server then decodes it the general way, so the client sees the
// same outcome either way.
//
// The reply (`PublishOKTemplate`): the same bytes as the general encoder's `ok` frame, framed or not.
//
// The first byte chooses how the rest is presented: as the frame itself, as the rest of a
// publish after its `id` key, or as the text of an otherwise plain publish, so the fuzzer spends
// its time near the one shape the reader takes instead of rediscovering `{"type":"publish"`.
fuzzMain { bytes in
    guard let mode = bytes.first else { return }
    let rest = bytes.dropFirst()
    var buffer = ByteBuffer()
    switch mode % 3 {
    case 0:
        buffer.writeBytes(rest)
    case 1:
        buffer.writeString(#"{"type":"publish","id":"#)
        buffer.writeBytes(rest)
    default:
        buffer.writeString(#"{"type":"publish","id":1,"channel":"room","text":""#)
        buffer.writeBytes(rest)
        buffer.writeString(#""}"#)
    }

    let fast = FrameCodec.readPublish(buffer)
    let decoded = try? FrameCodec.decode(buffer)
    if let fast {
        guard let frame = decoded else { preconditionFailure("the fast reader took a frame the decoder rejects: \(String(buffer: buffer))") }
        precondition(frame.type == .publish, "the fast reader took a \(frame.type)")
        precondition(frame.id == fast.requestID && frame.msgId == fast.msgId, "ids differ: \(frame) / \(fast.requestID) \(String(describing: fast.msgId))")
        precondition(frame.channel == fast.channel, "channels differ")
        precondition(frame.customType == fast.customType, "customTypes differ")
        precondition(frame.storeInHistory == nil, "the fast reader dropped storeInHistory")
        precondition(fast.isText == (frame.text != nil) && (frame.text == nil) != (frame.data == nil), "kinds differ")
        let payload = Array(fast.payload.readableBytesView)
        precondition(payload == Array(frame.text.map { Data($0.utf8) } ?? frame.data ?? Data()), "payloads differ")
    }

    // The `ok` reply: its id and seq from the first 16 bytes, the epoch from the rest (any
    // string: quotes, backslashes, control characters, non-ASCII).
    guard rest.count >= 16 else { return }
    let words = rest.prefix(16).withUnsafeBytes { ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
    let id = words.0 >> (words.0 & 63), seq = words.1 >> (words.1 & 63)   // every number of digits
    let epoch: String? = mode & 4 == 0 ? String(decoding: rest.dropFirst(16), as: UTF8.self) : nil
    let template = PublishOKTemplate(epoch: epoch)
    var reply = ByteBuffer()
    template.write(id: id, seq: seq, into: &reply)
    let reference = FrameCodec.encode(Frame(type: .ok, id: id, seq: seq, epoch: epoch))
    precondition(reply == reference, "the reply differs from the encoder's: \(String(buffer: reply)) / \(String(buffer: reference))")
    precondition(reply.readableBytes == template.length(id: id, seq: seq))
    var framed = ByteBuffer()
    template.write(id: id, seq: seq, framed: true, into: &framed)
    var header = ByteBuffer()
    BinaryFrame.writeWebSocketHeader(into: &header, length: reply.readableBytes, opcode: 0x1)
    header.writeImmutableBuffer(reply)
    precondition(framed == header, "the framed reply differs")
}
