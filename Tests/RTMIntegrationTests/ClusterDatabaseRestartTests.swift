import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// The database stopped and started again under load, two real node processes.
extension ClusterTests {
    /// What the publishers of a load saw: the texts acknowledged (channel publishes, user
    /// messages) and the errors of the refused ones.
    final class LoadLedger: Sendable {
        private struct State {
            var published: [String] = []
            var sent: [String] = []
            var refused: [RTMError] = []
            /// The longest a channel publish took, acknowledgement included (seconds).
            var longestPublish: Double = 0
        }
        private let state = NIOLockedValueBox(State())
        private let running = NIOLockedValueBox(true)

        var published: [String] { state.withLockedValue { $0.published } }
        var sent: [String] { state.withLockedValue { $0.sent } }
        var refused: [RTMError] { state.withLockedValue { $0.refused } }
        var longestPublish: Double { state.withLockedValue { $0.longestPublish } }
        var isRunning: Bool { running.withLockedValue { $0 } }
        func stop() { running.withLockedValue { $0 = false } }

        /// Channel publishes, and beside them user messages, one after the other every 5 ms
        /// each, until stopped (two loops: a user message waiting for the store does not hold
        /// the channel publishes back).
        func stream(from client: RTMClient, name: String, to receiver: String) async {
            async let channel: Void = publishes(from: client, name: name)
            async let user: Void = sends(from: client, name: name, to: receiver)
            _ = await (channel, user)
        }

        private func publishes(from client: RTMClient, name: String) async {
            await paced { i in
                let text = "\(name)-\(i)"
                do throws(RTMError) {
                    let started = ContinuousClock.now
                    _ = try await client.publish(channel: "room", message: text)
                    let took = Self.seconds(ContinuousClock.now - started)
                    state.withLockedValue {
                        $0.published.append(text)
                        $0.longestPublish = max($0.longestPublish, took)
                    }
                } catch {
                    state.withLockedValue { $0.refused.append(RTMError(error.code, operation: "publish \(text)", error.reason)) }
                }
            }
        }

        private func sends(from client: RTMClient, name: String, to receiver: String) async {
            await paced { i in
                let text = "\(name)-u\(i)"
                do throws(RTMError) {
                    _ = try await client.publish(toUser: receiver, message: text)
                    state.withLockedValue { $0.sent.append(text) }
                } catch {
                    state.withLockedValue { $0.refused.append(RTMError(error.code, operation: "sendUser \(text)", error.reason)) }
                }
            }
        }

        /// Runs `step` with 1, 2, 3, … a few milliseconds apart until the ledger is stopped.
        private func paced(_ step: (Int) async -> Void) async {
            var i = 0
            while isRunning {
                i += 1
                await step(i)
                try? await Task.sleep(nanoseconds: 5_000_000)   // pacing the load generator: a steady load is the condition under test
            }
        }

        private static func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
    }

    /// Waits until `events` holds a message (of `type`) for each of `texts`; the texts it got.
    private static func waitForTexts(_ texts: Set<String>, in events: AsyncRecorder<RTMEvent>, type: MessageEvent.ChannelType,
                                     within timeout: Duration = .seconds(20)) async -> [MessageEvent] {
        let got = { await events.matching { $0.messageEvent?.channelType == type }.compactMap(\.messageEvent) }
        _ = await eventually(within: timeout, every: .milliseconds(20)) { texts.isSubset(of: Set(await got().compactMap(\.text))) }
        return await got()
    }

    /// Logs a raw client in on `port` and sends one JSON publish with request id `id` to `room`;
    /// the text of the server's reply to it.
    private static func rawPublishReply(port: Int, id: Int) async throws -> String? {
        let raw = try await RawPeer.connect(port: port)
        let reply = try await rawPublish(raw, id: id)
        await raw.close()
        return reply
    }

    private static func rawPublish(_ raw: RawPeer, id: Int) async throws -> String? {
        var bytes = ByteBuffer(string: RawPeer.upgradeRequest())
        var login = RawPeer.text(#"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"raw","token":"\#(Harness.token("raw"))"}"#)
        bytes.writeBuffer(&login)
        try await raw.write(bytes)
        var published = false
        return try await firstValue(within: soon) {
            let texts = raw.frames().map(\.text)
            if !published, texts.contains(where: { $0.contains(#""type":"ok""#) && $0.contains(#""id":1"#) }) {
                try await raw.write(RawPeer.text(#"{"type":"publish","id":\#(id),"channel":"room","text":"raw"}"#))
                published = true
            }
            return texts.first(where: { $0.contains(#""id":\#(id)"#) })
        }
    }

    @Test("M-1, M-3: PostgreSQL stopped (pg_ctl stop -m fast) and started again under a steady load through two node processes: every acknowledged publish and user message delivered exactly once to the subscribers and receivers on both nodes, the refused ones answered by the server with their request id, /health and rtm_database_up down then up")
    func databaseRestartUnderLoad() async throws {
        let (database, nodes) = try await RTMProcess.clusterNodes(["a", "b"])   // stopped by the .realTime trait's scope
        let (a, b) = (nodes[0].port, nodes[1].port)
        let (subA, subAEvents) = try await ClusterTests.client("sub-a", port: a)
        let (subB, subBEvents) = try await ClusterTests.client("sub-b", port: b)
        try await subA.subscribe("room")
        try await subB.subscribe("room")
        // Each sender's receiver is on the other node.
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: b)
        let (dave, daveEvents) = try await ClusterTests.client("dave", port: a)
        // Long enough that a refusal is the server's answer, never the SDK's own timeout.
        let patient: (inout RTMClientConfig) -> Void = { $0.requestTimeout = 15 }
        let (alice, _) = try await ClusterTests.client("alice", port: a, configure: patient)
        let (bob, _) = try await ClusterTests.client("bob", port: b, configure: patient)
        let ledger = LoadLedger()
        async let aliceDone: Void = ledger.stream(from: alice, name: "alice", to: "carol")
        async let bobDone: Void = ledger.stream(from: bob, name: "bob", to: "dave")

        // Traffic flows through both nodes, then the database goes away.
        #expect(await subBEvents.first(within: soon) { $0.messageEvent?.text == "alice-20" } != nil)
        #expect(await subAEvents.first(within: soon) { $0.messageEvent?.text == "bob-20" } != nil)
        try await database.stop()
        for port in [a, b] { #expect(try await Self.waitForMetric("rtm_database_up", 0, port: port)) }
        #expect(try await StreamTests.httpGet("/health", port: a).contains("database: down"))
        #expect(try await StreamTests.httpGet("/health", port: b).contains("database: down"))
        let rawReply = try await Self.rawPublishReply(port: b, id: 4242)
        #expect(rawReply?.contains(#""type":"error""#) == true, "\(rawReply ?? "no reply")")
        #expect(rawReply?.contains(#""code":\#(RTMErrorCode.channelPublishMessageTimeout.rawValue)"#) == true, "\(rawReply ?? "no reply")")
        // The outage lasts a few seconds under load. (A user message sent meanwhile waits up
        // to the store's 10 s answer deadline before its error reply; a channel publish is
        // refused at once.)
        try await Task.sleep(nanoseconds: 2_000_000_000)   // the length of the fault, not a wait for a result

        try await database.start()
        for port in [a, b] { #expect(try await Self.waitForMetric("rtm_database_up", 1, port: port)) }
        #expect(try await StreamTests.httpGet("/health", port: a).contains("database: up"))
        #expect(try await StreamTests.httpGet("/health", port: b).contains("database: up"))
        // The load goes on after the restart.
        let publishedAtRestart = ledger.published.count
        _ = await eventually(within: .seconds(15), every: .milliseconds(20)) { ledger.published.count >= publishedAtRestart + 40 }
        ledger.stop()
        _ = await (aliceDone, bobDone)
        #expect(ledger.published.count >= publishedAtRestart + 40)

        // No channel publish was refused to the application: the server refused them while
        // the database was away, and the SDK sent each again with its msgId until one was
        // acknowledged after the restart (M-3, R-3); one of them waited through the outage.
        #expect(ledger.refused.filter { $0.operation.hasPrefix("publish ") }.isEmpty, "\(ledger.refused.prefix(5))")
        #expect(ledger.longestPublish > 1.5, "no publish waited through the outage: \(ledger.longestPublish) s")
        // A refused user message was the server's error reply to that request (the SDK
        // matches a reply by its id: without it the call would have ended in its own timeout).
        for error in ledger.refused {
            #expect(!error.reason.contains("no reply within"), "\(error)")
            #expect([RTMErrorCode.channelPublishMessageTimeout, .channelReceiverOfflineAndMessageStoreFailed].contains(error.code), "\(error)")
        }
        // Channel messages: each acknowledged one exactly once on both nodes, in one order.
        let published = Set(ledger.published)
        let onA = await Self.waitForTexts(published, in: subAEvents, type: .message)
        let onB = await Self.waitForTexts(published, in: subBEvents, type: .message)
        for seen in [onA, onB] {
            let texts = seen.compactMap(\.text)
            #expect(published.isSubset(of: Set(texts)), "missing: \(published.subtracting(texts).sorted().prefix(10))")
            #expect(texts.count == Set(texts).count, "delivered twice: \(Dictionary(grouping: texts) { $0 }.filter { $1.count > 1 }.keys.sorted().prefix(10))")
            let seqs = seen.compactMap(\.seq)
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        }
        #expect(onA.compactMap(\.text) == onB.compactMap(\.text))
        // User messages: each acknowledged one exactly once to its receiver on the other node.
        for (receiver, events, sender) in [("carol", carolEvents, "alice"), ("dave", daveEvents, "bob")] {
            let sent = Set(ledger.sent.filter { $0.hasPrefix(sender + "-") })
            let texts = await Self.waitForTexts(sent, in: events, type: .user).compactMap(\.text)
            #expect(sent.isSubset(of: Set(texts)), "\(receiver) missing: \(sent.subtracting(texts).sorted().prefix(10))")
            #expect(texts.count == Set(texts).count, "\(receiver) got a message twice")
        }
        for client in [subA, subB, carol, dave, alice, bob] { await client.logout() }
    }
}
