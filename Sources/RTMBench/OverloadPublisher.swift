import Atomics
import Foundation
import NIOCore
import RTMAuth
import RTMProtocol

/// One raw publisher of `rtm bench overload`: logs in, then publishes binary frames (one
/// request per frame, masked with a random key each, pipelined in one write) to its own
/// channel, either flat out (while its socket takes them) or paced at a fixed rate. It reads
/// every reply, counts refusals by code, and when the server closes it, connects again after
/// `reconnectDelay` until the run ends. Confined to its event loop.
final class OverloadPublisher: BenchSocketDelegate, @unchecked Sendable {
    /// What one publisher saw (read on its loop at the end).
    struct Counts {
        var sent: UInt64 = 0
        var acknowledged: UInt64 = 0
        var rateLimited: UInt64 = 0
        var otherRefusals: UInt64 = 0
        /// Connections the server ended (or that failed) while the run was on.
        var closed: UInt64 = 0
        var connects: UInt64 = 0
        /// WebSocket close codes the server sent.
        var closeCodes: [UInt16: UInt64] = [:]
        /// Logins the server refused.
        var loginsRefused: UInt64 = 0
    }

    let loop: any EventLoop
    let userId: String
    let channel: String
    /// Messages per second, or nil: flat out.
    let rate: Double?
    private let appId: String
    private let certificate: String?
    private let connect: (BenchSocket) -> EventLoopFuture<Void>
    private let makeSocket: () -> BenchSocket
    private var socket: BenchSocket?
    private var loggedIn = false
    /// Logged in at least once.
    private(set) var started = false
    private var endTime: UInt64 = .max
    private var pacedStart: UInt64 = 0
    private var pacedSent: UInt64 = 0
    private var requestID: UInt64 = 1
    private var msgId: UInt64 = 0
    private let payload = [UInt8](repeating: 0x61, count: 32)
    private(set) var counts = Counts()
    /// Counted only from the measured interval's start (one flag for every publisher of the run).
    let counting: ManagedAtomic<Bool>
    let reconnectDelay: TimeAmount = .milliseconds(200)

    init(loop: any EventLoop, userId: String, channel: String, rate: Double?, appId: String, certificate: String?, counting: ManagedAtomic<Bool>,
         makeSocket: @escaping () -> BenchSocket, connect: @escaping (BenchSocket) -> EventLoopFuture<Void>) {
        self.loop = loop
        self.userId = userId
        self.channel = channel
        self.rate = rate
        self.appId = appId
        self.certificate = certificate
        self.counting = counting
        self.makeSocket = makeSocket
        self.connect = connect
    }

    /// Connects and publishes until `end` (CLOCK_MONOTONIC ns).
    func start(until end: UInt64) {
        endTime = end
        open()
    }

    /// Publishes until `end` instead.
    func extend(until end: UInt64) { endTime = end }

    private func open() {
        guard BenchClock.now() < endTime else { return }
        let socket = makeSocket()
        socket.delegate = self
        self.socket = socket
        loggedIn = false
        counts.connects += 1
        connect(socket).whenFailure { [self] _ in
            loop.scheduleTask(in: reconnectDelay) { [self] in open() }
        }
    }

    func opened(_ socket: BenchSocket) {
        let token = certificate.map {
            AccessToken006.buildRTMToken(appId: appId, appCertificate: $0, userId: userId,
                                         privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 3600)
        } ?? ""
        let login = Frame(type: .login, id: 1, appId: appId, userId: userId, token: token, heartbeatInterval: 5, presenceTimeout: 5)
        socket.sendText(String(buffer: FrameCodec.encode(login)))
    }

    func message(_ socket: BenchSocket, opcode: UInt8, payload: ByteBuffer, now: UInt64) {
        switch opcode {
        case 1:
            if !loggedIn {
                guard let frame = try? FrameCodec.decode(payload), frame.id == 1 else { return }
                if frame.type == .ok {
                    loggedIn = true
                    started = true
                    pacedStart = BenchClock.now()
                    pacedSent = 0
                    pump()
                } else {
                    // Refused login (admission, login rate): close and try again later.
                    if counting.load(ordering: .relaxed) { counts.loginsRefused += 1 }
                    socket.close()
                }
                return
            }
            // Replies come by the thousand: the error code is found without a JSON decoder.
            if let code = Self.errorCode(payload) { countRefusal(code) }
        case 2:
            // Binary publish acks (`0x82`: count, then id and seq each); refusals come as JSON
            // `error` frames (PROTOCOL §2.3).
            guard counting.load(ordering: .relaxed), payload.getInteger(at: payload.readerIndex, as: UInt8.self) == BinaryFrame.publishAckOp,
                  let count = payload.getInteger(at: payload.readerIndex + 1, endianness: .little, as: UInt16.self) else { return }
            counts.acknowledged += UInt64(count)
        case 8:
            if payload.readableBytes >= 2, let code: UInt16 = payload.getInteger(at: payload.readerIndex), counting.load(ordering: .relaxed) {
                counts.closeCodes[code, default: 0] += 1
            }
        default:
            break
        }
    }

    /// The `code` of an `error` frame (`{"code":-11025,…,"type":"error"}`), or nil.
    static func errorCode(_ payload: ByteBuffer) -> Int? {
        let view = payload.readableBytesView
        guard view.starts(with: #"{"code":"#.utf8) else { return nil }
        var value = 0, negative = false
        for byte in view.dropFirst(8) {
            if byte == UInt8(ascii: "-") { negative = true; continue }
            guard byte >= 0x30 && byte <= 0x39 else { break }
            value = value * 10 + Int(byte - 0x30)
        }
        return negative ? -value : value
    }

    private func countRefusal(_ code: Int?) {
        guard counting.load(ordering: .relaxed) else { return }
        if code == RTMErrorCode.channelPublishMessageTooFrequent.rawValue { counts.rateLimited += 1 } else { counts.otherRefusals += 1 }
    }

    func readComplete(_ socket: BenchSocket) {}

    func closed(_ socket: BenchSocket) {
        guard socket === self.socket else { return }
        loggedIn = false
        self.socket = nil
        if counting.load(ordering: .relaxed) && BenchClock.now() < endTime { counts.closed += 1 }
        loop.scheduleTask(in: reconnectDelay) { [self] in open() }
    }

    private func pump() {
        guard loggedIn, let socket, let channel = socket.channel else { return }
        let now = BenchClock.now()
        guard now < endTime else { return }
        if let rate {
            // Paced: what is due since the login, as single frames on time.
            let due = UInt64(Double(now - pacedStart) / 1e9 * rate) + 1
            if pacedSent < due { write(count: Int(min(due - pacedSent, 64)), on: channel, socket: socket) }
            let next = pacedStart + UInt64(Double(pacedSent) / rate * 1e9)
            loop.scheduleTask(in: .nanoseconds(Int64(next > now ? next - now : 0))) { [self] in pump() }
        } else {
            // Flat out: the next batch of 64 frames as soon as the socket took the last one.
            write(count: 64, on: channel, socket: socket).whenComplete { [self] result in
                guard case .success = result, socket === self.socket else { return }
                loop.execute { [self] in pump() }
            }
        }
    }

    @discardableResult
    private func write(count: Int, on channel: any Channel, socket: BenchSocket) -> EventLoopFuture<Void> {
        let name = self.channel
        let body = 1 + 1 + 8 + 8 + 1 + name.utf8.count + payload.count
        var buffer = channel.allocator.buffer(capacity: count * (body + 14))
        for _ in 0..<count {
            requestID += 1
            msgId += 1
            let (requestID, msgId) = (requestID, msgId)
            socket.masker.writeFrame(into: &buffer, opcode: 2, length: body) { buffer in
                BinaryFrame.writePublishHeader(into: &buffer, requestID: requestID, msgId: msgId, channel: name, customType: nil, isText: false)
                buffer.writeBytes(payload)
            }
        }
        pacedSent += UInt64(count)
        if counting.load(ordering: .relaxed) { counts.sent += UInt64(count) }
        return channel.writeAndFlush(buffer)
    }

}
