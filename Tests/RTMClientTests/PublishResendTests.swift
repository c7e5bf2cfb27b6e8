import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMClient

/// Which refusals the SDK answers by sending the request again itself (SPEC M-3, R-3).
struct PublishResendTests {
    private let publish = Frame(type: .publish, channel: "room", text: "hi").with { $0.msgId = 7 }

    private func refusal(_ code: RTMErrorCode) -> Frame {
        Frame(type: .error, code: code.rawValue, reason: "the outcome is unknown; resend with the same msgId")
    }

    @Test("M-3: a channel publish the cluster could not commit (-11026) is sent again with its msgId")
    func clusterRefusalIsResent() {
        #expect(ClientCore.resendsRefusal(refusal(.channelPublishMessageTimeout), of: publish))
    }

    @Test("R-3: every other refusal, or a request without a msgId, fails the request")
    func otherRefusalsFail() {
        #expect(!ClientCore.resendsRefusal(refusal(.channelInvalidMessage), of: publish))
        #expect(!ClientCore.resendsRefusal(Frame(type: .ok), of: publish))
        #expect(!ClientCore.resendsRefusal(refusal(.channelPublishMessageTimeout), of: Frame(type: .publish, channel: "room", text: "hi")))
        #expect(!ClientCore.resendsRefusal(refusal(.channelPublishMessageTimeout), of: Frame(type: .subscribe, channel: "room")))
    }

    /// A request of the application's (`internal`: one of the SDK's restore requests).
    private func request(_ id: UInt64, on loop: EmbeddedEventLoop, internal isInternal: Bool = false) -> PendingRequests.Request {
        PendingRequests.Request(frame: publish.with { $0.id = id; $0.msgId = id }, operation: "publish",
                                promise: loop.makePromise(), isInternal: isInternal)
    }

    @Test("M-3: a publish made while a refused one waits to be sent again queues behind it, and goes after it")
    func newRequestQueuesBehindRefused() throws {
        let loop = EmbeddedEventLoop()
        var pending = PendingRequests()
        let first = pending.admit(request(1, on: loop), id: 1, connected: true)
        #expect(first)                                                  // sent
        let taken = pending.take(1)
        let refused = try #require(taken)                               // refused with -11026
        pending.requeue(refused, id: 1)
        let second = pending.admit(request(2, on: loop), id: 2, connected: true)
        #expect(!second)                                                // queued, not sent ahead of 1
        let sent = pending.dequeue().map(\.id)
        #expect(sent == [1, 2])
        let third = pending.admit(request(3, on: loop), id: 3, connected: true)
        #expect(third)                                                  // nothing waits: sent at once
        for id: UInt64 in 1...3 { pending.take(id)?.promise.succeed(Frame(type: .ok)) }
    }

    @Test("M-3: a refused publish goes back in the application's order, before requests made after it; restore requests go at once")
    func refusedRequestKeepsItsPlace() throws {
        let loop = EmbeddedEventLoop()
        var pending = PendingRequests()
        var admitted = [pending.admit(request(1, on: loop), id: 1, connected: true),   // 1 and 2 pipelined
                        pending.admit(request(2, on: loop), id: 2, connected: true)]
        let takenOne = pending.take(1)
        let one = try #require(takenOne)                                 // 1 refused
        pending.requeue(one, id: 1)
        admitted.append(pending.admit(request(3, on: loop), id: 3, connected: true))   // behind 1
        let takenTwo = pending.take(2)
        let two = try #require(takenTwo)                                 // 2 refused: goes before 3
        pending.requeue(two, id: 2)
        admitted.append(pending.admit(request(4, on: loop, internal: true), id: 4, connected: true))   // a restore request
        #expect(admitted == [true, true, false, true])
        let sent = pending.dequeue().map(\.id)
        #expect(sent == [1, 2, 3])
        for id: UInt64 in 1...4 { pending.take(id)?.promise.succeed(Frame(type: .ok)) }
    }

    @Test("R-3: resends back off from 250 ms, doubling, to at most 2 s")
    func resendDelays() {
        #expect((0..<6).map { PendingRequests.resendDelay(after: $0).nanoseconds / 1_000_000 } == [250, 500, 1_000, 2_000, 2_000, 2_000])
    }
}
