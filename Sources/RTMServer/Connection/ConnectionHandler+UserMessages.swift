import Foundation
import NIOCore
import RTMProtocol

/// The binary form of user messages (SPEC M-1, PROTOCOL.md §2.3): the `sendUser` requests of one
/// read are checked here, on the connection's loop, and handed to the mailbox in one hop; the
/// mailbox stores them in one transaction and answers them in one `0x83` frame.
extension ConnectionHandler {
    /// A binary `sendUser` (`0x03`): the same checks and errors as the JSON request (errors as
    /// JSON `error` frames with the request's id).
    func binarySendUser(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        let request: BinaryFrame.SendUser
        switch BinaryFrame.readSendUser(payload) {
        case .failure(let error):
            send(.error(id: error.requestID, .invalidFrame, error.description), context: context)
            return
        case .success(let decoded):
            request = decoded
        }
        let (receiver, problem) = Self.validatedName(request.receiverBytes, kind: "userId", limits: hub.configuration.limits,
                                                     cache: &intake.lastUserReceiver)
        switch pass(.binarySendUser(receiver: receiver)) {
        case .passed, .passedWith: break
        case .refused(let refusal): return send(.error(id: request.requestID, refusal.code, refusal.reason), context: context)
        case .ignored, .awaiting: return   // the hook is never asked about user messages
        }
        guard let key = lifecycle.session else { return }
        if let problem { return send(.error(id: request.requestID, .invalidUserId, problem), context: context) }
        if let refusal = payloadProblem(size: request.payload.readableBytes, customType: request.customType) {
            send(.error(id: request.requestID, refusal.code, refusal.reason), context: context)
            return
        }
        if request.isText, let problem = Limits.storedTextProblem(request.payload.readableBytesView) {
            return send(.error(id: request.requestID, .channelInvalidMessage, problem), context: context)
        }
        var body = request.payload
        let text = request.isText ? body.readString(length: body.readableBytes) : nil
        let data = request.isText ? nil : Data(body.readableBytesView)
        let message = StoredUserMessage(appId: key.appId, receiver: receiver, sender: key.userId, text: text, data: data,
                                        customType: request.customType, ts: Hub.wallMillis, clientMsgId: request.msgId)
        // Whether the receiver is online is told only with `status` on it.
        let tellsStatus = access?.reveals(.online(receiver)) ?? true
        intake.userSends.append(UserMailbox.Submission(message: message, reply: .binary(connection, requestID: request.requestID,
                                                                                        tellsStatus: tellsStatus)))
    }

    /// A binary `ackUser` (`0x04`): every user message up to the id is acknowledged.
    func binaryAckUser(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        switch BinaryFrame.readAckUser(payload) {
        case .failure(let error):
            send(.error(id: nil, .invalidFrame, error.description), context: context)
        case .success(let upTo):
            switch pass(.binaryAckUser) {
            case .passed, .passedWith:
                guard let key = lifecycle.session else { return }
                hub.mailbox.acknowledge(key, upTo: Int64(clamping: upTo), on: connection)
            case .refused(let refusal):
                send(.error(id: nil, refusal.code, refusal.reason), context: context)
            case .ignored, .awaiting:
                break
            }
        }
    }

    /// Hands the read's binary user messages to the mailbox, in order.
    func flushUserSends() {
        guard !intake.userSends.isEmpty else { return }
        let batch = intake.userSends
        intake.userSends.removeAll(keepingCapacity: true)
        guard let key = lifecycle.session else { return }
        hub.mailbox.send(batch, from: key)
    }
}
