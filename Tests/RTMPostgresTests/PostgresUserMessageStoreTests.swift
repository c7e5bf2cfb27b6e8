import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import RTMPostgres
import RTMServer
import RTMTestSupport
import Testing

/// The PostgreSQL user-message store on a real PostgreSQL started for the test: the SQLite
/// store's semantics (SPEC M-1), shared by two nodes.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresUserMessageStoreTests {
    private static let logger = Logger(label: "test.postgres.user")

    /// Two stores (two nodes) on one fresh database.
    private func withStores(_ body: (PostgresUserMessageStore, PostgresUserMessageStore) async throws -> Void) async throws {
        try await withTwoNodes(open: { location, node in
            try await PostgresUserMessageStore.open(location: location, node: node, pollInterval: .milliseconds(50), logger: Self.logger)
        }, stop: { await $0.stop() }, body)
    }

    /// Runs a (blocking) store call off the cooperative pool, as the store's own thread does for the mailbox.
    private func call<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await offPool(body)
    }

    private func message(to receiver: String, _ text: String?, data: Data? = nil, ts: Int64 = 1_000, clientMsgId: UInt64? = nil) -> StoredUserMessage {
        StoredUserMessage(appId: "app", receiver: receiver, sender: "alice", text: text, data: data, customType: text == nil ? "bin" : nil, ts: ts,
                          clientMsgId: clientMsgId)
    }

    @Test("M-1: ids are per receiver and dense across nodes; one epoch; every field read back; acks delete up to an id")
    func idsFieldsAcks() async throws {
        try await withStores { a, b in
            #expect(a.epoch == b.epoch && !a.epoch.isEmpty)
            let first = try await call { try a.commit([message(to: "bob", "1"), message(to: "carol", "c1"), message(to: "bob", "2")],
                                                      acknowledgements: [], cap: 100, resendsSince: 0) }
            let second = try await call { try b.commit([message(to: "bob", nil, data: Data([0, 1, 255]))], acknowledgements: [], cap: 100, resendsSince: 0) }
            #expect(first.map(\.id) == [1, 1, 2] && second.map(\.id) == [3])
            let waiting = try await call { try a.pending(appId: "app", receiver: "bob", notBefore: 0) }
            #expect(waiting.map(\.id) == [1, 2, 3])
            #expect(waiting[0].text == "1" && waiting[0].data == nil && waiting[0].customType == nil && waiting[0].sender == "alice")
            #expect(waiting[2].text == nil && waiting[2].data == Data([0, 1, 255]) && waiting[2].customType == "bin" && waiting[2].ts == 1_000)
            let newest = try await call { try b.newest([UserMessageReceiver(appId: "app", userId: "bob"), UserMessageReceiver(appId: "app", userId: "nobody")]) }
            #expect(newest == [UserMessageReceiver(appId: "app", userId: "bob"): 3])
            // An ack on node B deletes up to its id, for that receiver only.
            _ = try await call { try b.commit([], acknowledgements: [(appId: "app", receiver: "bob", upTo: 2)], cap: 100, resendsSince: 0) }
            #expect(try await call { try a.pending(appId: "app", receiver: "bob", notBefore: 0) }.map(\.id) == [3])
            #expect(try await call { try a.pending(appId: "app", receiver: "carol", notBefore: 0) }.map(\.id) == [1])
            // Ids are never reused after deletion.
            #expect(try await call { try a.commit([message(to: "bob", "4")], acknowledgements: [(appId: "app", receiver: "bob", upTo: 3)], cap: 100, resendsSince: 0) }.map(\.id) == [4])
        }
    }

    @Test("M-1: the cap drops the oldest and the age limit the expired, both counted once for the receiver's next login")
    func capAndAge() async throws {
        try await withStores { a, b in
            let batch = (1...5).map { message(to: "bob", "m\($0)", ts: $0 <= 2 ? 10 : 5_000) }
            _ = try await call { try a.commit(batch, acknowledgements: [], cap: 4, resendsSince: 0) }
            _ = try await call { try b.commit([message(to: "bob", "m6", ts: 5_000)], acknowledgements: [], cap: 4, resendsSince: 0) }
            // Cap 4: m1, m2 dropped; then m3..m6 stay, m3 at ts 5000 as well.
            let waiting = try await call { try b.pending(appId: "app", receiver: "bob", notBefore: 100) }
            #expect(waiting.compactMap(\.text) == ["m3", "m4", "m5", "m6"])
            #expect(try await call { try a.takeDropped(appId: "app", receiver: "bob") } == 2)
            #expect(try await call { try a.takeDropped(appId: "app", receiver: "bob") } == 0)
            // Age: everything older than notBefore is dropped and counted.
            let none = try await call { try a.pending(appId: "app", receiver: "bob", notBefore: 6_000) }
            #expect(none.isEmpty)
            #expect(try await call { try b.takeDropped(appId: "app", receiver: "bob") } == 4)
        }
    }

    @Test("A commit on one node wakes the other node's follower with its receivers; its own commits do not")
    func notifiesOtherNodes() async throws {
        try await withStores { a, b in
            let seenByB = NIOLockedValueBox<[UserMessageReceiver]>([])
            let seenByA = NIOLockedValueBox<[UserMessageReceiver]>([])
            b.follow { receivers in if let receivers { seenByB.withLockedValue { $0 += receivers } } }
            a.follow { receivers in if let receivers { seenByA.withLockedValue { $0 += receivers } } }
            // Commits until B has heard one (its LISTEN may start after the first).
            _ = try await eventually(within: .seconds(5), every: .milliseconds(50)) {
                if !seenByB.withLockedValue({ $0.isEmpty }) { return true }
                _ = try await call { try a.commit([message(to: "bob", "x")], acknowledgements: [], cap: 100, resendsSince: 0) }
                return false
            }
            #expect(!seenByB.withLockedValue { $0 }.isEmpty)
            #expect(seenByB.withLockedValue { $0 }.allSatisfy { $0 == UserMessageReceiver(appId: "app", userId: "bob") })
            #expect(seenByA.withLockedValue { $0 }.isEmpty)
        }
    }

    @Test("M-3: a resend (same sender, same msgId) through either node, in one batch, or committed on two nodes at once is stored once and answered with the first id")
    func resendsStoredOnce() async throws {
        try await withStores { a, b in
            let first = try await call { try a.commit([message(to: "bob", "r1", clientMsgId: 7), message(to: "bob", "r1", clientMsgId: 7)],
                                                      acknowledgements: [], cap: 100, resendsSince: 0) }
            #expect(first == [CommittedUserMessage(id: 1, previous: 0), CommittedUserMessage(id: 1, isResend: true)])   // ids dense per receiver
            let again = try await call { try b.commit([message(to: "bob", "r1", clientMsgId: 7), message(to: "bob", "r2", clientMsgId: 8)],
                                                      acknowledgements: [], cap: 100, resendsSince: 0) }
            #expect(again == [CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 2, previous: 1)])
            // Two nodes commit the same resend at once, 20 times: exactly one stores it.
            for round in 0..<20 {
                let id = UInt64(100 + round)
                async let onA = call { try a.commit([self.message(to: "bob", "c\(round)", clientMsgId: id)], acknowledgements: [], cap: 1000, resendsSince: 0) }
                async let onB = call { try b.commit([self.message(to: "bob", "c\(round)", clientMsgId: id)], acknowledgements: [], cap: 1000, resendsSince: 0) }
                let both = try await onA + onB
                #expect(both.filter(\.isResend).count == 1 && both[0].id == both[1].id, "round \(round): \(both)")
            }
            let waiting = try await call { try a.pending(appId: "app", receiver: "bob", notBefore: 0) }
            #expect(waiting.compactMap(\.text) == ["r1", "r2"] + (0..<20).map { "c\($0)" })
            #expect(waiting.map(\.id) == Array(1...22))
            // A record older than the window (dated when stored: a window starting an hour from
            // now) is forgotten: the id counts as new.
            let hourLater = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            let late = try await call { try b.commit([self.message(to: "bob", "r1", clientMsgId: 7)], acknowledgements: [], cap: 100, resendsSince: hourLater) }
            #expect(late == [CommittedUserMessage(id: 23, previous: 22)])
        }
    }
}
