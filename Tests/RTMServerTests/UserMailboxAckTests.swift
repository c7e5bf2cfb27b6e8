import Dispatch
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import RTMServer

/// An `ackUser` deletes only what was written to the connection it comes on (SPEC M-1): a
/// client that acknowledges ids it was never sent (counting on its own, or ahead of messages
/// still on their way) loses nothing.
struct UserMailboxAckTests {
    /// Three messages wait for bob; the login's read of them waits for `open()`; commits record
    /// the acknowledgements they apply.
    private final class GatedStore: UserMessageStore, @unchecked Sendable {
        let epoch = "gated"
        let thread = StoreThread(label: "test.gated")
        private let gate = DispatchSemaphore(value: 0)
        let applied = NIOLockedValueBox<[Int64]>([])

        func open() { gate.signal() }

        func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                    resendsSince: Int64) throws -> [CommittedUserMessage] {
            applied.withLockedValue { $0 += acknowledgements.map(\.upTo) }
            return messages.indices.map { CommittedUserMessage(id: Int64(100 + $0)) }
        }

        func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage] {
            gate.wait()
            return (1...3).map {
                StoredUserMessage(id: $0, appId: appId, receiver: receiver, sender: "alice", text: "m\($0)", data: nil, customType: nil, ts: 0)
            }
        }

        func takeDropped(appId: String, receiver: String) throws -> Int { 0 }
    }

    @Test("M-1: an ackUser above every id written to its connection counts up to the highest written (none yet: nothing), and one from a connection that is not the receiver's counts for nothing")
    func ackCountsOnlyWhatWasWritten() async throws {
        let store = GatedStore()
        let mailbox = UserMailbox(store: store, cap: 200, maxAge: .hours(1), dedupCapacity: 16, logger: Logger(label: "test"))
        let bob = UserKey(appId: "app", userId: "bob")
        let connection = ConnectionRef(id: 1, channel: NIOAsyncTestingChannel(), loopIndex: 0)
        let stranger = ConnectionRef(id: 2, channel: NIOAsyncTestingChannel(), loopIndex: 0)

        mailbox.attach(bob, connection: connection)   // its read waits at the gate: nothing written yet
        mailbox.acknowledge(bob, upTo: 1_000_000, on: connection)
        await mailbox.drain()
        #expect(store.applied.withLockedValue { $0 } == [], "an acknowledgement of ids never written was applied")

        store.open()   // the three waiting messages are written to the connection
        store.thread.waitForCalls()   // the read has ended and was handed to the settler (`drain` waits for it)
        mailbox.acknowledge(bob, upTo: 1_000_000, on: stranger)
        await mailbox.drain()
        #expect(store.applied.withLockedValue { $0 } == [], "an acknowledgement from another connection was applied")
        mailbox.acknowledge(bob, upTo: 1_000_000, on: connection)
        await mailbox.drain()
        #expect(store.applied.withLockedValue { $0 } == [3])
    }
}
