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

    @Test("R-3: resends back off from 250 ms, doubling, to at most 2 s")
    func resendDelays() {
        #expect((0..<6).map { PendingRequests.resendDelay(after: $0).nanoseconds / 1_000_000 } == [250, 500, 1_000, 2_000, 2_000, 2_000])
    }
}
