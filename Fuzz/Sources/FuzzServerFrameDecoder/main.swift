import FuzzSupport
import NIOCore
import NIOEmbedded
@testable import RTMServer

// The server's WebSocket frame decoder, as a connection drives it: the input is cut into reads
// (the first byte seeds the cut points, so split headers, split masks and split payloads are all
// reached) and fed to a `ByteToMessageHandler` on an `EmbeddedChannel`. Any bytes give frames or
// a thrown violation, never a trap, a read outside the buffer or a message larger than allowed.
let maxFrameSize = 4096

fuzzMain { bytes in
    guard let seed = bytes.first else { return }
    let channel = EmbeddedChannel(handler: ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: maxFrameSize, maxFragments: 8)))
    defer { _ = try? channel.finish() }
    var rest = bytes.dropFirst()
    var step = Int(seed % 16) + 1
    var total = 0
    while !rest.isEmpty {
        let chunk = rest.prefix(step)
        rest = rest.dropFirst(chunk.count)
        step = step * 5 % 17 + 1
        do {
            try channel.writeInbound(ByteBuffer(bytes: chunk))
        } catch {
            return   // a protocol violation: the connection is closed
        }
        while let inbound = try? channel.readInbound(as: ServerInbound.self) {
            switch inbound {
            case .frame(let frame):
                precondition(frame.maskKey == nil, "a frame handed on still masked")
                precondition(frame.data.readableBytes <= maxFrameSize)
                total += frame.data.readableBytes
            case .messages(let messages):
                for message in messages {
                    precondition(message.data.readableBytes <= maxFrameSize)
                    if message.isText { precondition(String(validating: message.data.readableBytesView, as: UTF8.self) != nil, "a text message that is not UTF-8") }
                    total += message.data.readableBytes
                }
            }
            precondition(total <= bytes.count, "more payload out than bytes in")
        }
    }
}
