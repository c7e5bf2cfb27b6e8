import Foundation
import NIOCore
import RTMAuth
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMServer

/// Every request through the real gate of a connection (an `EmbeddedChannel`, no socket): a
/// session without the grants a request's rule names is refused with -10104 and the request's id,
/// and nothing of it reaches a fully privileged observer watching everything it could touch.
struct GateEmbeddedTests {
    /// A capability token granting `capabilities` (the embedded app has no certificate: the
    /// grants apply unsigned).
    static func capability(_ user: String, _ capabilities: Capabilities) -> String {
        CapabilityToken.mint(capabilities, appId: "app", userId: user, appCertificate: "unused", issuedAt: 1, expiresAt: nil)
    }

    static func json(_ object: [String: Any]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    static func login(_ connection: EmbeddedConnection, _ user: String, capability: String? = nil) async throws {
        var frame: [String: Any] = ["type": "login", "id": 1, "appId": "app", "userId": user, "token": "t"]
        frame["capability"] = capability
        try await connection.send(json(frame))
        let reply = try await connection.receivedJSON()
        guard reply.first?["type"] as? String == "ok" else { throw EmbeddedConnectionError("login refused: \(reply)") }
    }

    /// The request of `kind` in the form `condition` asks for, naming channel `c` and user `bob`.
    static func request(_ kind: RequestKind, id: Int, _ condition: RequestRule.Condition?) -> [String: Any] {
        var frame: [String: Any] = ["type": kind.rawValue, "id": id, "channel": "c", "userId": "bob", "users": ["bob"], "channels": ["c"],
                                    "text": "x", "topic": "t", "lockName": "l", "metadata": ["majorRevision": -1, "items": [["key": "k", "value": "v", "revision": -1]]]]
        switch condition {
        case .withMetadata?: frame["withMetadata"] = true
        case .withLock?: frame["withLock"] = true
        case .userStorage?: frame["storageType"] = "user"
        case .channelStorage?: frame["storageType"] = "channel"
        case .channelHistory?: frame["channelType"] = "message"
        case nil: break
        }
        return frame
    }

    @Test("PROTOCOL §8.1: every request a MESSAGE or STREAM connection can send, without each grant its rule names: refused with -10104 and its id, nothing observable by a privileged session")
    func everyRequestThroughTheGate() async throws {
        let server = try EmbeddedServer()
        // bob may do everything and watches all a request could touch: channel c with every
        // part, his own metadata, the status of the sessions (mallory's included).
        let bob = try await server.connect()
        try await Self.login(bob, "bob")
        try await bob.send(Self.json(["type": "subscribe", "id": 2, "channel": "c", "withMetadata": true, "withLock": true]))
        try await bob.send(Self.json(["type": "subscribeMetadata", "id": 3, "userId": "bob"]))
        try await bob.send(Self.json(["type": "subscribePeersOnlineStatus", "id": 4, "users": ["mallory"]]))
        // Every reply and snapshot in before the checks (metadata and locks are read off the
        // loop): the three replies, c's lock and metadata snapshots, bob's metadata snapshot.
        var pending: Set<String> = ["id 2", "id 3", "id 4", "lock c", "storage c", "storage bob"]
        // A deadline, not a wait: it ends as soon as they are in (milliseconds when quiet); the
        // snapshots are read on the storage queue, which a loaded machine (a parallel run beside
        // other builds) has kept busy past 10 s.
        #expect(await eventually(within: .seconds(60)) {
            for frame in (try? await bob.receivedJSON()) ?? [] {
                if let id = frame["id"] as? Int { pending.remove("id \(id)") }
                if let type = frame["type"] as? String, let subject = (frame["channel"] ?? frame["userId"]) as? String {
                    pending.remove("\(type) \(subject)")
                }
            }
            return pending.isEmpty
        }, "still waiting for \(pending)")
        // mallory has a capability token granting nothing; her STREAM connection may join s only.
        let mallory = try await server.connect()
        try await Self.login(mallory, "mallory", capability: Self.capability("mallory", Capabilities()))
        _ = try await bob.received()   // mallory online
        let stream = try await server.connect()
        try await stream.send(Self.json(["type": "join", "id": 1, "appId": "app", "userId": "mallory", "token": "t", "channel": "s",
                                   "capability": Self.capability("mallory", Capabilities(channels: ["s": [.streamJoin]]))]))
        #expect(try await stream.receivedJSON().first?["type"] as? String == "ok")
        var id = 10
        for kind in RequestKind.allCases {
            for need in kind.rule.needs {
                id += 1
                let condition: RequestRule.Condition? = switch need {
                case .channel(_, let condition), .user(_, let condition): condition
                default: nil
                }
                var frame = Self.request(kind, id: id, condition)
                let connection: EmbeddedConnection
                switch kind {
                case .join:
                    connection = try await server.connect()
                    frame.merge(["appId": "app", "userId": "mallory", "token": "t", "capability": Self.capability("mallory", Capabilities())]) { $1 }
                case .joinTopic, .publishTopic:
                    connection = stream
                case .subscribeTopic:
                    continue   // its only grant is the join's own (stream.join): decided by the join
                default:
                    connection = mallory
                }
                try await connection.send(Self.json(frame))
                let reply = try await connection.receivedJSON()
                #expect(reply.count == 1 && reply.first?["type"] as? String == "error", "\(kind) (\(need.words)): \(reply)")
                #expect(reply.first?["id"] as? Int == id, "\(kind)")
                #expect(reply.first?["code"] as? Int == RTMErrorCode.notPermitted.rawValue, "\(kind) (\(need.words)): \(reply)")
                let seen = try await bob.received()
                #expect(seen.isEmpty, "\(kind) (\(need.words)) reached bob: \(seen.map(\.text))")
            }
        }
        // The binary forms: a publish (0x01) and a sendUser (0x03).
        var publish = ByteBuffer()
        BinaryFrame.writePublish(into: &publish, requestID: 900, msgId: nil, channel: "c", customType: nil, isText: true, payload: Array("x".utf8))
        var sendUser = ByteBuffer()
        BinaryFrame.writeSendUser(into: &sendUser, requestID: 901, msgId: nil, receiver: "bob", customType: nil, isText: true, payload: Array("x".utf8))
        var frames = RawPeer.frame(opcode: 0x2, publish.readableBytesView)
        frames.writeImmutableBuffer(RawPeer.frame(opcode: 0x2, sendUser.readableBytesView))
        try await mallory.send(bytes: frames)
        let refusals = try await mallory.receivedJSON()
        #expect(refusals.compactMap { $0["id"] as? Int }.sorted() == [900, 901], "\(refusals)")
        #expect(refusals.allSatisfy { $0["code"] as? Int == RTMErrorCode.notPermitted.rawValue })
        #expect(try await bob.received().isEmpty)
    }
}
