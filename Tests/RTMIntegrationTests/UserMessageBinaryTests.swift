import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// User messages over the binary form (PROTOCOL.md §2.3) and their durability under `kill -9`
/// while many are in flight (SPEC M-1, group commit).
@Suite(.realTime, .serialized)
struct UserMessageBinaryTests {
    @Test("M-1: 300 user messages sent at once over the binary path arrive once each, in order, with increasing store ids; receipts say online")
    func manyInOrder() async throws {
        let harness = try await Harness.start()
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        // Sent back to back (not awaited one by one), so they share reads and commits.
        let receipts = try await withThrowingTaskGroup(of: (Int, UserMessageReceipt).self) { group in
            for i in 0..<150 {
                group.addTask { (i, try await alice.publish(toUser: "bob", message: "m\(i)")) }
            }
            var all: [(Int, UserMessageReceipt)] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(receipts.allSatisfy { $0.1.stored && $0.1.receiverOnline && $0.1.messageId > 0 })
        #expect(Set(receipts.map(\.1.messageId)).count == 150)
        // A second batch, awaited in order: deliveries must follow the send order.
        for i in 150..<300 { try await alice.publish(toUser: "bob", message: "m\(i)") }
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "m299" }
        let received = await bobEvents.matching { $0.messageEvent?.channelType == .user }.compactMap(\.messageEvent)
        #expect(received.count == 300)
        #expect(Set(received.compactMap(\.text)).count == 300)
        #expect(Array(received.compactMap(\.text).suffix(150)) == (150..<300).map { "m\($0)" })
        let ids = received.compactMap(\.seq)
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
        #expect(received.allSatisfy { $0.publisher == "alice" && $0.channelName == "bob" })
        await bob.logout()
        await alice.logout()
    }

    @Test("M-1: a JSON receiver still gets JSON user messages from a binary sender; a malformed binary sendUser gets -10100 with its id")
    func jsonReceiverAndMalformed() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let raw = try await RawConnection.open(port: harness.port)
        #expect(await raw.login("carol")?.type == .ok)   // no binaryUser: JSON deliveries
        try await alice.publish(toUser: "carol", message: "to json")
        let delivered = await raw.frames.first(within: soon) { $0.type == .message && $0.channelType == "user" }
        #expect(delivered?.text == "to json" && delivered?.publisher == "alice" && delivered?.channel == "carol")
        // A binary sendUser cut inside its receiver id: the error names request 77.
        var frame = ByteBuffer()
        BinaryFrame.writeSendUser(into: &frame, requestID: 77, msgId: 1, receiver: "someone", customType: nil, isText: true, payload: "x".utf8)
        raw.sendBinary(frame.getSlice(at: 0, length: 20)!)
        let error = await raw.reply(77)
        #expect(error?.type == .error && error?.code == RTMErrorCode.invalidFrame.rawValue)
        // Well-formed (the transport sends sendUser in the binary form): a receipt; an invalid
        // receiver: a JSON error with its id.
        raw.send(Frame(type: .sendUser, id: 78, userId: "alice", text: "hi", msgId: 2))
        raw.send(Frame(type: .sendUser, id: 79, userId: "", text: "hi", msgId: 3))
        let receipt = await raw.reply(78)
        #expect(receipt?.type == .ok && receipt?.stored == true && receipt?.receiverOnline == true && (receipt?.msgId ?? 0) > 0)
        let invalid = await raw.reply(79)
        #expect(invalid?.type == .error && invalid?.code == RTMErrorCode.invalidUserId.rawValue)
        raw.channel.close(promise: nil)
        await alice.logout()
    }

    @Test("M-3: a sendUser resent after the server was killed with SIGKILL and restarted (its reply lost) gets the first id and is delivered once")
    func resendAfterKill9StoredOnce() async throws {
        let server = try await DurableServer()
        let before = try await RawConnection.open(port: server.port)
        #expect(await before.login("alice")?.type == .ok)
        before.send(Frame(type: .sendUser, id: 5, userId: "bob", text: "once", msgId: 9_001))
        let receipt = await before.reply(5)
        #expect(receipt?.type == .ok && receipt?.stored == true)
        try await server.killAndRestart()
        // The client never saw that reply (as far as it knows): the same msgId again.
        let after = try await RawConnection.open(port: server.port)
        #expect(await after.login("alice")?.type == .ok)
        after.send(Frame(type: .sendUser, id: 6, userId: "bob", text: "once", msgId: 9_001))
        after.send(Frame(type: .sendUser, id: 7, userId: "bob", text: "next", msgId: 9_002))
        #expect(await after.reply(6)?.msgId == receipt?.msgId)
        #expect((await after.reply(7)?.msgId ?? 0) > (receipt?.msgId ?? 0))
        let (bob, bobEvents) = try await Harness.client("bob", port: server.port)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "next" } != nil)
        #expect(await bobEvents.matching { $0.messageEvent?.channelType == .user }.compactMap { $0.messageEvent?.text } == ["once", "next"])
        after.channel.close(promise: nil)
        await bob.logout()
    }

    @Test("M-1: kill -9 while user messages are in flight: every acknowledged one is delivered after a restart on the same data directory")
    func acknowledgedSurviveKill9Midstream() async throws {
        let server = try await DurableServer()
        let port = server.port
        let (alice, _) = try await Harness.client("alice", port: port)
        let acknowledged = NIOLockedValueBox<Set<String>>([])
        let killed = NIOLockedValueBox(false)
        let acknowledgedAtKill = try await withThrowingTaskGroup(of: Set<String>?.self) { group in
            for i in 0..<180 {
                group.addTask {
                    if (try? await alice.publish(toUser: "bob", message: "k\(i)")) != nil,
                       !killed.withLockedValue({ $0 }) {
                        acknowledged.withLockedValue { _ = $0.insert("k\(i)") }
                    }
                    return nil
                }
            }
            group.addTask {
                _ = await eventually(within: soon, every: .milliseconds(1)) { acknowledged.withLockedValue { $0.count } >= 40 }
                // Killed while the rest are in flight (no shutdown code runs), then started again:
                // the sender's SDK reconnects and resends what was not answered.
                let snapshot = killed.withLockedValue { killed in
                    killed = true
                    return acknowledged.withLockedValue { $0 }
                }
                try await server.killAndRestart()
                return snapshot
            }
            var snapshot: Set<String> = []
            for try await result in group { if let result { snapshot = result } }
            return snapshot
        }
        #expect(acknowledgedAtKill.count >= 40)
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        let userTexts = { Set(await bobEvents.matching { $0.messageEvent?.channelType == .user }.compactMap { $0.messageEvent?.text }) }
        _ = await eventually(within: .seconds(10), every: .milliseconds(20)) { acknowledgedAtKill.isSubset(of: await userTexts()) }
        let received = await userTexts()
        #expect(acknowledgedAtKill.subtracting(received).isEmpty, "lost: \(acknowledgedAtKill.subtracting(received).sorted())")
        // M-3: what was stored before the kill but not answered is resent by the SDK after it;
        // the store recognises the resends, so nothing arrives twice (and no duplicate pushes
        // the oldest past the per-receiver cap).
        let all = await bobEvents.matching { $0.messageEvent?.channelType == .user }.compactMap { $0.messageEvent?.text }
        #expect(all.count == Set(all).count, "delivered twice: \(Dictionary(grouping: all, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted())")
        #expect(await bobEvents.matching { if case .userMessagesDropped = $0 { true } else { false } }.isEmpty)
        await bob.logout()
        await alice.logout()
    }
}
