import Foundation
import RTMServer
import Testing

/// The embedded user-message store on its own (a real SQLite file): resends (SPEC M-3) are
/// recognised in one batch, in later commits and after the store is opened again.
struct SQLiteUserMessageStoreTests {
    private func message(_ text: String, clientMsgId: UInt64?, ts: Int64 = UserMailboxClock.now) -> StoredUserMessage {
        StoredUserMessage(appId: "app", receiver: "bob", sender: "alice", text: text, data: nil, customType: nil, ts: ts, clientMsgId: clientMsgId)
    }

    @Test("M-3: a resend (same sender, same msgId) is stored once, in one batch, in a later commit and after a reopen; outside the window it is new")
    func resendsStoredOnce() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rtm.sqlite").path
        let since = UserMailboxClock.now - 60_000
        do {
            let store = try SQLiteUserMessageStore(path: path)
            let first = try store.commit([message("a", clientMsgId: 7), message("a", clientMsgId: 7), message("b", clientMsgId: nil)],
                                         acknowledgements: [], cap: 100, resendsSince: since)
            // (A resend's row is stored, then taken out again: its id is skipped.)
            #expect(first == [CommittedUserMessage(id: 1), CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 3)])
            // Another sender may use the same id.
            var other = message("c", clientMsgId: 7)
            other.sender = "carol"
            let second = try store.commit([message("a", clientMsgId: 7), other], acknowledgements: [], cap: 100, resendsSince: since)
            #expect(second == [CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 5)])
        }
        // Opened again (a restart): the record survived with the messages.
        let store = try SQLiteUserMessageStore(path: path)
        let again = try store.commit([message("a", clientMsgId: 7), message("d", clientMsgId: 8)], acknowledgements: [], cap: 100, resendsSince: since)
        #expect(again == [CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 7)])
        #expect(try store.pending(appId: "app", receiver: "bob", notBefore: 0).compactMap(\.text) == ["a", "b", "c", "d"])
        // Past the window (its start after the first attempt) the id is new again.
        let late = try store.commit([message("a", clientMsgId: 7)], acknowledgements: [], cap: 100, resendsSince: UserMailboxClock.now + 1)
        #expect(late == [CommittedUserMessage(id: 8)])
    }
}

/// Wall-clock milliseconds, as the mailbox stamps messages.
enum UserMailboxClock {
    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
