import Foundation
import NIOCore
import NIOWebSocket
import RTMProtocol

/// The publish fast path: the publishes of one read batch, binary ones and JSON ones alike
/// (PROTOCOL.md §2.3), are validated, sequenced and fanned out together (one lock, one encoded
/// buffer and one hop per event loop for each run of publishes to one channel), and acknowledged
/// together: the binary ones with one binary ack frame, the JSON ones with their `ok` replies in
/// one write.
extension ConnectionHandler {
    /// A publish of the current read batch, and how to answer it.
    struct PendingPublish {
        var publish: BinaryFrame.Publish
        /// Sent as JSON (answered with a JSON `ok`), else binary (answered in a `0x82` frame).
        var json: Bool
        /// The authorization hook allowed it (and its limits and rate were checked).
        var cleared = false
    }

    /// A binary message from the client.
    func binaryFrame(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        switch payload.getInteger(at: payload.readerIndex, as: UInt8.self) {
        case BinaryFrame.sendUserOp?:
            intake.operation = .sendUser
            binarySendUser(payload, context: context)
            return
        case BinaryFrame.ackUserOp?:
            intake.operation = .ackUser
            binaryAckUser(payload, context: context)
            return
        default:
            intake.operation = .publish
        }
        switch BinaryFrame.readPublish(payload) {
        case .failure(let error):
            flushPublishes(context: context)
            send(.error(id: error.requestID, .invalidFrame, error.description), context: context)
        case .success(let publish):
            // The hot path: one check of the state, the machine's words only for a refusal.
            guard lifecycle.isLoggedIn else {
                return refuseOutsideSession(.batchedPublish(channel: publish.channel), requestID: publish.requestID, context: context)
            }
            intake.publishes.append(PendingPublish(publish: publish, json: false))
        }
    }

    /// A binary request on a connection without a MESSAGE session: the gate's refusal (before
    /// login: notLogin; on a STREAM connection: not one of its requests; closing: nothing).
    func refuseOutsideSession(_ request: ClientRequest, requestID: UInt64?, context: ChannelHandlerContext) {
        if case .refused(let refusal) = pass(request) { send(.error(id: requestID, refusal.code, refusal.reason), context: context) }
    }

    /// A JSON text message that is a plain publish (`FrameCodec.readPublish`) of a logged-in
    /// MESSAGE session joins the batch; false for anything else (decode it as usual).
    func gatherJSONPublish(_ payload: ByteBuffer) -> Bool {
        guard lifecycle.isLoggedIn, let publish = FrameCodec.readPublish(payload) else { return false }
        intake.publishes.append(PendingPublish(publish: publish, json: true))
        return true
    }

    /// Runs the gathered publishes, in order.
    func flushPublishes(context: ChannelHandlerContext) {
        flushUserSends()
        guard !intake.publishes.isEmpty, let key = lifecycle.session else { return }
        intake.operation = .publish
        let started = NIODeadline.now()
        defer { hub.metrics.request(.publish, nanoseconds: (NIODeadline.now() - started).nanoseconds) }   // one per batch
        let batch = intake.publishes
        intake.publishes.removeAll(keepingCapacity: true)
        var acks = BinaryFrame.PublishAcks()
        var replies: ByteBuffer?
        var run: [Hub.Outgoing] = []
        var runChannel: String?
        // Every publish passes the gate (`pass`); a run of publishes to one channel is decided
        // once. Where it stops to ask the authorization hook, the rest waits for the answer.
        intake.passedChannel = nil
        var askAt: (index: Int, answer: EventLoopFuture<HookVerdict>)?
        func publishRun() {
            guard let channel = runChannel, !run.isEmpty else { return }
            fanout.stats.channelMessagesIn &+= run.count
            // Numbered now (one node: answered with this batch's replies), or answered after
            // the commit (a cluster), by a closure without captures.
            guard let numbers = channelPublisher.publish(run, channel: channel, publisher: key, handler: self, context: context,
                                                         completion: { handler, context, run, result in
                                                             handler.acknowledgeCommitted(run, result: result, context: context)
                                                         }) else {
                run.removeAll(keepingCapacity: true)
                return
            }
            var template: PublishOKTemplate?
            for (index, seq) in zip(run.indices, numbers.seqs) {
                if run[index].repliesInJSON {
                    if template == nil { template = okTemplate(epoch: numbers.epoch) }
                    Self.appendPublishOK(id: run[index].requestID, seq: seq, template: template!, to: &replies, expected: batch.count,
                                         allocator: context.channel.allocator)
                } else {
                    acks.append(requestID: run[index].requestID, seq: seq, epoch: numbers.epoch)
                }
            }
            run.removeAll(keepingCapacity: true)
        }
        // Fields read in place through a buffer pointer: binding each element to a local, or an
        // array's subscript, copied it (three references retained and released per message).
        batch.withUnsafeBufferPointer { batch in
            messages: for pending in batch.indices {
                // Closing (say, the flood of refusals spent the error budget): the rest is dropped.
                guard lifecycle.maySend else { break }
                let publish = UnsafePointer(batch.baseAddress! + pending)
                guard let channel = publishChannel(publish.pointee.publish, context: context) else { continue }
                if !publish.pointee.cleared {
                    switch pass(.batchedPublish(channel: channel), payload: {
                        HookQuestion.Publish(payload: publish.pointee.publish.payload, isText: publish.pointee.publish.isText,
                                             customType: publish.pointee.publish.customType)
                    }) {
                    case .passed, .passedWith:
                        break
                    case .refused(let refusal):
                        publishRun()
                        guard appendRefusal(refusal, id: publish.pointee.publish.requestID, to: &replies, expected: batch.count, context: context) else { break messages }
                        continue messages
                    case .ignored:
                        break messages
                    case .awaiting(let answer, _):
                        askAt = (pending, answer)
                        break messages
                    }
                    if let refusal = payloadProblem(size: publish.pointee.publish.payload.readableBytes, customType: publish.pointee.publish.customType) {
                        publishRun()
                        guard appendRefusal(refusal, id: publish.pointee.publish.requestID, to: &replies, expected: batch.count, context: context) else { break messages }
                        continue messages
                    }
                }
                if channel != runChannel { publishRun(); runChannel = channel }
                run.append(Hub.Outgoing(requestID: publish.pointee.publish.requestID, msgId: publish.pointee.publish.msgId,
                                        customType: publish.pointee.publish.customType, isText: publish.pointee.publish.isText,
                                        payload: publish.pointee.publish.payload, repliesInJSON: publish.pointee.json))
            }
        }
        publishRun()
        writeReplies(&replies, context: context)
        writePublishAcks(acks, context: context)
        if let askAt {
            awaitHookAboutPublish(batch[askAt.index], answer: askAt.answer, rest: batch[(askAt.index + 1)...], context: context)
        }
    }

    /// Answers a run of publishes answered after their commit (a cluster), or failed: binary
    /// ones in one binary ack frame, JSON ones with their `ok` replies, each with the run's
    /// channel epoch, as the batch's own replies are on one node. A failed commit answers every
    /// publish of the run with `channelPublishMessageTimeout` and the reason (nothing stored,
    /// or the outcome unknown).
    func acknowledgeCommitted(_ run: [Hub.Outgoing], result: Result<PublishNumbers, any Error>, context: ChannelHandlerContext) {
        switch result {
        case .failure(let error):
            // Logged once per change of the link (`ClusterStatus`), counted here: an outage
            // refuses every publish, and a warning each would flood the log.
            hub.cluster.publishesFailed(run.count)
            let reason = ClusterCommitFailure.reason(error)
            for message in run {
                send(.error(id: message.requestID, .channelPublishMessageTimeout, reason), context: context, operation: .publish)
            }
        case .success(let numbers):
            var acks = BinaryFrame.PublishAcks()
            var replies: ByteBuffer?
            var template: PublishOKTemplate?
            for (message, seq) in zip(run, numbers.seqs) {
                if message.repliesInJSON {
                    if template == nil { template = okTemplate(epoch: numbers.epoch) }
                    Self.appendPublishOK(id: message.requestID, seq: seq, template: template!, to: &replies, expected: run.count,
                                         allocator: context.channel.allocator)
                } else {
                    acks.append(requestID: message.requestID, seq: seq, epoch: numbers.epoch)
                }
            }
            writeReplies(&replies, context: context)
            writePublishAcks(acks, context: context)
        }
    }

    /// Acknowledges binary publishes, all in one binary ack frame (with their epochs).
    func writePublishAcks(_ acks: BinaryFrame.PublishAcks, context: ChannelHandlerContext) {
        guard !acks.isEmpty, let outbox else { return }   // nothing after our close frame
        var buffer = context.channel.allocator.buffer(capacity: acks.byteCount)
        BinaryFrame.writePublishAcks(into: &buffer, acks)
        outbox.binary(buffer)
    }

    /// The JSON publish `ok` reply template for `epoch`: the connection's last one, made again
    /// only when the epoch changes (a run of replies shares one, and so do the runs after it).
    func okTemplate(epoch: String) -> PublishOKTemplate {
        if let last = intake.okTemplate, last.epoch == epoch { return last }
        let template = PublishOKTemplate(epoch: epoch)
        intake.okTemplate = template
        return template
    }

    /// Appends a JSON publish's `ok`, framed, to the read's replies (written below the frame
    /// encoder in one buffer). Kept out of line: the binary path does not pay for its code.
    @inline(never)
    static func appendPublishOK(id: UInt64, seq: UInt64, template: PublishOKTemplate, to replies: inout ByteBuffer?, expected: Int,
                                allocator: ByteBufferAllocator) {
        if replies == nil { replies = allocator.buffer(capacity: (template.length(id: id, seq: seq) + 4) * expected) }
        template.write(id: id, seq: seq, framed: true, into: &replies!)
    }

    /// Writes the framed JSON `ok` replies gathered so far (below the frame encoder, as the
    /// fan-out does) and flushes.
    func writeReplies(_ replies: inout ByteBuffer?, context: ChannelHandlerContext) {
        guard let buffer = replies else { return }
        replies = nil
        outbox?.encoded(buffer, frames: Self.frameCount(buffer), flush: true)
    }

    /// The channel of a publish, validated (cached for a run of publishes to the same channel).
    private func publishChannel(_ publish: BinaryFrame.Publish, context: ChannelHandlerContext) -> String? {
        let (name, problem) = Self.validatedName(publish.channelBytes, kind: "channel name", limits: hub.configuration.limits,
                                                 cache: &intake.lastPublishChannel)
        if let problem {
            send(.error(id: publish.requestID, .invalidChannelName, problem), context: context)
            return nil
        }
        return name
    }

    /// A name read from a binary frame and its validation problem (nil: valid). The last name
    /// seen is cached by its bytes, so a run of frames naming the same channel or receiver is
    /// neither validated nor turned into a String again.
    static func validatedName(_ bytes: ByteBufferView, kind: String, limits: Limits,
                              cache: inout (bytes: [UInt8], name: String, problem: String?)?) -> (String, String?) {
        if let last = cache, sameBytes(bytes, last.bytes) { return (last.name, last.problem) }
        let name = String(decoding: bytes, as: UTF8.self)
        let problem = limits.nameProblem(name, kind: kind)
        cache = (Array(bytes), name, problem)
        return (name, problem)
    }

    /// Payload limits (SPEC §8; the publish rate is the gate's); the refusal to answer, or nil.
    func payloadProblem(size: Int, customType: String?) -> RequestRefusal? {
        hub.configuration.limits.payloadProblem(size: size, customType: customType).map { RequestRefusal(code: $0.0, reason: $0.1) }
    }

    /// Answers a refused publish of the batch in `replies` (in order with the batch's JSON
    /// `ok`s), written by hand: a flood brings refusals by the thousand. Charges the error
    /// budget; false when it is spent and the connection is closing (the rest of the batch is
    /// dropped).
    func appendRefusal(_ refusal: RequestRefusal, id: UInt64, to replies: inout ByteBuffer?, expected: Int,
                       context: ChannelHandlerContext) -> Bool {
        guard lifecycle.maySend else { return false }
        fanout.stats.refused[RefusalKey(operation: .publish, code: refusal.code.rawValue), default: 0] &+= 1
        if let spent = lifecycle.errorReply(code: refusal.code.rawValue, now: lifecycle.lastRead) {
            writeReplies(&replies, context: context)   // before the close frame
            closeForRejectedRequests(spent, context: context)
            return false
        }
        let length = FrameCodec.errorLength(id: id, code: refusal.code.rawValue, reason: refusal.reason)
        if replies == nil { replies = context.channel.allocator.buffer(capacity: (length + 4) * min(expected, 64)) }
        BinaryFrame.writeWebSocketHeader(into: &replies!, length: length, opcode: 0x1)
        FrameCodec.writeError(id: id, code: refusal.code.rawValue, reason: refusal.reason, into: &replies!)
        return true
    }

    /// How many WebSocket frames `buffer` holds (server frames: unmasked), walking their headers.
    static func frameCount(_ buffer: ByteBuffer) -> Int {
        var index = buffer.readerIndex
        var count = 0
        while let second: UInt8 = buffer.getInteger(at: index + 1) {
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 {
                length = Int(buffer.getInteger(at: index + 2, as: UInt16.self) ?? 0)
                header = 4
            } else if length == 127 {
                length = Int(buffer.getInteger(at: index + 2, as: UInt64.self) ?? 0)
                header = 10
            }
            index += header + length
            count += 1
        }
        return count
    }

    /// Byte equality by memcmp (the generic `elementsEqual` walks byte by byte).
    static func sameBytes(_ view: ByteBufferView, _ bytes: [UInt8]) -> Bool {
        guard view.count == bytes.count else { return false }
        return view.withContiguousStorageIfAvailable { a in
            bytes.withUnsafeBufferPointer { b in
                a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
            }
        } ?? view.elementsEqual(bytes)
    }
}
