import Atomics
import Foundation
import NIOCore
import RTMAuth
import RTMProtocol

/// Login and handshake for one benchmark connection (both roles). Confined to its event loop:
/// other threads reach it only through `loop.execute` / `submit`.
class BenchPeer: BenchSocketDelegate, @unchecked Sendable {
    let socket: BenchSocket
    let target: BenchTarget
    let userId: String
    let channel: String
    let subscribe: Bool
    /// User-to-user messages: a receiver does not subscribe to a channel.
    let userMessages: Bool
    let ready: EventLoopPromise<Void>
    let loop: any EventLoop
    private(set) var readyDone = false
    var closedFlag = false
    /// Sends its protocol pings to a floor server too (the idle floor answers them; the
    /// fan-out floor server does not expect them).
    var pingsFloor = false

    init(socket: BenchSocket, target: BenchTarget, userId: String, channel: String, subscribe: Bool, userMessages: Bool, loop: any EventLoop) {
        self.socket = socket
        self.target = target
        self.userId = userId
        self.channel = channel
        self.subscribe = subscribe
        self.userMessages = userMessages
        self.loop = loop
        self.ready = loop.makePromise()
        socket.delegate = self
    }

    func opened(_ socket: BenchSocket) {
        switch target {
        case .floor: socket.sendText(subscribe ? "SUB" : "PUB")
        case .rtm: sendLogin()
        }
    }

    private func sendLogin() {
        guard case .rtm(let appId, let certificate, let capabilities) = target else { return }
        var token = ""
        var capability: String?
        let now = UInt32(Date().timeIntervalSince1970)
        if let certificate {
            token = AccessToken006.buildRTMToken(appId: appId, appCertificate: certificate, userId: userId,
                                                 privilegeExpireTimestamp: now + 3600)
            capability = capabilities.map {
                CapabilityToken.mint($0, appId: appId, userId: userId, appCertificate: certificate, issuedAt: now, expiresAt: now + 3600)
            }
        }
        let login = Frame(type: .login, id: 1, appId: appId, userId: userId, token: token, heartbeatInterval: 5, presenceTimeout: 5)
            .with {
                $0.binaryUser = userMessages ? true : nil   // user messages in the binary form (§2.3)
                $0.capability = capability
            }
        socket.sendText(String(buffer: FrameCodec.encode(login)))
    }

    /// A text frame during the handshake (or an error later).
    func handshake(_ payload: ByteBuffer) {
        if case .floor = target {
            if String(buffer: payload) == "OK" { markReady() }
            return
        }
        guard let frame = try? FrameCodec.decode(payload) else { return }
        switch (frame.type, frame.id) {
        case (.ok, 1):
            if subscribe && !userMessages {
                socket.sendText(String(buffer: FrameCodec.encode(Frame(type: .subscribe, id: 2, channel: channel, withPresence: false))))
            } else {
                markReady()
            }
        case (.ok, 2):
            markReady()
        case (.error, 1) where frame.code == RTMErrorCode.loginNoServerResources.rawValue:
            // Admission control: back off a little and try again (T-9).
            loop.scheduleTask(in: .milliseconds(Int64.random(in: 50...400))) { [self] in sendLogin() }
        case (.error, _):
            failed("\(frame.type) \(frame.code ?? 0): \(frame.reason ?? "")")
        default:
            break
        }
    }

    func markReady() {
        guard !readyDone else { return }
        readyDone = true
        ready.succeed(())
    }

    func failed(_ reason: String) {
        guard !readyDone else { return }
        readyDone = true
        ready.fail(BenchError("\(userId): \(reason)"))
    }

    func message(_ socket: BenchSocket, opcode: UInt8, payload: ByteBuffer, now: UInt64) {
        if opcode == 1 { handshake(payload) }
    }

    func readComplete(_ socket: BenchSocket) {}

    func closed(_ socket: BenchSocket) {
        closedFlag = true
        failed("connection closed during the handshake")
    }

    /// A protocol ping (the rtm server counts inbound frames as life).
    func ping() {
        guard !closedFlag, target != .floor || pingsFloor else { return }
        socket.sendText(#"{"type":"ping"}"#)
    }
}

/// A subscriber: checks order and loss by the publisher's sequence numbers, records latency.
final class BenchSubscriber: BenchPeer, @unchecked Sendable {
    let stats: LoopStats
    let progress = ManagedAtomic<UInt64>(0)
    private var last: UInt64 = 0
    /// The measured interval (CLOCK_MONOTONIC ns of the send time), set before publishing.
    var measure: (start: UInt64, end: UInt64) = (.max, .max)

    /// Every payload has this size (the bench's own messages): a message frame holding
    /// anything else is not ours.
    let payloadSize: Int
    /// The server speaks our protocol (else the floor's: one payload per binary frame).
    private let isRTM: Bool

    /// User messages: the highest id received in the current read, acknowledged at its end.
    private var ackUpTo: UInt64 = 0

    init(socket: BenchSocket, target: BenchTarget, userId: String, channel: String, userMessages: Bool, loop: any EventLoop,
         stats: LoopStats, payloadSize: Int) {
        self.stats = stats
        self.payloadSize = payloadSize
        if case .rtm = target { isRTM = true } else { isRTM = false }
        super.init(socket: socket, target: target, userId: userId, channel: channel, subscribe: true, userMessages: userMessages, loop: loop)
    }

    override func message(_ socket: BenchSocket, opcode: UInt8, payload: ByteBuffer, now: UInt64) {
        guard opcode == 2 else {
            if opcode == 1 { handshake(payload) }
            return
        }
        payload.withUnsafeReadableBytes { bytes in
            guard isRTM else {
                if bytes.count >= 16 { received(bytes.baseAddress!, now: now) }
                return
            }
            if userMessages {
                receivedUserMessages(bytes, now: now)
                return
            }
            // A message frame (PROTOCOL.md §2.3): a header, then items (flags, [customType],
            // length, payload) to the end. The bench's payloads start with send time and seq.
            guard bytes.count > 2, bytes[0] == BinaryFrame.messageOp else { return }
            var at = 2
            guard BinaryFrame.readVarint(bytes, at: &at) != nil, BinaryFrame.readVarint(bytes, at: &at) != nil else { return }   // seq, ts
            for _ in 0..<3 {   // epoch, channel, publisher
                guard at < bytes.count else { return }
                at += 1 + Int(bytes[at])
            }
            while at < bytes.count {
                let flags = bytes[at]
                at += 1
                if flags & BinaryFrame.Flag.hasCustomType != 0 {
                    guard at < bytes.count else { return }
                    at += 1 + Int(bytes[at])
                }
                guard let length = BinaryFrame.readVarint(bytes, at: &at), length == payloadSize, at + payloadSize <= bytes.count else { return }
                if flags & BinaryFrame.Flag.text != 0 {
                    // Published as JSON text: `UserMessageText`'s letters.
                    guard let (sent, seq) = UserMessageText.parse(bytes.baseAddress! + at) else { return }
                    record(sent: sent, seq: seq, now: now)
                } else {
                    received(bytes.baseAddress! + at, now: now)
                }
                at += payloadSize
            }
        }
    }

    /// A binary user-messages frame (PROTOCOL.md §2.3, `0x84`): a header, then items (msgId,
    /// ts, publisher, flags, [customType], length, payload) to the end. The payloads are the
    /// bench's texts (`UserMessageText`: send time and sequence number).
    private func receivedUserMessages(_ bytes: UnsafeRawBufferPointer, now: UInt64) {
        guard bytes.count > 3, bytes[0] == BinaryFrame.userMessageOp else { return }
        var at = 3 + Int(bytes[2])   // op, flags, epoch
        while at < bytes.count {
            guard let id = BinaryFrame.readVarint(bytes, at: &at), BinaryFrame.readVarint(bytes, at: &at) != nil, at < bytes.count else { return }
            at += 1 + Int(bytes[at])   // publisher
            guard at < bytes.count else { return }
            let flags = bytes[at]
            at += 1
            if flags & BinaryFrame.Flag.hasCustomType != 0 {
                guard at < bytes.count else { return }
                at += 1 + Int(bytes[at])
            }
            guard let length = BinaryFrame.readVarint(bytes, at: &at), at + Int(length) <= bytes.count else { return }
            if let (sent, seq) = UserMessageText.parse(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + Int(length))])) {
                ackUpTo = max(ackUpTo, id)
                record(sent: sent, seq: seq, now: now)
            }
            at += Int(length)
        }
    }

    /// User messages are acknowledged once per read, cumulatively (PROTOCOL.md §3.3), in the
    /// binary form.
    override func readComplete(_ socket: BenchSocket) {
        guard ackUpTo > 0, let channel = socket.channel else { return }
        var buffer = channel.allocator.buffer(capacity: 20)
        let upTo = ackUpTo
        socket.masker.writeFrame(into: &buffer, opcode: 2, length: 1 + BinaryFrame.varintSize(upTo)) {
            BinaryFrame.writeAckUser(into: &$0, upTo: upTo)
        }
        socket.send(buffer)
        ackUpTo = 0
    }

    /// One of the bench's payloads (send time, sequence number, padding).
    @inline(__always)
    private func received(_ payload: UnsafeRawPointer, now: UInt64) {
        let sent = UInt64(littleEndian: payload.loadUnaligned(as: UInt64.self))
        let seq = UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        record(sent: sent, seq: seq, now: now)
    }

    /// Numbers skipped (counted lost) that may still arrive late: then they count as out of
    /// order instead, and a number at or below the last that is not one of them as duplicated.
    /// Bounded (only a broken run fills it).
    private var missing = Set<UInt64>()

    @inline(__always)
    private func record(sent: UInt64, seq: UInt64, now: UInt64) {
        if seq > last + 1 {
            stats.lost += seq - last - 1
            var skipped = last + 1
            while skipped < seq && missing.count < 100_000 {
                missing.insert(skipped)
                skipped += 1
            }
        }
        if seq <= last {
            if missing.remove(seq) != nil {
                stats.lost -= 1
                stats.outOfOrder += 1
            } else {
                stats.duplicated += 1
            }
        } else {
            last = seq
            progress.store(seq, ordering: .relaxed)
        }
        stats.allDeliveries += 1
        if sent >= measure.start && sent < measure.end {
            stats.deliveries += 1
            let micros = now > sent ? (now - sent) / 1000 : 0
            _ = stats.histogram.record(micros)
            _ = stats.second.record(micros)
            stats.secondDeliveries += 1
        }
    }

    override func closed(_ socket: BenchSocket) {
        super.closed(socket)
    }
}

/// A publisher: at a fixed rate (the turns its loop's `PacedSchedule` gives it), or as fast as its
/// window of undelivered messages allows.
final class BenchPublisher: BenchPeer, @unchecked Sendable {
    var subscribers: [BenchSubscriber] = []
    var published: UInt64 = 0
    var acks: UInt64 = 0
    var errors = 0
    var firstError: String?
    let size: Int
    let window: UInt64
    let msgIds: Bool
    /// JSON `publish` requests instead of binary publishes.
    let json: Bool
    /// Max rate: how often the window is checked (longer with many publishers, whose timers
    /// would otherwise keep the generator busy).
    let pumpInterval: TimeAmount
    private var startTime: UInt64 = 0
    private var endTime: UInt64 = 0
    private var requestID: UInt64 = 10
    /// Client message ids start at a random point, as the SDK's do.
    private var msgId = UInt64.random(in: 1...(UInt64.max / 2))
    private let channelBytes: Int
    /// JSON publishes: `{"type":"publish","channel":"…","id":`, the bytes before each request id.
    let jsonHead: [UInt8]
    let done: EventLoopPromise<Void>

    /// User messages: the receiver.
    let receiver: String?
    private static let typeError = Array(#""type":"error""#.utf8)
    /// Binary publishes: when each unacknowledged one was sent (CLOCK_MONOTONIC ns), oldest
    /// first from `sentHead`. The server acknowledges a connection's publishes in order
    /// (PROTOCOL.md §2.3), so an ack for `count` is the `count` oldest.
    private var sentTimes: [UInt64] = []
    private var sentHead = 0
    /// The loop's figures (publish → acknowledged); nil: not measured.
    let stats: LoopStats?
    /// The measured interval (CLOCK_MONOTONIC ns of the send time), set before publishing.
    var measure: (start: UInt64, end: UInt64) = (.max, .max)

    init(socket: BenchSocket, target: BenchTarget, userId: String, channel: String, receiver: String? = nil, loop: any EventLoop,
         size: Int, window: Int, msgIds: Bool, json: Bool = false, pumpInterval: TimeAmount = .microseconds(200), stats: LoopStats? = nil) {
        self.receiver = receiver
        self.stats = receiver == nil && !json && target != .floor ? stats : nil
        self.json = json
        self.size = max(receiver != nil || json ? UserMessageText.minimumSize : 16, size)
        self.window = UInt64(max(16, window))
        self.msgIds = msgIds
        self.pumpInterval = pumpInterval
        self.channelBytes = channel.utf8.count
        self.jsonHead = Array((#"{"type":"publish","channel":""# + channel + #"","id":"#).utf8)
        self.done = loop.makePromise()
        super.init(socket: socket, target: target, userId: userId, channel: channel, subscribe: false, userMessages: receiver != nil, loop: loop)
    }

    override func message(_ socket: BenchSocket, opcode: UInt8, payload: ByteBuffer, now: UInt64) {
        switch opcode {
        case 2:
            let op: UInt8? = payload.getInteger(at: payload.readerIndex)
            if op == BinaryFrame.publishAckOp || op == BinaryFrame.sendUserReplyOp,
               let count: UInt16 = payload.getInteger(at: payload.readerIndex + 1, endianness: .little) {
                acks += UInt64(count)   // publish acks, or sendUser replies (§2.3)
                if op == BinaryFrame.publishAckOp { acknowledged(Int(count), now: now) }
            }
        case 1:
            if readyDone && Self.endsAsOK(payload) {
                acks += 1   // a JSON publish's (or sendUser's) `ok`, the reply that comes by the hundred thousand
            } else if payload.readableBytesView.starts(with: #"{"code""#.utf8) || ByteSearch.contains(Self.typeError, in: payload) {
                errors += 1   // (a refused publish is never acknowledged: the run's `acked` figures are dropped)
                if firstError == nil { firstError = String(buffer: payload) }
            } else if readyDone {
                acks += 1   // a sendUser (or JSON publish) reply
            } else {
                handshake(payload)
            }
        default:
            break
        }
    }

    /// Whether a text reply ends as an `ok` does (`…"type":"ok"}`: the server writes its keys
    /// sorted, so `type` is last): one load, instead of searching every reply for an error.
    @inline(__always)
    static func endsAsOK(_ payload: ByteBuffer) -> Bool {
        guard payload.readableBytes >= 12,
              let tail: UInt64 = payload.getInteger(at: payload.writerIndex - 8, endianness: .little) else { return false }
        return tail == okTail
    }

    /// `e":"ok"}` as a little-endian word.
    private static let okTail: UInt64 = Array(#"e":"ok"}"#.utf8).reversed().reduce(0) { $0 << 8 | UInt64($1) }

    /// Fixed rate: a turn of its loop's `PacedSchedule`. Sends what is owed (`owed` messages in
    /// all by now; fewer while the socket is not writable, caught up at a later turn). False once
    /// this publisher is done (its socket closed).
    func pacedTurn(owed: UInt64) -> Bool {
        guard !closedFlag, let channel = socket.channel else {
            done.succeed(())
            return false
        }
        send(allowance: owed > published ? min(owed - published, 8192) : 0, on: channel, now: BenchClock.now())
        return true
    }

    /// `count` more publishes acknowledged, the oldest outstanding: their send → ack time.
    private func acknowledged(_ count: Int, now: UInt64) {
        guard let stats else { return }
        let end = min(sentTimes.count, sentHead + count)
        for index in sentHead..<end {
            let sent = sentTimes[index]
            guard sent >= measure.start && sent < measure.end else { continue }
            let micros = now > sent ? (now - sent) / 1_000 : 0
            _ = stats.acked.record(micros)
            _ = stats.secondAcked.record(micros)
        }
        sentHead = end
        if sentHead > 4_096 && sentHead * 2 > sentTimes.count {
            sentTimes.removeFirst(sentHead)
            sentHead = 0
        }
    }

    /// The schedule ended.
    func finishPaced() {
        done.succeed(())
    }

    /// Publishes from `start` until `end` (CLOCK_MONOTONIC ns), as fast as the window allows
    /// (`--rate` 0; a fixed rate goes through `PacedSchedule`).
    func start(at start: UInt64, until end: UInt64) {
        startTime = start
        endTime = end
        pump()
    }

    private func pump() {
        let now = BenchClock.now()
        guard now < endTime, !closedFlag, let channel = socket.channel else { done.succeed(()); return }
        guard now >= startTime else {
            loop.scheduleTask(in: .nanoseconds(Int64(startTime - now))) { [self] in pump() }
            return
        }
        let slowest = subscribers.reduce(UInt64.max) { min($0, $1.progress.load(ordering: .relaxed)) }
        let inFlight = published - min(slowest, published)
        send(allowance: inFlight < window ? window - inFlight : 0, on: channel, now: now)
        loop.scheduleTask(in: pumpInterval) { [self] in pump() }
    }

    /// Up to `allowance` messages, 256 per write, while the socket takes them.
    private func send(allowance: UInt64, on channel: any Channel, now: UInt64) {
        var allowance = allowance
        while allowance > 0 && channel.isWritable {
            let batch = min(allowance, 256)
            send(count: Int(batch), on: channel, now: now)
            allowance -= batch
        }
    }

    private func send(count: Int, on channel: any Channel, now: UInt64) {
        if let receiver {
            sendUserMessages(count: count, to: receiver, on: channel, now: now)
            return
        }
        if json {
            sendJSONPublishes(count: count, on: channel, now: now)
            return
        }
        // One publish per WebSocket frame, each masked with its own key, all in one write.
        let header = 14 + (msgIds ? 8 : 0) + 11 + channelBytes
        var buffer = channel.allocator.buffer(capacity: count * (size + header))
        let timed = stats != nil
        for _ in 0..<count {
            published += 1
            let seq = published
            if timed { sentTimes.append(now) }
            switch target {
            case .floor:
                socket.masker.writeFrame(into: &buffer, opcode: 2, length: size) { buffer in
                    Self.writePayload(into: &buffer, sent: now, seq: seq, size: size)
                }
            case .rtm:
                let body = 1 + 1 + 8 + (msgIds ? 8 : 0) + 1 + channelBytes + size
                requestID += 1
                msgId += 1
                let (requestID, msgId, name) = (requestID, msgIds ? msgId : nil, self.channel)
                socket.masker.writeFrame(into: &buffer, opcode: 2, length: body) { buffer in
                    BinaryFrame.writePublishHeader(into: &buffer, requestID: requestID, msgId: msgId, channel: name, customType: nil, isText: false)
                    Self.writePayload(into: &buffer, sent: now, seq: seq, size: size)
                }
            }
        }
        channel.writeAndFlush(buffer, promise: nil)
    }

    /// The bench's binary payload: send time, sequence number, zero padding.
    @inline(__always)
    private static func writePayload(into buffer: inout ByteBuffer, sent: UInt64, seq: UInt64, size: Int) {
        buffer.writeInteger(sent, endianness: .little)
        buffer.writeInteger(seq, endianness: .little)
        buffer.writeRepeatingByte(0, count: size - 16)
    }
}

extension BenchPublisher {
    /// JSON `publish` requests, as a browser sends them: one per text frame, masked, the text
    /// carrying send time and sequence number (`UserMessageText`); answered with JSON `ok`s.
    /// Each frame is stored in one pass (the constant pieces copied, the numbers two digits at
    /// a time), as a tuned client would, so that the JSON figures measure the server rather
    /// than the generator's buffer calls.
    fileprivate func sendJSONPublishes(count: Int, on channel: any Channel, now: UInt64) {
        let head = jsonHead
        var buffer = channel.allocator.buffer(capacity: count * (size + head.count + 80))
        for _ in 0..<count {
            published += 1
            requestID += 1
            msgId += 1
            let (seq, requestID, msgId, size) = (published, requestID, msgIds ? msgId : nil, size)
            let idDigits = FrameCodec.decimalDigits(requestID)
            let msgIdDigits = msgId.map(FrameCodec.decimalDigits) ?? 0
            var length = head.count + idDigits + Self.textKey.utf8CodeUnitCount + size + Self.end.utf8CodeUnitCount
            if msgId != nil { length += Self.msgIdKey.utf8CodeUnitCount + msgIdDigits }
            socket.masker.writeFrame(into: &buffer, opcode: 1, length: length) { out in
                var at = out
                head.withUnsafeBytes { at.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                at += head.count
                FrameCodec.storeDecimal(requestID, count: idDigits, at: at)
                at += idDigits
                if let msgId {
                    at = Self.store(Self.msgIdKey, at: at)
                    FrameCodec.storeDecimal(msgId, count: msgIdDigits, at: at)
                    at += msgIdDigits
                }
                at = Self.store(Self.textKey, at: at)
                UserMessageText.store(sent: now, seq: seq, size: size, at: at)
                _ = Self.store(Self.end, at: at + size)
            }
        }
        channel.writeAndFlush(buffer, promise: nil)
    }

    private static var msgIdKey: StaticString { #","msgId":"# }
    private static var textKey: StaticString { #","text":""# }
    private static var end: StaticString { #""}"# }

    /// Copies `piece` to `at`; the position after it.
    @inline(__always)
    private static func store(_ piece: StaticString, at: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        at.copyMemory(from: piece.utf8Start, byteCount: piece.utf8CodeUnitCount)
        return at + piece.utf8CodeUnitCount
    }

    /// User messages: binary `sendUser` requests (PROTOCOL.md §2.3, `0x03`; the server stores
    /// each durably before it answers and delivers), the text carrying send time and sequence
    /// number.
    fileprivate func sendUserMessages(count: Int, to receiver: String, on channel: any Channel, now: UInt64) {
        let body = 1 + 1 + 8 + (msgIds ? 8 : 0) + 1 + receiver.utf8.count + size
        var buffer = channel.allocator.buffer(capacity: count * (body + 14))
        for _ in 0..<count {
            published += 1
            requestID += 1
            msgId += 1
            let (requestID, msgId, seq) = (requestID, msgIds ? msgId : nil, published)
            socket.masker.writeFrame(into: &buffer, opcode: 2, length: body) { buffer in
                BinaryFrame.writeSendUserHeader(into: &buffer, requestID: requestID, msgId: msgId, receiver: receiver, customType: nil, isText: true)
                UserMessageText.write(sent: now, seq: seq, size: size, into: &buffer)
            }
        }
        channel.writeAndFlush(buffer, promise: nil)
    }
}

/// The text of a benchmark user message or JSON publish: send time and sequence number, each as
/// 16 letters of 4 bits (`@` + the nibble: `@`…`O`): first the low nibbles of the number's eight
/// bytes, then their high nibbles (least significant byte first), padded with `x` to the payload
/// size. Plain printable ASCII, so a JSON string carries it unescaped, like any application
/// text; and split so that a number is read back from its two eight-letter words with two masks,
/// a shift and an or (one test checks all 32 letters), so that a subscriber of a JSON publisher
/// (which reads one per delivery, tens of millions a second, on the machine the server shares)
/// costs the generator about what a binary payload's two loads do, and the JSON figures compare
/// the server's paths rather than the generator's parsing.
enum UserMessageText {
    /// Smallest payload: two 16-letter numbers.
    static let minimumSize = 32

    private static let nibbles: UInt64 = 0x0F0F_0F0F_0F0F_0F0F
    private static let at: UInt64 = 0x4040_4040_4040_4040

    /// Writes `make(sent:seq:size:)`'s bytes without making a String.
    static func write(sent: UInt64, seq: UInt64, size: Int, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: max(size, minimumSize)) { out in
            store(sent: sent, seq: seq, size: size, at: out.baseAddress!)
            return max(size, minimumSize)
        }
    }

    /// Stores `write(sent:seq:size:into:)`'s bytes (`size`, at least `minimumSize`) at `out`.
    @inline(__always)
    static func store(sent: UInt64, seq: UInt64, size: Int, at out: UnsafeMutableRawPointer) {
        out.storeBytes(of: (sent & nibbles | at).littleEndian, as: UInt64.self)
        out.storeBytes(of: (sent &>> 4 & nibbles | at).littleEndian, toByteOffset: 8, as: UInt64.self)
        out.storeBytes(of: (seq & nibbles | at).littleEndian, toByteOffset: 16, as: UInt64.self)
        out.storeBytes(of: (seq &>> 4 & nibbles | at).littleEndian, toByteOffset: 24, as: UInt64.self)
        if size > minimumSize { (out + minimumSize).initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "x"), count: size - minimumSize) }
    }

    /// Send time and sequence number of a text made by `make` / `write` (at least
    /// `minimumSize` bytes), or nil if one of its 32 letters is not `@`…`O`.
    @inline(__always)
    static func parse(_ payload: UnsafeRawPointer) -> (sent: UInt64, seq: UInt64)? {
        let sentLow = UInt64(littleEndian: payload.loadUnaligned(as: UInt64.self))
        let sentHigh = UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        let seqLow = UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        let seqHigh = UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        guard ((sentLow ^ at) | (sentHigh ^ at) | (seqLow ^ at) | (seqHigh ^ at)) & ~nibbles == 0 else { return nil }
        return (sentLow & nibbles | (sentHigh & nibbles) &<< 4, seqLow & nibbles | (seqHigh & nibbles) &<< 4)
    }

    static func make(sent: UInt64, seq: UInt64, size: Int) -> String {
        var buffer = ByteBuffer()
        write(sent: sent, seq: seq, size: size, into: &buffer)
        return String(buffer: buffer)
    }

    /// (send time, sequence number) of a message text made by `make`.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> (UInt64, UInt64)? {
        guard bytes.count >= minimumSize else { return nil }
        return parse(bytes.baseAddress!)
    }
}

/// A substring search on raw bytes: the generic `firstRange(of:)` on a buffer view cost more
/// than everything else the generator does for a JSON message.
enum ByteSearch {
    /// The index just past the first occurrence of `needle` in `bytes`, or nil.
    static func end(of needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress, let first = needle.first, bytes.count >= needle.count else { return nil }
        return needle.withUnsafeBytes { n -> Int? in
            for i in 0...(bytes.count - n.count) where bytes[i] == first && memcmp(base + i, n.baseAddress!, n.count) == 0 {
                return i + n.count
            }
            return nil
        }
    }

    /// Whether `needle` occurs in `buffer`'s readable bytes.
    static func contains(_ needle: [UInt8], in buffer: ByteBuffer) -> Bool {
        buffer.withUnsafeReadableBytes { end(of: needle, in: $0) != nil }
    }
}

/// The peers of one event loop, for its heartbeat timer; confined to that loop.
final class PeerList: @unchecked Sendable {
    var peers: [BenchPeer] = []
    /// Ticks so far (`pingSlice`).
    private var tick = 0
    /// The heartbeat (5 s, the default) is spread over this many ticks.
    static let slices = 100

    /// Starts sending every peer of `loop` a protocol ping every 5 s (the default heartbeat),
    /// from now on, also for peers added later. The pings are spread over the 5 s, a slice of
    /// the peers every 50 ms, as independent clients' heartbeats are: all at once, the server
    /// would read thousands of them per wake-up, which no real set of clients does.
    static func heartbeats(on loops: [any EventLoop]) -> (lists: [PeerList], tasks: [RepeatedTask]) {
        let lists = loops.map { _ in PeerList() }
        let interval = TimeAmount.milliseconds(5_000 / Int64(slices))
        let tasks = zip(loops, lists).map { loop, list in
            loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in list.pingSlice() }
        }
        return (lists, tasks)
    }

    /// Pings the peers of this tick's slice.
    private func pingSlice() {
        for index in Self.slice(tick: tick, of: peers.count) { peers[index].ping() }
        tick &+= 1
    }

    /// The peers a tick pings, of `count`: every `slices`-th, from the tick's number on, so
    /// that `slices` consecutive ticks ping each peer once.
    static func slice(tick: Int, of count: Int) -> StrideTo<Int> {
        stride(from: tick % slices, to: count, by: slices)
    }
}
