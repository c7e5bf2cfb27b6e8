import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import RTMServer

/// The mailbox's wake-ups run on the loop it is given: a test's loop fires them when its clock
/// gets there, not before (the commit delay here; each message's deadline the same way).
struct UserMailboxTimerTests {
    @Test("M-1: with a commit delay, a message that finds the store idle is handed to the store when the injected clock reaches the delay, not before")
    func commitDelayOnTheInjectedLoop() async throws {
        let loop = NIOAsyncTestingEventLoop()
        let store = try SQLiteUserMessageStore(path: nil)
        let mailbox = UserMailbox(store: store, cap: 200, maxAge: .hours(1), dedupCapacity: 16, commitDelay: .seconds(5),
                                  deadline: .seconds(60), timers: loop, logger: Logger(label: "test"))
        let answers = NIOLockedValueBox<[Int64]>([])
        let message = StoredUserMessage(appId: "app", receiver: "bob", sender: "alice", text: "hi", data: nil, customType: nil, ts: 0)
        mailbox.send(message, from: UserKey(appId: "app", userId: "alice"), clientMsgId: nil) { result in
            if case .success(let receipt) = result { answers.withLockedValue { $0.append(receipt.id) } }
        }
        await loop.advanceTime(by: .seconds(4))
        store.thread.waitForCalls()
        #expect(answers.withLockedValue { $0 }.isEmpty && mailbox.storedCount == 0)   // waiting for company
        await loop.advanceTime(by: .seconds(1))   // the wake-up hands the commit to the store's thread
        store.thread.waitForCalls()               // whose end answered the sender
        #expect(answers.withLockedValue { $0 } == [1])
        #expect(mailbox.storedCount == 1)
        await loop.shutdownGracefully()
    }
}
