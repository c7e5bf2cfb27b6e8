import Foundation
import RTMAuth
import RTMProtocol
import Testing
@testable import RTMServer

/// The gate's decision as values, request by request: every case of `RequestKind` (adding one
/// without its rule does not compile; without the grants its rule names, it must be refused),
/// and the table PROTOCOL.md §8.1 prints.
struct RequestGateTests {
    static let channelOps = Set(Capabilities.ChannelOperation.allCases)
    static let userOps = Set(Capabilities.UserOperation.allCases)

    /// A session granted everything but `missing`.
    static func access(without missing: RequestRule.Need?) -> SessionAccess {
        var channels = channelOps, users = userOps
        switch missing {
        case .channel(let op, _)?, .eachChannel(let op)?, .streamChannel(let op)?: channels.remove(op)
        case .user(let op, _)?, .eachUser(let op)?: users.remove(op)
        case nil: break
        }
        return SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["*": channels], users: ["*": users]), namespaces: [])
    }

    /// A sample of `kind` naming channel `c`, user `bob`, in the form `condition` asks for.
    static func request(_ kind: RequestKind, _ condition: RequestRule.Condition?) -> ClientRequest {
        var frame = Frame(type: kind.frameType, id: 7, userId: "bob", channel: "c", users: ["bob"], channels: ["c"])
        frame.topic = "t"
        frame.withPresence = false
        switch condition {
        case .withMetadata?: frame.withMetadata = true
        case .withLock?: frame.withLock = true
        case .userStorage?: frame.storageType = "user"
        case .channelStorage?: frame.storageType = "channel"
        case .channelHistory?: frame.channelType = "message"
        case nil: break
        }
        return .json(kind, frame)
    }

    static func condition(of need: RequestRule.Need) -> RequestRule.Condition? {
        switch need {
        case .channel(_, let condition), .user(_, let condition): condition
        case .eachChannel, .eachUser, .streamChannel: nil
        }
    }

    @Test("PROTOCOL §8.1: every request: without each grant its rule names it is refused with -10104 naming the grant; with every grant it passes; a request needing none passes with no grant at all", arguments: RequestKind.allCases)
    func everyRequest(kind: RequestKind) {
        let rule = kind.rule
        for need in rule.needs {
            let request = Self.request(kind, Self.condition(of: need))
            let refusal = Self.access(without: need).refusal(for: request, streamChannel: "c")
            #expect(refusal?.code == .notPermitted, "\(kind) without \(need.words)")
            #expect(Self.access(without: nil).refusal(for: request, streamChannel: "c") == nil, "\(kind) with every grant")
        }
        if rule.needs.isEmpty {
            let nothing = SessionAccess(userId: "alice", capabilities: Capabilities(), namespaces: [])
            #expect(nothing.refusal(for: Self.request(kind, nil), streamChannel: "c") == nil, "\(kind) needs no grant")
        }
        // The binary forms decide as their JSON twins.
        let nothing = SessionAccess(userId: "alice", capabilities: Capabilities(), namespaces: [])
        switch kind {
        case .publish: #expect(nothing.refusal(for: .batchedPublish(channel: "c"))?.code == .notPermitted)
        case .sendUser: #expect(nothing.refusal(for: .binarySendUser(receiver: "bob"))?.code == .notPermitted)
        case .ackUser: #expect(nothing.refusal(for: .binaryAckUser) == nil)
        default: break
        }
    }

    @Test("PROTOCOL §8.1: PROTOCOL.md §8.1 prints the gate's table as it is: one row per request, generated from RequestKind.rule")
    func documentedTable() throws {
        let protocolFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../PROTOCOL.md").standardized
        let text = try String(contentsOf: protocolFile, encoding: .utf8)
        #expect(text.contains(RequestKind.ruleTable), "PROTOCOL.md §8.1's table differs from RequestKind.ruleTable; paste:\n\(RequestKind.ruleTable)")
    }

    @Test("PROTOCOL §8.1: item by item: user metadata watches need the user grant; a stream join's metadata and lock parts need theirs; whereNow and sendUser replies reveal only what status and presence allow")
    func revelations() {
        let subscribeOnly = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["a": [.subscribe]]), namespaces: [])
        // subscribeMetadata with a userId and no storageType: the user's grant decides.
        #expect(subscribeOnly.refusal(for: .json(.subscribeMetadata, Frame(type: .subscribeMetadata, userId: "bob")))?.code == .notPermitted)
        // A STREAM join with withMetadata / withLock and only stream.join.
        let streamOnly = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["s": [.streamJoin]]), namespaces: [])
        var join = Frame(type: .join, channel: "s")
        #expect(streamOnly.refusal(for: .json(.join, join)) == nil)
        join.withMetadata = true
        #expect(streamOnly.refusal(for: .json(.join, join))?.reason.contains("metadata.read") == true)
        join.withMetadata = nil
        join.withLock = true
        #expect(streamOnly.refusal(for: .json(.join, join))?.reason.contains("lock") == true)
        // Online status and channel membership.
        let sender = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["open": [.presence]], users: ["*": [.send]]), namespaces: [])
        #expect(!sender.reveals(.online("bob")) && sender.reveals(.membership(channel: "open")) && !sender.reveals(.membership(channel: "closed")))
        #expect(sender.reveals(.online("alice")))   // oneself
        // invite needs status too: its answer says whether the invitee is online.
        let inviter = SessionAccess(userId: "alice", capabilities: Capabilities(users: ["*": [.invite]]), namespaces: [])
        #expect(inviter.refusal(for: .json(.invite, Frame(type: .invite, userId: "bob")))?.reason.contains("status") == true)
        // A private namespace's channels are not listed to a session without a grant there.
        let open = SessionAccess(userId: "alice", capabilities: nil, namespaces: [try! ChannelNamespace(parsing: "private.*:private")])
        #expect(!open.reveals(.membership(channel: "private.a")) && open.reveals(.membership(channel: "lobby")))
    }

    @Test("PROTOCOL §8.1: every watch kind is decided again with the decision of the request that started it")
    func watches() {
        let narrow = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["a": [.subscribe]]), namespaces: [])
        #expect(narrow.refusal(toKeep: .subscription(channel: "a", features: [])) == nil)
        #expect(narrow.refusal(toKeep: .subscription(channel: "b", features: [])) != nil)
        #expect(narrow.refusal(toKeep: .subscription(channel: "a", features: .presence)) != nil)
        #expect(narrow.refusal(toKeep: .subscription(channel: "a", features: .metadata)) != nil)
        #expect(narrow.refusal(toKeep: .subscription(channel: "a", features: .lock)) != nil)
        #expect(narrow.refusal(toKeep: .userMetadata("bob")) != nil && narrow.refusal(toKeep: .userMetadata("alice")) == nil)
        #expect(narrow.refusal(toKeep: .peerStatus("bob")) != nil)
        #expect(narrow.refusal(toKeep: .stream(channel: "s", features: [])) != nil)
        #expect(narrow.refusal(toKeep: .topic(streamChannel: "s", topic: "t")) != nil)
        let wide = RequestGateTests.access(without: nil)
        for watch: SessionAccess.Watch in [.subscription(channel: "a", features: [.presence, .metadata, .lock]), .userMetadata("bob"),
                                           .peerStatus("bob"), .stream(channel: "s", features: [.metadata, .lock]), .topic(streamChannel: "s", topic: "t")] {
            #expect(wide.refusal(toKeep: watch) == nil, "\(watch)")
        }
    }
}
