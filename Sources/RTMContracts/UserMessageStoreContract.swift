import Foundation
import RTMServer
import Testing

/// A user-message store under test (`UserMessageStore`, SPEC M-1 / M-3): the store and an
/// application no other case uses.
public struct UserMessageStoreSubject: Sendable {
    public let store: any UserMessageStore
    /// The application the case works in (stores shared by several cases keep them apart by it).
    public let appId: String

    /// A subject over `store`.
    public init(store: any UserMessageStore, appId: String) {
        self.store = store
        self.appId = appId
    }

    func message(to receiver: String, from sender: String = "alice", _ text: String? = "hi", data: Data? = nil,
                 ts: Int64 = 1_000, clientMsgId: UInt64? = nil) -> StoredUserMessage {
        StoredUserMessage(appId: appId, receiver: receiver, sender: sender, text: text, data: data, customType: text == nil ? "bin" : nil,
                          ts: ts, clientMsgId: clientMsgId)
    }

    func commit(_ messages: [StoredUserMessage], acks: [(receiver: String, upTo: Int64)] = [], cap: Int = 100,
                resendsSince: Int64 = 0) async throws -> [CommittedUserMessage] {
        let store = store, app = appId
        let acknowledgements = acks.map { (appId: app, receiver: $0.receiver, upTo: $0.upTo) }
        return try await blocking { try store.commit(messages, acknowledgements: acknowledgements, cap: cap, resendsSince: resendsSince) }
    }

    func pending(_ receiver: String, notBefore: Int64 = 0) async throws -> [StoredUserMessage] {
        let store = store, app = appId
        return try await blocking { try store.pending(appId: app, receiver: receiver, notBefore: notBefore) }
    }

    func takeDropped(_ receiver: String) async throws -> Int {
        let store = store, app = appId
        return try await blocking { try store.takeDropped(appId: app, receiver: receiver) }
    }
}

/// The stores' known difference on NUL characters in text (user messages and history).
let nulText = "text with a NUL character: the embedded stores keep it only up to the NUL; PostgreSQL refuses it (a text column cannot hold one), which fails the whole commit or append. The server never hands a store such a text (the protocol refuses it: Limits.storedTextProblem); a store called directly still differs"

/// The rules every `UserMessageStore` keeps (SPEC M-1, M-3), the single node's
/// (`SQLiteUserMessageStore`) and a cluster's (`PostgresUserMessageStore`) alike; `sharedCases`
/// adds what a store shared by several nodes promises on top (a store whose `newest` answers: PostgreSQL).
public enum UserMessageStoreContract {
    /// Every rule of `UserMessageStore`.
    public static let cases: [ContractCase<UserMessageStoreSubject>] = [
        .init("M-1: a commit stores every message; pending reads them back oldest first with every field; ids increase per receiver") { s async throws in
            #expect(!s.store.epoch.isEmpty)
            #expect(try await s.commit([]).isEmpty)
            let first = try await s.commit([s.message(to: "bob", "1"), s.message(to: "carol", "c1"), s.message(to: "bob", nil, data: Data([0, 1, 255]), ts: 2_000)])
            let second = try await s.commit([s.message(to: "bob", "3", ts: 3_000)])
            #expect(first.allSatisfy { !$0.isResend } && second.allSatisfy { !$0.isResend })
            let bob = try await s.pending("bob")
            #expect(bob.map(\.id) == [first[0].id, first[2].id, second[0].id])
            #expect(first[0].id < first[2].id && first[2].id < second[0].id)
            #expect(bob.map(\.text) == ["1", nil, "3"] && bob.map(\.data) == [nil, Data([0, 1, 255]), nil])
            #expect(bob.map(\.customType) == [nil, "bin", nil] && bob.map(\.ts) == [1_000, 2_000, 3_000])
            #expect(bob.allSatisfy { $0.appId == s.appId && $0.receiver == "bob" && $0.sender == "alice" })
            #expect(try await s.pending("carol").map(\.text) == ["c1"])
            #expect(try await s.pending("nobody").isEmpty)
        },
        .init("M-1: payloads are stored exactly: any Unicode text, empty text and empty data apart from none") { s async throws in
            let texts: [String?] = ["", "é 中文 🎉 \"quoted\"\n\\\t", nil, nil]
            let datas: [Data?] = [nil, nil, Data(), Data([0, 0xFF, 0])]
            _ = try await s.commit(zip(texts, datas).map { s.message(to: "bob", $0, data: $1) })
            let read = try await s.pending("bob")
            #expect(read.map(\.text) == texts)
            #expect(read.map(\.data) == datas)
        },
        .init("M-1: a text with a NUL character is stored whole", knownDifference: nulText) { s async throws in
            _ = try await s.commit([s.message(to: "bob", "zero\u{0}byte"), s.message(to: "bob", "next")])
            #expect(try await s.pending("bob").map(\.text) == ["zero\u{0}byte", "next"])
        },
        .init("M-1: an acknowledgement deletes the receiver's messages up to its id, nobody else's; ids are never reused") { s async throws in
            let ids = try await s.commit([s.message(to: "bob", "1"), s.message(to: "bob", "2"), s.message(to: "carol", "c")]).map(\.id)
            let later = try await s.commit([s.message(to: "bob", "3")], acks: [(receiver: "bob", upTo: ids[0])]).map(\.id)
            #expect(try await s.pending("bob").map(\.text) == ["2", "3"])
            #expect(try await s.pending("carol").map(\.text) == ["c"])
            _ = try await s.commit([], acks: [(receiver: "bob", upTo: later[0])])
            #expect(try await s.pending("bob").isEmpty)
            let next = try await s.commit([s.message(to: "bob", "4")]).map(\.id)
            #expect(next[0] > later[0] && later[0] > ids[1])
            // A commit applies its acknowledgements before it stores its messages.
            _ = try await s.commit([s.message(to: "bob", "5")], acks: [(receiver: "bob", upTo: .max)])
            #expect(try await s.pending("bob").map(\.text) == ["5"])
        },
        .init("M-1: the cap keeps a receiver's newest messages; the dropped are counted and reported once") { s async throws in
            _ = try await s.commit((1...3).map { s.message(to: "bob", "m\($0)") }, cap: 5)
            _ = try await s.commit((4...7).map { s.message(to: "bob", "m\($0)") } + [s.message(to: "carol", "c")], cap: 5)
            #expect(try await s.pending("bob").map(\.text) == ["m3", "m4", "m5", "m6", "m7"])
            #expect(try await s.takeDropped("bob") == 2)
            #expect(try await s.takeDropped("bob") == 0)
            #expect(try await s.takeDropped("carol") == 0)
        },
        .init("M-1: an acknowledgement makes room under the cap: nothing is dropped while the receiver keeps up") { s async throws in
            let ids = try await s.commit((1...5).map { s.message(to: "bob", "m\($0)") }, cap: 5).map(\.id)
            _ = try await s.commit((6...7).map { s.message(to: "bob", "m\($0)") }, acks: [(receiver: "bob", upTo: ids[1])], cap: 5)
            #expect(try await s.pending("bob").map(\.text) == ["m3", "m4", "m5", "m6", "m7"])
            #expect(try await s.takeDropped("bob") == 0)
        },
        .init("M-1: pending drops the messages older than the age limit, counted with the dropped") { s async throws in
            _ = try await s.commit([s.message(to: "bob", "old", ts: 10), s.message(to: "bob", "old too", ts: 20), s.message(to: "bob", "new", ts: 5_000)])
            #expect(try await s.pending("bob", notBefore: 1_000).map(\.text) == ["new"])
            #expect(try await s.pending("bob", notBefore: 1_000).map(\.text) == ["new"])
            #expect(try await s.takeDropped("bob") == 2)
        },
        .init("M-3: a resend (same sender and msgId) within the window is not stored again and gets the first id, in a later commit or in one batch") { s async throws in
            let first = try await s.commit([s.message(to: "bob", "a", clientMsgId: 7)])
            let again = try await s.commit([s.message(to: "bob", "a", clientMsgId: 7), s.message(to: "bob", "b", clientMsgId: 8),
                                            s.message(to: "bob", "b", clientMsgId: 8)])
            #expect(again[0] == CommittedUserMessage(id: first[0].id, isResend: true))
            #expect(!again[1].isResend && again[2].isResend && again[2].id == again[1].id)
            #expect(try await s.pending("bob").map(\.text) == ["a", "b"])
        },
        .init("M-3: the same msgId from another sender, or another msgId from the same sender, is a new message") { s async throws in
            let first = try await s.commit([s.message(to: "bob", "a", clientMsgId: 7)])
            let others = try await s.commit([s.message(to: "bob", from: "dave", "d", clientMsgId: 7), s.message(to: "bob", "a2", clientMsgId: 9)])
            #expect(others.allSatisfy { !$0.isResend } && Set(others.map(\.id) + first.map(\.id)).count == 3)
            #expect(try await s.pending("bob").count == 3)
        },
        .init("M-3: a resend of a message already acknowledged is still recognised (not delivered twice)") { s async throws in
            let first = try await s.commit([s.message(to: "bob", "a", clientMsgId: 7)])
            _ = try await s.commit([], acks: [(receiver: "bob", upTo: first[0].id)])
            let again = try await s.commit([s.message(to: "bob", "a", clientMsgId: 7)])
            #expect(again == [CommittedUserMessage(id: first[0].id, isResend: true)])
            #expect(try await s.pending("bob").isEmpty)
        },
        .init("M-3: a msgId used before the resend window began is new again") { s async throws in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let first = try await s.commit([s.message(to: "bob", "a", ts: now, clientMsgId: 7)], resendsSince: now - 60_000)
            let later = try await s.commit([s.message(to: "bob", "a", ts: now + 1, clientMsgId: 7)], resendsSince: now + 3_600_000)
            #expect(!later[0].isResend && later[0].id > first[0].id)
            #expect(try await s.pending("bob").count == 2)
        },
        .init("M-3: the resend window counts from when a message was stored, not from its timestamp") { s async throws in
            // A message whose timestamp is older than the window (accepted long before, or by a
            // node whose clock is behind) but stored now: its resend is still recognised.
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let first = try await s.commit([s.message(to: "bob", "a", ts: now - 120_000, clientMsgId: 7)], resendsSince: now - 60_000)
            let again = try await s.commit([s.message(to: "bob", "a", ts: now - 120_000, clientMsgId: 7)], resendsSince: now - 60_000)
            #expect(again == [CommittedUserMessage(id: first[0].id, isResend: true)])
            #expect(try await s.pending("bob").count == 1)
        },
    ]

    /// What a store shared by several nodes adds (a store whose `newest` answers: PostgreSQL): ids dense per
    /// receiver, and the newest id of each.
    public static let sharedCases: [ContractCase<UserMessageStoreSubject>] = [
        .init("M-1 (shared store): ids are dense per receiver, whatever other receivers get; newest reports the highest given") { s async throws in
            let shared = s.store
            let first = try await s.commit([s.message(to: "bob", "1"), s.message(to: "carol", "c1"), s.message(to: "bob", "2")])
            let second = try await s.commit([s.message(to: "bob", "3")], acks: [(receiver: "bob", upTo: first[2].id)])
            #expect([first[0].id, first[2].id, second[0].id] == [first[0].id, first[0].id + 1, first[0].id + 2])
            let app = s.appId
            let newest = try await blocking {
                try shared.newest([UserMessageReceiver(appId: app, userId: "bob"), UserMessageReceiver(appId: app, userId: "nobody")])
            }
            #expect(newest == [UserMessageReceiver(appId: app, userId: "bob"): second[0].id])
        },
    ]
}
