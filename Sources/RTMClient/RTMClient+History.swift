import NIOCore
import RTMProtocol

/// History (AGORA_REFERENCE §2.8): messages published with `storeInHistory`, kept by the server
/// for its retention time.
extension RTMClient {
    /// Up to `count` (≤ 100) stored messages of a message channel, or of the conversation with
    /// user `channel` when `channelType` is `.user`, newest first: older than `start` (ms,
    /// exclusive; 0 = now) and not older than `end` (ms, inclusive; 0 = no bound). Pass the
    /// page's `newStart` as the next `start` until it is 0: every message comes exactly once.
    public func getMessages(channel: String, channelType: MessageEvent.ChannelType = .message, count: Int = 100,
                            start: Int64 = 0, end: Int64 = 0) async throws(RTMError) -> HistoryPage {
        try check(channel: channel, operation: "getMessages")
        guard (1...Limits().maxHistoryCount).contains(count) else {
            throw RTMError(.invalidParameter, operation: "getMessages", "count must be 1–\(Limits().maxHistoryCount), got \(count)")
        }
        guard channelType != .stream else {
            throw RTMError(.invalidParameter, operation: "getMessages", "stream channels keep no history")
        }
        var frame = Frame(type: .getMessages, channel: channel, channelType: channelType.rawValue, count: count)
        frame.start = start
        frame.end = end
        let request = frame
        let core = self.core
        let future = core.loop.flatSubmit { core.request(request, operation: "getMessages") }
        let reply = try await Self.wait(future, operation: "getMessages")
        return HistoryPage(messages: reply.messages ?? [], newStart: reply.newStart ?? 0)
    }
}
