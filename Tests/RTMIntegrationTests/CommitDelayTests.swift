import Foundation
import RTMClient
import RTMServer
import Testing

/// Group commit at a light load (`userMessageCommitDelay`): user messages that find the store
/// idle wait for company, so a burst shares one transaction instead of one each.
@Suite(.realTime, .serialized)
struct CommitDelayTests {
    @Test("M-1: with a 1 s commit delay, two bursts of user messages 200 ms apart are stored in one commit (without it, in two or more); each send still gets its receipt and the receiver all eight, in store order", arguments: [1000, 0])
    func burstSharesOneCommit(delayMillis: Int64) async throws {
        let harness = try await Harness.start { $0.userMessageCommitDelay = .milliseconds(delayMillis) }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let before = try await MetricsTests.scrape(harness.port)
        let started = ContinuousClock.now
        // Two bursts 200 ms apart: without the delay the first is committed before the second
        // arrives (two commits at least); with it both share the first one's commit.
        let receipts = try await withThrowingTaskGroup(of: (String, UserMessageReceipt).self) { group in
            for i in 1...8 {
                if i == 5 { try await Task.sleep(for: .milliseconds(200)) }   // the gap between the bursts is the rule under test
                group.addTask { ("m\(i)", try await alice.publish(toUser: "bob", message: "m\(i)")) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let waited = ContinuousClock.now - started
        #expect(receipts.count == 8 && receipts.allSatisfy { !$0.1.receiverOnline })
        // Delivered in store order: the one with the highest id comes last.
        let sorted = receipts.sorted { $0.1.messageId < $1.1.messageId }.map(\.0)
        let after = try await MetricsTests.scrape(harness.port)
        let commits = after["rtm_user_message_store_commits_total"] - before["rtm_user_message_store_commits_total"]
        if delayMillis > 0 {
            #expect(commits == 1)
            #expect(waited >= .milliseconds(delayMillis))   // the first waited for the others
        } else {
            #expect(commits >= 2)
        }
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let last = sorted.last
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == last }
        #expect(await DeliveryTests.texts(bobEvents, user: true) == sorted)
        await bob.logout()
        await alice.logout()
    }
}
