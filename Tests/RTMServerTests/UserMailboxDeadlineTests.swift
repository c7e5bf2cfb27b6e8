import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import RTMTestSupport
import Testing
@testable import RTMServer

/// `sendUser` is answered within `userMessageDeadline` even when the store hangs (SPEC M-1: a
/// sender is never left without an answer; M-3: it knows whether to resend).
struct UserMailboxDeadlineTests {
    /// A store whose commits take `durations[n]` each (the n-th call), stopping at `due` when
    /// `honoursDue` (as the PostgreSQL store does) and throwing then.
    private final class SlowStore: UserMessageStore, @unchecked Sendable {
        let epoch = "slow"
        let thread = StoreThread(label: "test.slow")
        private let durations: [TimeAmount]
        private let honoursDue: Bool
        private let calls = NIOLockedValueBox(0)
        /// Commits begun so far.
        var begun: Int { calls.withLockedValue { $0 } }
        /// With `holdFirst`, the first commit hangs until `releaseFirst()` (at most 10 s).
        private let held = DispatchSemaphore(value: 0)
        var holdFirst = false

        func releaseFirst() { held.signal() }

        init(durations: [TimeAmount], honoursDue: Bool) {
            self.durations = durations
            self.honoursDue = honoursDue
        }

        struct TimedOut: Error {}

        func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                    resendsSince: Int64) throws -> [CommittedUserMessage] {
            try commit(messages, acknowledgements: acknowledgements, cap: cap, resendsSince: resendsSince, before: .distantFuture)
        }

        func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                    resendsSince: Int64, before due: NIODeadline) throws -> [CommittedUserMessage] {
            let index = calls.withLockedValue { calls in defer { calls += 1 }; return calls }
            if holdFirst && index == 0 {
                _ = held.wait(timeout: .now() + .seconds(10))
                return messages.indices.map { CommittedUserMessage(id: Int64($0 + 1)) }
            }
            let end = NIODeadline.now() + (index < durations.count ? durations[index] : .zero)
            let stop = honoursDue ? min(end, due) : end
            Thread.sleep(forTimeInterval: Double(max(0, (stop - .now()).nanoseconds)) / 1e9)
            if stop < end { throw TimedOut() }
            return messages.indices.map { CommittedUserMessage(id: Int64(index * 100 + $0 + 1)) }
        }

        func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage] { [] }
        func takeDropped(appId: String, receiver: String) throws -> Int { 0 }
    }

    private enum Outcome {
        case stored(Int64)
        case refused(String)
    }

    private static func message(_ text: String) -> StoredUserMessage {
        StoredUserMessage(appId: "app", receiver: "bob", sender: "alice", text: text, data: nil, customType: nil, ts: 0)
    }

    /// Sends `text` and records its answer with the time it came.
    private static func send(_ mailbox: UserMailbox, _ text: String, into answers: NIOLockedValueBox<[(String, Outcome)]>) {
        mailbox.send(message(text), from: UserKey(appId: "app", userId: "alice"), clientMsgId: nil) { result in
            let outcome: Outcome = switch result {
            case .success(let receipt): .stored(receipt.id)
            case .failure(let error): .refused("\(error)")
            }
            answers.withLockedValue { $0.append((text, outcome)) }
        }
    }

    private static func mailbox(_ store: SlowStore, deadline: TimeAmount) -> UserMailbox {
        UserMailbox(store: store, cap: 200, maxAge: .hours(1), dedupCapacity: 16, deadline: deadline, logger: Logger(label: "test"))
    }

    @Test("M-1, M-3: behind a commit that hangs past the deadline, each sender is answered at its own deadline: the one in the commit with the outcome unknown, the one waiting with nothing stored (it never reaches the store)")
    func refusedUnsentBehindAHungCommit() async throws {
        let store = SlowStore(durations: [], honoursDue: false)
        store.holdFirst = true   // the first commit hangs until both senders were answered
        let mailbox = Self.mailbox(store, deadline: .milliseconds(300))
        let answers = NIOLockedValueBox<[(String, Outcome)]>([])
        Self.send(mailbox, "first", into: answers)
        #expect(await Self.waitUntil(.seconds(5)) { store.begun == 1 })   // "first" is being committed
        Self.send(mailbox, "second", into: answers)
        #expect(await Self.waitUntil(.seconds(5)) { answers.withLockedValue { $0.count } == 2 })
        // Answered by their deadlines, before the hung commit ends: "first" would otherwise
        // have been answered with its receipt (the commit succeeds, late).
        store.releaseFirst()
        await mailbox.drain()
        let result = answers.withLockedValue { $0 }
        #expect(result.map(\.0) == ["first", "second"])
        if case .refused(let reason)? = result.first?.1 {
            #expect(reason.contains("the outcome is unknown") && reason.contains("0.3 s"), "\(reason)")
        } else {
            Issue.record("the message in the hung commit was not refused at its deadline: \(result)")
        }
        if case .refused(let reason)? = result.last?.1 {
            #expect(reason.contains("nothing was stored"), "\(reason)")
        } else {
            Issue.record("the waiting message was not refused: \(result)")
        }
        // The hung commit's late success answers nobody twice.
        #expect(answers.withLockedValue { $0.count } == 2)
    }

    /// Polls `condition` until it holds or `within` passes.
    private static func waitUntil(_ within: Duration, _ condition: @Sendable () -> Bool) async -> Bool {
        await eventually(within: within, every: .milliseconds(5), condition)
    }

    @Test("M-1: a store that honours the deadline is given only what the oldest message of the commit has left")
    func commitBoundedByTheOldestMessage() async throws {
        let store = SlowStore(durations: [.seconds(5), .seconds(5)], honoursDue: true)
        let mailbox = Self.mailbox(store, deadline: .milliseconds(300))
        let answers = NIOLockedValueBox<[(String, Outcome)]>([])
        let started = ContinuousClock.now
        Self.send(mailbox, "first", into: answers)
        await mailbox.drain()
        // Answered (refused: the store gave up at the deadline), long before the store's 5 s.
        #expect(ContinuousClock.now - started < .milliseconds(4_500))   // the store's own 5 s would exceed it; room for a busy machine
        // The answer runs on the sender's loop, which may come to it just after the drain.
        #expect(await Self.waitUntil(.seconds(5)) { answers.withLockedValue { $0.count } == 1 })
    }
}
