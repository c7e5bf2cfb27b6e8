import NIOConcurrencyHelpers
import NIOCore
import RTMContracts
import RTMProtocol
import RTMTestSupport
@testable import RTMServer
import Testing

/// The channel log's contract (`ChannelLogContract`) on one node's log: the hub's state, which
/// numbers a publish in memory and keeps it for replay (`HubState+Pipeline`). The cluster's log
/// runs the same cases in RTMPostgresTests.
@Suite("Channel log contract: the single node's in-memory log")
struct MemoryChannelLogContractTests {
    @Test(arguments: ChannelLogContract.cases)
    func contract(_ rule: ContractCase<ChannelLogSubject>) async throws {
        var configuration = ServerConfiguration()
        configuration.channelReplayMax = 1_000
        configuration.channelReplayWindow = .hours(1)
        let hub = NIOLockedValueBox(HubState(configuration: configuration))
        try await rule.run(on: ChannelLogSubject(append: { channel, publisher, messages in
            let outgoing = messages.map {
                Hub.Outgoing(requestID: 0, msgId: $0.msgId, customType: nil, isText: true, payload: ByteBuffer(string: $0.text))
            }
            let published = hub.withLockedValue {
                $0.publish(outgoing, channel: ChannelKey(appId: "app", name: channel), publisher: UserKey(appId: "app", userId: publisher),
                           nowMillis: Hub.wallMillis, dropSeq: nil, allocator: ByteBufferAllocator())
            }
            return published.seqs.map { ChannelLogSubject.Numbered(seq: $0, epoch: published.epoch) }
        }, after: { channel, seq in
            let replay = hub.withLockedValue { state in
                let key = ChannelKey(appId: "app", name: channel)
                let epoch = state.channels[key]?.epoch ?? ""
                return state.replay(key, after: ChannelPosition(epoch: epoch, seq: seq), nowMillis: Hub.wallMillis)
            }
            return try replay.messages.flatMap { frames in try Self.kept(frames) }
        }))
    }

    /// The messages in replayed `message` frames.
    private static func kept(_ frames: ByteBuffer) throws -> [ChannelLogSubject.Kept] {
        var kept: [ChannelLogSubject.Kept] = []
        for frame in RawPeer.frames(in: frames) {
            guard case .messages(let items) = try BinaryFrame.decode(ByteBuffer(bytes: frame.payload)) else {
                Issue.record("not a message frame")
                return kept
            }
            kept += items.map { ChannelLogSubject.Kept(seq: $0.seq, publisher: $0.publisher, text: String(buffer: $0.payload)) }
        }
        return kept
    }
}
