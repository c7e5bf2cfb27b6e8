import Foundation
import NIOCore
import NIOPosix
import NIOWebSocket
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// A raw protocol connection for sending arbitrary frames (the SDK would refuse to).
final class RawConnection: Sendable {
    let channel: any Channel
    let frames: AsyncRecorder<Frame>
    private let continuation: AsyncStream<Frame>.Continuation

    private init(channel: any Channel, frames: AsyncRecorder<Frame>, continuation: AsyncStream<Frame>.Continuation) {
        self.channel = channel
        self.frames = frames
        self.continuation = continuation
    }

    static func open(port: Int) async throws -> RawConnection {
        let (stream, continuation) = AsyncStream.makeStream(of: Frame.self)
        let recorder = AsyncRecorder(stream)
        let ready = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: (any Channel).self)
        ClientTransport.connect(
            endpoint: .init("ws://127.0.0.1:\(port)")!, eventLoop: ready.futureResult.eventLoop,
            connectTimeout: .seconds(2), maxFrameSize: 1 << 20,
            onReady: { ready.succeed($0) },
            onFrame: { frame, _ in if let frame { continuation.yield(frame) } },
            onClose: { _ in continuation.finish(); ready.fail(ChannelError.ioOnClosedChannel) })
        let channel = try await ready.futureResult.get()
        return RawConnection(channel: channel, frames: recorder, continuation: continuation)
    }

    func send(_ frame: Frame) { ClientTransport.send(frame, on: channel) }

    func sendRaw(_ text: String) {
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text)), promise: nil)
    }

    func sendBinary(_ buffer: ByteBuffer) {
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: buffer), promise: nil)
    }

    /// The reply to request `id`.
    func reply(_ id: UInt64) async -> Frame? {
        await frames.first(within: soon) { $0.id == id }
    }

    func login(_ user: String) async -> Frame? {
        send(Frame(type: .login, id: 1, appId: Harness.appId, userId: user, token: Harness.token(user), heartbeatInterval: 5, presenceTimeout: 5))
        return await reply(1)
    }
}

@Suite(.realTime, .serialized)
struct BadInputTests {
    @Test("Malformed frames, unknown types, bad names and oversize payloads get typed errors; the server serves everyone else")
    func typedErrors() async throws {
        let harness = try await Harness.start()
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let raw = try await RawConnection.open(port: harness.port)

        // Before login: only login and ping.
        raw.send(Frame(type: .publish, id: 7, channel: "room", text: "x"))
        #expect(await raw.reply(7)?.code == RTMErrorCode.notLogin.rawValue)

        #expect(await raw.login("mallory")?.type == .ok)

        raw.sendRaw("{not json")
        let malformed = await raw.frames.first(within: soon) { $0.type == .error && $0.id == nil }
        #expect(malformed?.code == RTMErrorCode.invalidFrame.rawValue)
        #expect(malformed?.reason?.contains("malformed") == true)

        raw.sendRaw(#"{"type":"teleport","id":20}"#)
        let unknown = await raw.reply(20)
        #expect(unknown?.code == RTMErrorCode.invalidFrame.rawValue)
        #expect(unknown?.reason?.contains("teleport") == true)

        raw.sendRaw(#"{"type":"publish","id":"not-a-number"}"#)
        let wrongType = await raw.frames.first(within: soon) { $0.reason?.contains("'id'") == true }
        #expect(wrongType?.code == RTMErrorCode.invalidFrame.rawValue)

        // A value that does not fit its field names the field and the problem in our words,
        // never Foundation's ("Number … is not representable in Swift", "… not valid Base64").
        raw.sendRaw(#"{"type":"publish","id":1.5,"channel":"room","text":"x"}"#)
        let fraction = await raw.frames.first(within: soon) { $0.reason?.contains("got 1.5") == true }
        #expect(fraction?.reason == "malformed frame: invalid value for field 'id': must be a whole number from 0 to 9223372036854775807, got 1.5")
        #expect(fraction?.id == nil)
        raw.sendRaw(#"{"type":"publish","id":28,"channel":"room","data":"@@"}"#)
        #expect(await raw.reply(28)?.reason == "malformed frame: invalid value for field 'data': must be a base64 string")
        raw.sendRaw(#"{"type":"login","id":29,"heartbeatInterval":1e400}"#)
        #expect(await raw.reply(29)?.reason == "malformed frame: invalid value for field 'heartbeatInterval': the number is out of range")

        raw.send(Frame(type: .subscribe, id: 21, channel: "bad/name"))
        #expect(await raw.reply(21)?.code == RTMErrorCode.invalidChannelName.rawValue)
        raw.send(Frame(type: .subscribe, id: 22, channel: String(repeating: "a", count: 65)))
        #expect(await raw.reply(22)?.code == RTMErrorCode.invalidChannelName.rawValue)

        raw.send(Frame(type: .publish, id: 23, channel: "room", text: String(repeating: "x", count: 32 * 1024 + 1)))
        let oversize = await raw.reply(23)
        #expect(oversize?.code == RTMErrorCode.channelMessageLengthExceedLimitation.rawValue)

        raw.send(Frame(type: .publish, id: 24, channel: "room"))
        #expect(await raw.reply(24)?.code == RTMErrorCode.channelInvalidMessage.rawValue)

        raw.send(Frame(type: .publish, id: 25, channel: "room", text: "x", customType: String(repeating: "t", count: 33)))
        #expect(await raw.reply(25)?.code == RTMErrorCode.channelCustomTypeLengthOverflow.rawValue)
        // Counted in code points, as the admin API counts: 17 "👍🏽" are 34.
        raw.send(Frame(type: .publish, id: 125, channel: "room", text: "x", customType: String(repeating: "👍🏽", count: 17)))
        #expect(await raw.reply(125)?.code == RTMErrorCode.channelCustomTypeLengthOverflow.rawValue)

        raw.send(Frame(type: .sendUser, id: 26, userId: "null", text: "x"))
        #expect(await raw.reply(26)?.code == RTMErrorCode.invalidUserId.rawValue)

        // Nothing of that reached bob, and the same connection still works.
        raw.send(Frame(type: .publish, id: 27, channel: "room", text: "valid"))
        #expect(await raw.reply(27)?.type == .ok)
        let received = await bobEvents.first(within: soon) { $0.messageEvent != nil }
        #expect(received?.messageEvent?.text == "valid")
        #expect(await bobEvents.matching { $0.messageEvent != nil }.count == 1)
        #expect(await bob.linkState == .connected)

        raw.channel.close(promise: nil)
        await bob.logout()
    }

    @Test("M-1, §2.8: a stored text with a NUL character (a user message, JSON or binary; a publish kept in history) is refused with its id before anything is stored; a channel message not stored carries it")
    func nulInStoredText() async throws {
        let harness = try await Harness.start()   // stopped by the .realTime trait's scope
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let raw = try await RawConnection.open(port: harness.port)
        #expect(await raw.login("mallory")?.type == .ok)
        let nul = "zero\u{0}byte"

        raw.send(Frame(type: .sendUser, id: 40, userId: "bob", text: nul))
        let json = await raw.reply(40)
        #expect(json?.code == RTMErrorCode.channelInvalidMessage.rawValue && json?.reason?.contains("NUL") == true, "\(String(describing: json))")
        var binary = ByteBuffer()
        BinaryFrame.writeSendUser(into: &binary, requestID: 41, msgId: nil, receiver: "bob", customType: nil, isText: true,
                                  payload: Array(nul.utf8))
        raw.sendBinary(binary)
        #expect(await raw.reply(41)?.code == RTMErrorCode.channelInvalidMessage.rawValue)
        raw.send(Frame(type: .publish, id: 42, channel: "room", text: nul).with { $0.storeInHistory = true })
        #expect(await raw.reply(42)?.code == RTMErrorCode.channelInvalidMessage.rawValue)

        // Not stored: delivered whole. Then a valid user message, the only one bob gets.
        raw.send(Frame(type: .publish, id: 43, channel: "room", text: nul))
        #expect(await raw.reply(43)?.type == .ok)
        raw.send(Frame(type: .sendUser, id: 44, userId: "bob", text: "valid"))
        #expect(await raw.reply(44)?.type == .ok)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "valid" } != nil)
        #expect(await bobEvents.matching { $0.messageEvent != nil }.map { $0.messageEvent?.text } == [nul, "valid"])
        #expect(try await bob.getMessages(channel: "room").messages.isEmpty)
        raw.channel.close(promise: nil)
        await bob.logout()
    }

    @Test("SDK-side limits are checked before anything is sent")
    func sdkLimits() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        do { try await alice.subscribe(""); Issue.record("empty channel accepted") } catch { #expect(error.code == .invalidChannelName) }
        do {
            try await alice.publish(channel: "room", data: Data(count: 32 * 1024 + 1))
            Issue.record("oversize accepted")
        } catch {
            #expect(error.code == .channelMessageLengthExceedLimitation)
            #expect(error.reason.contains("32768"))
        }
        do {
            try await alice.publish(toUser: "bob", message: "zero\u{0}byte")
            Issue.record("a user message with NUL accepted")
        } catch {
            #expect(error.code == .channelInvalidMessage && error.reason.contains("NUL"))
        }
        do {
            try await alice.publish(channel: "room", message: "zero\u{0}byte", storeInHistory: true)
            Issue.record("a history text with NUL accepted")
        } catch {
            #expect(error.code == .channelInvalidMessage)
        }
        await alice.logout()
    }

    @Test("Limits: more than 50 channels per client is a typed error")
    func channelLimit() async throws {
        let harness = try await Harness.start { $0.limits.maxChannelsPerClient = 3 }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        for i in 0..<3 { try await alice.subscribe("c\(i)") }
        do { try await alice.subscribe("c3"); Issue.record("over the limit") } catch { #expect(error.code == .channelInstanceExceedLimitation) }
        await alice.logout()
    }

    @Test("Upgrade without the rtm.v1 subprotocol is refused with a 400 explaining what is expected")
    func versionNegotiation() async throws {
        let harness = try await Harness.start()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: harness.port).get()
        let reply = channel.eventLoop.makePromise(of: String.self)
        try await channel.pipeline.addHandler(LineCollector(promise: reply)).get()
        let request = "GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        let text = try await reply.futureResult.get()
        #expect(text.hasPrefix("HTTP/1.1 400"))
        #expect(text.contains("rtm.v1"))
        try? await channel.close()
    }
}

/// Collects everything until the peer closes.
final class LineCollector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private var text = ""
    private let promise: EventLoopPromise<String>
    init(promise: EventLoopPromise<String>) { self.promise = promise }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        text += buffer.readString(length: buffer.readableBytes) ?? ""
    }
    func channelInactive(context: ChannelHandlerContext) { promise.succeed(text) }
}
