import Testing

/// What the channel-log contract needs of an implementation: the single node's in-memory log
/// (the hub's numbering, resend memory and replay buffer) or a cluster's PostgreSQL log.
public struct ChannelLogSubject: Sendable {
    /// One message to append: its client message id (SPEC M-3) and text.
    public struct Message: Sendable {
        public let msgId: UInt64?
        public let text: String

        public init(_ text: String, msgId: UInt64? = nil) {
            self.text = text
            self.msgId = msgId
        }
    }

    /// Where an appended message landed.
    public struct Numbered: Sendable, Equatable, CustomStringConvertible {
        public let seq: UInt64
        public let epoch: String

        public init(seq: UInt64, epoch: String) {
            self.seq = seq
            self.epoch = epoch
        }

        public var description: String { "\(epoch)/\(seq)" }
    }

    /// A message the log keeps.
    public struct Kept: Sendable, Equatable, CustomStringConvertible {
        public let seq: UInt64
        public let publisher: String
        public let text: String

        public init(seq: UInt64, publisher: String, text: String) {
            self.seq = seq
            self.publisher = publisher
            self.text = text
        }

        public var description: String { "\(seq):\(publisher):\(text)" }
    }

    /// Appends one publisher's run to a channel (one read, or one commit); returns each
    /// message's number and epoch, in order.
    public let append: @Sendable (_ channel: String, _ publisher: String, _ messages: [Message]) async throws -> [Numbered]
    /// The messages kept after `seq` (in the channel's current epoch), oldest first.
    public let after: @Sendable (_ channel: String, _ seq: UInt64) async throws -> [Kept]

    public init(append: @escaping @Sendable (_ channel: String, _ publisher: String, _ messages: [Message]) async throws -> [Numbered],
                after: @escaping @Sendable (_ channel: String, _ seq: UInt64) async throws -> [Kept]) {
        self.append = append
        self.after = after
    }
}

/// The channel log's contract (SPEC M-2, M-3): numbering, resend recognition and reading from
/// a position, the same on one node (in memory) and in a cluster (PostgreSQL).
public enum ChannelLogContract {
    public static let cases: [ContractCase<ChannelLogSubject>] = [
        ContractCase("M-2: a channel's numbers are dense from 1 in one epoch, across publishers and runs; another channel numbers on its own") { log in
            let first = try await log.append("room", "alice", [.init("a"), .init("b")])
            let second = try await log.append("room", "bob", [.init("c")])
            let other = try await log.append("hall", "alice", [.init("x")])
            #expect((first + second).map(\.seq) == [1, 2, 3])
            #expect(Set((first + second).map(\.epoch)).count == 1)
            #expect(other.map(\.seq) == [1])
        },
        ContractCase("M-3: a resend (the publisher's msgId again, in a later run) gets its first number and epoch and is kept once") { log in
            let first = try await log.append("room", "alice", [.init("a", msgId: 10), .init("b", msgId: 11)])
            let again = try await log.append("room", "alice", [.init("b", msgId: 11), .init("c", msgId: 12)])
            #expect(again.first == first.last)
            #expect(again.last?.seq == 3)
            #expect(try await log.after("room", 0).map(\.text) == ["a", "b", "c"])
        },
        ContractCase("M-3: another publisher's message with the same msgId is another message") { log in
            let alice = try await log.append("room", "alice", [.init("a", msgId: 5)])
            let bob = try await log.append("room", "bob", [.init("b", msgId: 5)])
            #expect(alice.map(\.seq) == [1] && bob.map(\.seq) == [2])
            #expect(try await log.after("room", 0) == [.init(seq: 1, publisher: "alice", text: "a"), .init(seq: 2, publisher: "bob", text: "b")])
        },
        ContractCase("M-2: reading from a position gives the messages numbered after it, in order, with publisher and text; none after the last") { log in
            _ = try await log.append("room", "alice", [.init("a"), .init("b")])
            _ = try await log.append("room", "bob", [.init("c")])
            #expect(try await log.after("room", 1) == [.init(seq: 2, publisher: "alice", text: "b"), .init(seq: 3, publisher: "bob", text: "c")])
            #expect(try await log.after("room", 3).isEmpty)
            #expect(try await log.after("empty", 0).isEmpty)
        },
        ContractCase("M-3: the same msgId twice in one run gets one number, and is kept once") { log in
            let numbered = try await log.append("room", "alice", [.init("a", msgId: 7), .init("a", msgId: 7), .init("b", msgId: 8)])
            #expect(numbered[0] == numbered[1])
            #expect(try await log.after("room", 0).filter { $0.text == "a" }.count == 1)
        },
    ]
}
