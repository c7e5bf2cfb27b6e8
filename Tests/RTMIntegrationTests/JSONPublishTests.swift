import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMServer

/// JSON publishes travel like binary ones (PROTOCOL.md §2.3): the publishes of one
/// read, whichever way they were sent, are delivered together in `message` frames, and each JSON
/// one is answered with its JSON `ok`.
@Suite(.realTime)
struct JSONPublishTests {
    /// A raw WebSocket client on the test server: the upgrade, then masked frames; collects what
    /// the server sends.
    final class RawClient: @unchecked Sendable {
        let channel: any Channel
        let collector = PipelinedUpgradeTests.Collector()

        init(port: Int) async throws {
            let collector = self.collector
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
                .connect(host: "127.0.0.1", port: port).get()
            try await channel.writeAndFlush(ByteBuffer(string: "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: rtm.v1\r\n\r\n"))
        }

        /// Sends `frames` in one write.
        func send(_ frames: [ByteBuffer]) async throws {
            var bytes = ByteBuffer()
            for var frame in frames { bytes.writeBuffer(&frame) }
            try await channel.writeAndFlush(bytes)
        }

        /// The server's frames so far (after the HTTP head): opcode and payload.
        func frames() -> [(opcode: UInt8, payload: ByteBuffer)] {
            var buffer = collector.received.withLockedValue { $0 }
            guard let end = buffer.readableBytesView.firstRange(of: "\r\n\r\n".utf8) else { return [] }
            buffer.moveReaderIndex(to: end.upperBound)
            var out: [(UInt8, ByteBuffer)] = []
            while let b0: UInt8 = buffer.getInteger(at: buffer.readerIndex), let b1: UInt8 = buffer.getInteger(at: buffer.readerIndex + 1) {
                var header = 2
                var length = Int(b1 & 0x7F)
                if length == 126 { length = Int(buffer.getInteger(at: buffer.readerIndex + 2, as: UInt16.self) ?? 0); header = 4 }
                if length == 127 { length = Int(buffer.getInteger(at: buffer.readerIndex + 2, as: UInt64.self) ?? 0); header = 10 }
                guard buffer.readableBytes >= header + length else { break }
                buffer.moveReaderIndex(forwardBy: header)
                out.append((b0 & 0x0F, buffer.readSlice(length: length)!))
            }
            return out
        }

        /// Waits until `done` holds for the frames received (2 s at most).
        func waitFor(_ done: ([(opcode: UInt8, payload: ByteBuffer)]) -> Bool) async throws -> [(opcode: UInt8, payload: ByteBuffer)] {
            await firstValue(within: .seconds(2), every: .milliseconds(5)) {
                let frames = frames()
                return done(frames) ? frames : nil
            } ?? frames()
        }
    }

    /// A client frame: masked with `key` (nil: unmasked).
    static func clientFrame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8]? = [1, 2, 3, 4], rsv: UInt8 = 0) -> ByteBuffer {
        var out = ByteBuffer()
        RawPeer.appendFrame(to: &out, opcode: opcode, payload, fin: fin, masked: key != nil, key: key, rsv: rsv)
        return out
    }

    static func text(_ json: String) -> ByteBuffer { JSONPublishTests.clientFrame(0x1, Array(json.utf8), key: [0x9A, 0x17, 0xC3, 0x5E]) }

    /// A raw client logged in as alice and subscribed to `room` (without presence), and how
    /// many frames it has received so far.
    static func aliceInRoom(port: Int) async throws -> (client: RawClient, received: Int) {
        let client = try await RawClient(port: port)
        let login = Frame(type: .login, id: 1, appId: Harness.appId, userId: "alice", token: Harness.token("alice"), heartbeatInterval: 5)
        try await client.send([Self.text(String(buffer: FrameCodec.encode(login)))])
        _ = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":1"#) } }
        try await client.send([Self.text(#"{"type":"subscribe","id":2,"channel":"room","withPresence":false}"#)])
        let subscribed = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":2"#) } }
        #expect(subscribed.contains { String(buffer: $0.payload).contains(#""type":"ok""#) && String(buffer: $0.payload).contains(#""id":2"#) })
        return (client, subscribed.count)
    }

    @Test("JSON publishes of one read (with binary ones among them) are delivered in one message frame of consecutive items; each JSON one gets its ok, the binary ones one ack frame")
    func jsonPublishesOfOneReadShareAFrame() async throws {
        let harness = try await Harness.start()
        let (client, before) = try await Self.aliceInRoom(port: harness.port)

        // 12 publishes in one write: JSON (ids 10…), a binary one in the middle, JSON again.
        var frames: [ByteBuffer] = []
        for i in 0..<12 {
            if i == 5 {
                var body = ByteBuffer()
                BinaryFrame.writePublish(into: &body, requestID: 99, msgId: nil, channel: "room", customType: nil, isText: true, payload: Array("bin".utf8))
                frames.append(JSONPublishTests.clientFrame(0x2, Array(body.readableBytesView), key: [1, 2, 3, 4]))
            } else {
                frames.append(Self.text(#"{"type":"publish","id":\#(10 + i),"channel":"room","msgId":\#(500 + i),"text":"m\#(i)"}"#))
            }
        }
        try await client.send(frames)
        let received = try await client.waitFor { frames in
            frames.dropFirst(before).filter { $0.opcode == 0x2 }.compactMap { try? BinaryFrame.decode($0.payload) }
                .reduce(0) { count, frame in if case .messages(let m) = frame { count + m.count } else { count } } >= 12
        }
        let after = received.dropFirst(before)
        var messageFrames: [[BinaryFrame.Message]] = []
        var acks: [(UInt64, UInt64)] = []
        for frame in after where frame.opcode == 0x2 {
            switch try BinaryFrame.decode(frame.payload) {
            case .messages(let messages): messageFrames.append(messages)
            case .publishAcks(let a): acks += a.map { ($0.requestID, $0.seq) }
            default: Issue.record("unexpected binary frame")
            }
        }
        #expect(messageFrames.count == 1, "one read, one message frame (got \(messageFrames.map(\.count)))")
        let items = messageFrames.joined()
        #expect(items.map(\.seq) == Array(1...12))
        #expect(items.map { String(buffer: $0.payload) } == (0..<12).map { $0 == 5 ? "bin" : "m\($0)" })
        #expect(items.allSatisfy { $0.isText && $0.publisher == "alice" && $0.channel == "room" })
        #expect(acks.map(\.0) == [99] && acks.map(\.1) == [6])
        let oks = after.filter { $0.opcode == 0x1 }.compactMap { try? FrameCodec.decode($0.payload) }
        #expect(oks.map(\.type) == Array(repeating: .ok, count: 11))
        let jsonIndexes: [UInt64] = [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
        let expectedIds: [UInt64?] = jsonIndexes.map { 10 + $0 }
        let expectedSeqs: [UInt64?] = jsonIndexes.map { $0 + 1 }
        #expect(oks.map(\.id) == expectedIds)
        #expect(oks.map(\.seq) == expectedSeqs)

        // The general decoder still answers what the fast path leaves to it, in order.
        try await client.send([Self.text(#"{"type":"publish","id":30,"channel":"room","text":"\u0041"}"#),
                               Self.text(#"{"type":"publish","id":31,"channel":"bad/name","text":"x"}"#)])
        let last = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":31"#) } }
        let replies = last.filter { $0.opcode == 0x1 }.compactMap { try? FrameCodec.decode($0.payload) }
        let resent = replies.first { $0.id == 30 }
        #expect(resent?.type == .ok && resent?.seq == 13)
        #expect(replies.first { $0.id == 31 }?.code == RTMErrorCode.invalidChannelName.rawValue)
        try? await client.channel.close()
    }
}
