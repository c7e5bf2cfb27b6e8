import FuzzSupport
import NIOCore
import RTMProtocol

// The JSON frame codec (text messages from clients, and the server's replies the SDK reads): any
// bytes decode to a frame or a `FrameDecodingError`, never a trap; a decoded frame survives a
// round trip; the ping fast path agrees with the full decoder.
fuzzMain { bytes in
    let buffer = ByteBuffer(bytes: bytes)
    let ping = FrameCodec.fastPing(buffer)
    guard let frame = try? FrameCodec.decode(buffer) else { return }
    if let ping {
        precondition(frame.type == .ping && frame.ts == ping, "fastPing disagrees with decode: \(frame)")
    }
    let again = try? FrameCodec.decode(FrameCodec.encode(frame))
    precondition(again == frame, "round trip changed the frame: \(frame) → \(String(describing: again))")
}
