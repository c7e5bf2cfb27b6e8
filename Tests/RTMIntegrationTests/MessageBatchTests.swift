import Foundation
import NIOCore
import NIOEmbedded
@testable import RTMBench
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Channel messages travel in `message` frames that hold consecutive messages (PROTOCOL.md
/// §2.3): encoded once per publisher read, the same bytes for every subscriber.
@Suite(.realTime)
struct MessageBatchTests {
    static let key = ChannelKey(appId: "app", name: "room")
    static let alice = UserKey(appId: "app", userId: "alice")

    static func outgoing(_ i: Int, size: Int = 8, msgId: UInt64? = nil) -> Hub.Outgoing {
        Hub.Outgoing(requestID: UInt64(i), msgId: msgId, customType: i % 4 == 3 ? "t\(i)" : nil, isText: i % 2 == 0,
                     payload: ByteBuffer(bytes: [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: size)))
    }

    /// The WebSocket frames in `buffer`, decoded; each within the clients' frame limit.
    static func frames(_ buffer: ByteBuffer) throws -> [[BinaryFrame.Message]] {
        var b = buffer
        var frames: [[BinaryFrame.Message]] = []
        while b.readableBytes > 0 {
            let b0: UInt8 = b.readInteger()!
            #expect(b0 == 0x82)
            let b1: UInt8 = b.readInteger()!
            let length = b1 < 126 ? Int(b1) : b1 == 126 ? Int(b.readInteger(as: UInt16.self)!) : Int(b.readInteger(as: UInt64.self)!)
            #expect(length <= Limits().maxFrameBytes)
            guard case .messages(let messages) = try BinaryFrame.decode(b.readSlice(length: length)!) else {
                Issue.record("not a message frame")
                return frames
            }
            frames.append(messages)
        }
        return frames
    }

    @Test("M-3: one publisher read becomes one frame of consecutive messages; a resend is not sent again; a dropped number splits the frame; replay regroups what was kept")
    func publishBatches() throws {
        var config = ServerConfiguration()
        config.channelReplayMax = 32
        var state = HubState(configuration: config)
        state.setLoop(0, hasSubscribers: true, channel: Self.key)   // a subscriber on this node: the run is encoded
        let first = (1...5).map { Self.outgoing($0, msgId: UInt64(100 + $0)) }
        let (seqs, epoch, buffer, _) = state.publish(first, channel: Self.key, publisher: Self.alice, nowMillis: 1_000, dropSeq: 3,
                                              allocator: ByteBufferAllocator())
        #expect(seqs == [1, 2, 3, 4, 5])
        let frames = try Self.frames(try #require(buffer))
        #expect(frames.joined().allSatisfy { $0.epoch == epoch })   // M-2: the acks' epoch is the delivered one
        #expect(frames.map { $0.map(\.seq) } == [[1, 2], [4, 5]])
        for message in frames.joined() {
            // A number from the wire, not trusted as an index (a bad one would trap the whole run).
            guard let sent = first.indices.contains(Int(message.seq) - 1) ? first[Int(message.seq) - 1] : nil else {
                Issue.record("seq \(message.seq) was never published"); continue
            }
            #expect(message.payload == sent.payload && message.customType == sent.customType && message.isText == sent.isText)
            #expect(message.channel == "room" && message.publisher == "alice" && message.ts == 1_000)
        }

        // A resend of message 2 (same msgId) and two new ones: the resend gets its number back.
        let second = [Self.outgoing(2, msgId: 102), Self.outgoing(6, msgId: 106), Self.outgoing(7, msgId: 107)]
        let (seqs2, epoch2, buffer2, _) = state.publish(second, channel: Self.key, publisher: Self.alice, nowMillis: 2_000, dropSeq: 3,
                                                allocator: ByteBufferAllocator())
        #expect(seqs2 == [2, 6, 7] && epoch2 == epoch)
        #expect(try Self.frames(try #require(buffer2)).map { $0.map(\.seq) } == [[6, 7]])

        // A subscriber at 1 missed 2…7 but 3 (never sent): replayed in frames of consecutive
        // numbers from one publishing time, the loss not counted (3 was dropped on purpose).
        #expect(state.channels[Self.key]!.epoch == epoch)
        let replay = state.replay(Self.key, after: ChannelPosition(epoch: epoch, seq: 1), nowMillis: 2_000)
        let replayed = try replay.messages.map { try Self.frames($0) }.joined()
        #expect(replayed.map { $0.map(\.seq) } == [[2], [4, 5], [6, 7]])
        #expect(replayed.joined().map(\.payload) == [2, 4, 5, 6, 7].map { Self.outgoing($0).payload })
        #expect(replay.lost == nil)
    }

    @Test("M-2: a large read, and its replay, are split into frames within the clients' 64 KB frame limit (long names and custom types included), numbers consecutive across them")
    func largeBatchesSplit() throws {
        // 4,052-byte payloads with 64-character names: 16 items fill 65,408 bytes, which only
        // fits when the header is counted too.
        for (size, long, count) in [(4_000, false, 40), (4_052, true, 40), (32 * 1024, true, 8), (700, true, 200)] {
            var state = HubState(configuration: ServerConfiguration())
            let name = String(repeating: "c", count: 64)
            let key = long ? ChannelKey(appId: "app", name: name) : Self.key
            let publisher = long ? UserKey(appId: "app", userId: String(repeating: "u", count: 64)) : Self.alice
            state.setLoop(0, hasSubscribers: true, channel: key)
            let messages = (1...count).map { i in
                Hub.Outgoing(requestID: UInt64(i), msgId: nil, customType: long ? String(repeating: "t", count: 32) : nil, isText: false,
                             payload: ByteBuffer(bytes: [UInt8](repeating: UInt8(i), count: size)))
            }
            let (_, _, buffer, _) = state.publish(messages, channel: key, publisher: publisher, nowMillis: 1, dropSeq: nil,
                                               allocator: ByteBufferAllocator())
            let frames = try Self.frames(try #require(buffer))   // checks every frame's size
            #expect(frames.count > 1)
            #expect(Array(frames.joined().map(\.seq)) == Array(1...UInt64(count)))
            #expect(frames.joined().allSatisfy { $0.payload.readableBytes == size })

            // M-2: a replay of the kept messages (the last 32) is split the same way.
            let replay = state.replay(key, after: ChannelPosition(epoch: state.channels[key]!.epoch, seq: 0), nowMillis: 1)
            let replayed = try replay.messages.flatMap { try Self.frames($0) }   // checks every frame's size
            #expect(Array(replayed.joined().map(\.seq)) == Array(UInt64(max(1, count - 31))...UInt64(count)))
        }
    }
}

/// The load generator against a real server: it reads batched frames, and its loss counter
/// works (a message the server deliberately drops is reported as lost).
@Suite(.realTime)
struct BenchCounterTests {
    /// A 0.1 s warm-up and 0.3 s measured run against the test server, quiet.
    static func shortRun(port: Int) -> LoadOptions {
        var options = LoadOptions()
        options.port = port
        options.target = .rtm(appId: Harness.appId, certificate: Harness.certificate)
        options.seconds = 0.3
        options.warmup = 0.1
        options.threads = 2
        options.progress = false
        return options
    }

    @Test("rtm bench fanout: every subscriber reports the one message the server dropped (--test-drop-seq) as lost, nothing reordered; an SDK subscriber gets the same stream")
    func benchReportsDroppedMessage() async throws {
        let harness = try await Harness.start { $0.testDropSeq = 20 }
        let (client, events) = try await Harness.client("watcher", port: harness.port)
        _ = try await client.subscribe("bench-0")

        var options = Self.shortRun(port: harness.port)
        options.subscribersPerGroup = 3
        options.window = 64   // max rate, at most 64 in flight: many messages per read
        let result = try await LoadRun.run(options) { _ in }
        #expect(result.published > 100)
        #expect(result.lost == 3, "one dropped message, seen missing by each of 3 subscribers")
        #expect(result.outOfOrder == 0 && result.undelivered == 0 && result.disconnected == 0)

        // The SDK decodes the same frames: every published message but number 20, in order.
        // Built from the measured count without a range that could trap: a run that published
        // nothing fails the expectation instead of crashing the test process.
        let wanted: [UInt64] = stride(from: 1, through: result.published, by: 1).filter { $0 != 20 }
        let seqs: () async -> [UInt64] = { await events.all.compactMap { if case .message(let m) = $0 { m.seq } else { nil } } }
        _ = await eventually(within: .seconds(10), every: .milliseconds(50)) { await seqs().count >= wanted.count }
        #expect(await seqs() == wanted)
        await client.logout()
    }

    /// A short run against a fresh test server, shaped by `configure`.
    static func run(_ configure: (inout LoadOptions) -> Void) async throws -> LoadResult {
        let harness = try await Harness.start()
        var options = Self.shortRun(port: harness.port)
        configure(&options)
        return try await LoadRun.run(options) { _ in }
    }

    @Test("M-1: rtm bench pairs --users: user messages stored, delivered, acknowledged per read (cumulatively); none lost or reordered, no errors")
    func benchUserMessages() async throws {
        let result = try await Self.run { options in
            options.groups = 4
            options.subscribersPerGroup = 1
            options.userMessages = true
        }
        Self.expectClean(result, published: 40)
        #expect(result.deliveriesPerSecond > 0)
    }

    @Test("rtm bench --rate: publishers paced by one schedule per loop, each at its own phase, send the asked rate in all (neither bursts of catch-up nor shortfall), none lost")
    func benchFixedRate() async throws {
        let result = try await Self.run { options in
            options.groups = 6   // three per loop
            options.subscribersPerGroup = 1
            options.userMessages = true
            options.rate = 600
            options.seconds = 0.5
        }
        #expect(result.errors == 0 && result.lost == 0 && result.outOfOrder == 0 && result.undelivered == 0)
        // 600/s over the 0.1 s warm-up and the 0.5 s measured: about 360 in all.
        #expect((320...400).contains(result.published), "published \(result.published)")
        #expect(abs(result.publishedPerSecond - 600) < 90, "\(result.publishedPerSecond)/s")
    }

    @Test("rtm bench: publish → acknowledged (stored) timed for every binary publish of the measured interval, each ack matched to its send in order; no such figure for user messages")
    func benchTimesAcknowledgements() async throws {
        let result = try await Self.run { options in
            options.groups = 4
            options.subscribersPerGroup = 1
            options.rate = 800
            options.seconds = 0.5
        }
        Self.expectClean(result, published: 300)
        let acked = try #require(result.acked)
        // 800/s for the 0.5 s measured: about 400 sent in it, every one acknowledged.
        #expect((340...460).contains(acked.count ?? 0), "\(acked.count ?? 0) timed of \(result.published)")
        #expect(acked.p50Micros > 0 && acked.maxMicros < 1_000_000, "\(acked.text)")
        let users = try await Self.run { options in
            options.groups = 2
            options.subscribersPerGroup = 1
            options.userMessages = true
        }
        #expect(users.acked == nil)
    }

    /// More than `published` messages, no error, none lost, reordered, undelivered or cut off.
    static func expectClean(_ result: LoadResult, published: UInt64, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.published > published, sourceLocation: sourceLocation)
        #expect(result.errors == 0, sourceLocation: sourceLocation)
        #expect(result.lost == 0 && result.outOfOrder == 0 && result.undelivered == 0 && result.disconnected == 0, sourceLocation: sourceLocation)
    }

    @Test("rtm bench fanout --json-publish: JSON publish requests (masked, one per frame) delivered in order, none lost, no error; an honest run lists no shortcut")
    func benchJSONPublish() async throws {
        let result = try await Self.run { options in
            options.subscribersPerGroup = 3
            options.window = 64
            options.jsonPublish = true
        }
        Self.expectClean(result, published: 100)
        #expect(result.publishes == "json" && result.shortcuts.isEmpty && !result.text.contains("SHORTCUTS"))
    }

    @Test("rtm bench --unmasked-shortcut / --no-msg-id: the run still works and every figure it prints names the shortcut")
    func benchShortcutsAreLabelled() async throws {
        let result = try await Self.run { options in
            options.subscribersPerGroup = 1
            options.unmaskedShortcut = true
            options.msgIds = false
        }
        #expect(result.lost == 0 && result.outOfOrder == 0 && result.undelivered == 0)
        #expect(result.shortcuts.count == 2)
        #expect(result.text.contains("SHORTCUTS") && result.text.contains("unmasked-shortcut") && result.text.contains("no-msg-id"))
        let json = String(decoding: try JSONEncoder().encode(result), as: UTF8.self)
        #expect(json.contains("\"shortcuts\":[\"unmasked-shortcut"))
    }

    @Test("the generator's socket reads every frame whole however the reads split the stream (one byte at a time, inside headers of every length, many frames per read)")
    func benchSocketSplits() throws {
        final class Recorder: BenchSocketDelegate {
            var messages: [[UInt8]] = []
            func opened(_ socket: BenchSocket) {}
            func message(_ socket: BenchSocket, opcode: UInt8, payload: ByteBuffer, now: UInt64) {
                messages.append([opcode] + Array(payload.readableBytesView))
            }
            func readComplete(_ socket: BenchSocket) {}
            func closed(_ socket: BenchSocket) {}
        }
        var stream = ByteBuffer(string: "HTTP/1.1 101 Switching Protocols\r\n\r\n")
        var expected: [[UInt8]] = []
        for (index, (opcode, length)) in [(1, 5), (2, 300), (2, 70_000), (1, 0), (2, 125), (2, 126), (1, 12), (2, 65_535), (2, 3)].enumerated() {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
            stream.writeInteger(UInt8(0x80 | opcode))
            if length < 126 {
                stream.writeInteger(UInt8(length))
            } else if length <= 65_535 {
                stream.writeInteger(UInt8(126))
                stream.writeInteger(UInt16(length))
            } else {
                stream.writeInteger(UInt8(127))
                stream.writeInteger(UInt64(length))
            }
            stream.writeBytes(payload)
            expected.append([UInt8(opcode)] + payload)
        }
        for chunk in [1, 2, 3, 7, 13, 1_000, 4_096, 65_536, stream.readableBytes] {
            let channel = EmbeddedChannel()
            let socket = BenchSocket(index: 0, host: "127.0.0.1", port: 1, path: "/", subprotocol: nil)
            let recorder = Recorder()
            socket.delegate = recorder
            try channel.pipeline.syncOperations.addHandler(socket)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            var rest = stream
            while rest.readableBytes > 0 {
                try channel.writeInbound(rest.readSlice(length: min(chunk, rest.readableBytes))!)
            }
            withExtendedLifetime(recorder) {
                #expect(recorder.messages.count == expected.count, "reads of \(chunk) bytes")
                #expect(recorder.messages == expected, "reads of \(chunk) bytes")
            }
            _ = try channel.finish()
        }
    }

    @Test("H-1: the generator's heartbeats are spread over their period as independent clients' are: any run of consecutive ticks as long as the period pings every peer once, each tick a slice of at most one in a hundred")
    func heartbeatsSpread() {
        for count in [0, 1, 99, 100, 101, 15_000] {
            for first in [0, 37, 250] {
                var pinged = [Int](repeating: 0, count: count)
                for tick in first..<(first + PeerList.slices) {
                    let slice = Array(PeerList.slice(tick: tick, of: count))
                    #expect(slice.count <= (count + PeerList.slices - 1) / PeerList.slices)
                    for index in slice { pinged[index] += 1 }
                }
                #expect(pinged.allSatisfy { $0 == 1 }, "\(count) peers from tick \(first)")
            }
        }
    }

    @Test("the generator masks as RFC 6455 §5.3 says: a random key per frame (never zero in practice), payload XORed with key byte i mod 4, at every length")
    func masking() {
        var masker = FrameMasker()
        let keys = (0..<1000).map { _ in masker.nextKey() }
        #expect(Set(keys).count > 990 && !keys.contains(0))
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 100, 125, 126, 1000, 70_000] {
            var buffer = ByteBuffer()
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 31 + 7) }
            masker.writeFrame(into: &buffer, opcode: 2, length: length) { $0.writeBytes(payload) }
            var frame = buffer
            let b0: UInt8 = frame.readInteger()!
            let b1: UInt8 = frame.readInteger()!
            #expect(b0 == 0x82 && b1 & 0x80 != 0)
            var size = Int(b1 & 0x7F)
            if size == 126 { size = Int(frame.readInteger(as: UInt16.self)!) } else if size == 127 { size = Int(frame.readInteger(as: UInt64.self)!) }
            #expect(size == length)
            let key: [UInt8] = frame.readBytes(length: 4)!
            let masked: [UInt8] = frame.readBytes(length: length)!
            #expect(masked.enumerated().map { $0.element ^ key[$0.offset % 4] } == payload)
            // The one-pass form (header, key and payload stored through a pointer) writes the same frame.
            var stored = ByteBuffer()
            masker.writeFrame(into: &stored, opcode: 2, length: length) { out in
                payload.withUnsafeBytes { if length > 0 { out.copyMemory(from: $0.baseAddress!, byteCount: length) } }
            }
            let storedKey: [UInt8] = stored.getBytes(at: stored.readerIndex + stored.readableBytes - length - 4, length: 4)!
            #expect(stored.readableBytes == buffer.readableBytes)
            #expect(stored.getBytes(at: 0, length: stored.readableBytes - length - 4) == buffer.getBytes(at: 0, length: buffer.readableBytes - length - 4))
            let storedPayload: [UInt8] = stored.getBytes(at: stored.readableBytes - length, length: length)!
            #expect(storedPayload.enumerated().map { $0.element ^ storedKey[$0.offset % 4] } == payload)
        }
        var unmasked = FrameMasker(unmasked: true)
        var buffer = ByteBuffer()
        unmasked.writeFrame(into: &buffer, opcode: 1, length: 2) { $0.writeString("hi") }
        #expect(Array(buffer.readableBytesView) == [0x81, 0x82, 0, 0, 0, 0, UInt8(ascii: "h"), UInt8(ascii: "i")])
        var stored = ByteBuffer()
        unmasked.writeFrame(into: &stored, opcode: 1, length: 2) { $0.copyMemory(from: "hi", byteCount: 2) }
        #expect(stored == buffer)
    }

    @Test("rtm bench sdk: SDK publisher and SDK subscribers through the public API; every acknowledged publish delivered once, in order")
    func benchSDK() async throws {
        let harness = try await Harness.start()
        var options = SDKRun.Options()
        options.port = harness.port
        options.appId = Harness.appId
        options.certificate = Harness.certificate
        options.subscribers = 3
        options.window = 32
        options.seconds = 0.3
        options.warmup = 0.1
        options.progress = false
        let result = try await SDKRun.run(options) { _ in }
        #expect(result.published > 50)
        #expect(result.publishErrors == 0, "\(result.firstError ?? "")")
        #expect(result.lost == 0 && result.duplicated == 0 && result.reordered == 0)
        #expect(result.deliveriesPerSecond > 0 && result.latency.p50Micros > 0)
    }

    @Test("the bench's user-message text carries send time and sequence number, read back from a delivered payload")
    func userMessageText() {
        let text = UserMessageText.make(sent: 123_456_789, seq: 42, size: 100)
        #expect(text.utf8.count == 100)
        let parsed = Array(text.utf8).withUnsafeBytes { UserMessageText.parse($0) }
        #expect(parsed.map { [$0.0, $0.1] } == [123_456_789, 42])
        #expect(Array("too short".utf8).withUnsafeBytes { UserMessageText.parse($0) } == nil)
        // Every letter counts, the full 64 bits of each number; a letter outside `@`…`O`
        // anywhere in either number is not a bench text.
        for (sent, seq) in [(0, 0), (1, 9), (12_345_678_901_234_567_890, 17_765_432_109_876_543_210),
                            (0x8000_0000_0000_0000, 0xFFFF_FFFF), (UInt64.max, 0x1_0000_0000)] as [(UInt64, UInt64)] {
            let bytes = Array(UserMessageText.make(sent: sent, seq: seq, size: 32).utf8)
            #expect(bytes.count == 32 && bytes.allSatisfy { (0x40...0x4F).contains($0) })
            #expect(bytes.withUnsafeBytes { UserMessageText.parse($0) }.map { [$0.0, $0.1] } == [sent, seq])
            for position in [0, 7, 8, 15, 16, 23, 24, 31] {
                for bad in [UInt8(ascii: "?"), UInt8(ascii: "P"), UInt8(ascii: "0"), UInt8(ascii: "x"), 0xC0] {
                    var broken = bytes
                    broken[position] = bad
                    #expect(broken.withUnsafeBytes { UserMessageText.parse($0) } == nil, "\(position)")
                }
            }
        }
    }
}
