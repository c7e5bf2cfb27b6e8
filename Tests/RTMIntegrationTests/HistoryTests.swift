import Foundation
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// History end to end (AGORA_REFERENCE §2.8).
@Suite(.realTime, .serialized)
struct HistoryTests {
    @Test("§2.8: paging with newStart returns every stored message exactly once, newest first; unstored ones are absent")
    func pagingExactlyOnce() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        var stored: [String] = []
        for i in 0..<25 {
            try await alice.publish(channel: "log", message: "m\(i)", storeInHistory: true)
            stored.append("m\(i)")
            if i % 5 == 0 { try await alice.publish(channel: "log", message: "live-only \(i)") }
        }
        var seen: [HistoryMessage] = []
        var start: Int64 = 0
        var pages = 0
        repeat {
            let page = try await alice.getMessages(channel: "log", count: 10, start: start)
            seen += page.messages
            start = page.newStart
            pages += 1
        } while start != 0 && pages < 10
        #expect(pages == 3)
        #expect(seen.compactMap(\.text) == stored.reversed())
        #expect(Set(seen.map(\.ts)).count == 25)
        #expect(seen.allSatisfy { $0.publisher == "alice" })

        // Bounds: end is inclusive, start exclusive.
        let newestTen = try await alice.getMessages(channel: "log", count: 10)
        try #require(newestTen.messages.count == 10)   // a short page fails here instead of trapping on an index
        let bounded = try await alice.getMessages(channel: "log", count: 100, start: newestTen.messages[0].ts, end: newestTen.messages[4].ts)
        #expect(bounded.messages.map(\.ts) == Array(newestTen.messages[1...4].map(\.ts)))
        #expect(bounded.newStart == 0)
        do {
            _ = try await alice.getMessages(channel: "log", count: 101)
            Issue.record("count 101 was accepted")
        } catch {
            #expect(error.code == .invalidParameter)
        }
        await alice.logout()
    }

    @Test("§2.8: history older than the retention time is forgotten")
    func retention() async throws {
        let harness = try await Harness.start { $0.historyRetention = .milliseconds(300) }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        try await alice.publish(channel: "log", message: "old", storeInHistory: true)
        #expect(try await alice.getMessages(channel: "log").messages.count == 1)
        let gone = try await eventually(within: soon, every: .milliseconds(50)) {
            try await alice.getMessages(channel: "log").messages.isEmpty
        }
        #expect(gone)
        await alice.logout()
    }

    @Test("§2.8: user-channel history is the conversation, seen the same from both sides")
    func userConversation() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.publish(toUser: "bob", message: "hi bob", storeInHistory: true)
        try await bob.publish(toUser: "alice", message: "hi alice", storeInHistory: true)
        try await bob.publish(toUser: "alice", message: "not kept")
        let fromAlice = try await alice.getMessages(channel: "bob", channelType: .user)
        let fromBob = try await bob.getMessages(channel: "alice", channelType: .user)
        #expect(fromAlice.messages.compactMap(\.text) == ["hi alice", "hi bob"])
        #expect(fromAlice == fromBob)
        await alice.logout()
        await bob.logout()
    }
}
