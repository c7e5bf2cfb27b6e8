import Foundation
import RTMAuth
import RTMProtocol
import RTMServer
import RTMTestSupport
import NIOCore
import Testing
@testable import RTMClient

/// The gate end to end: what a session may do and learn, and what a change of its grants ends,
/// over real sockets with SDK clients (each item of the gate's rules, PROTOCOL.md §8.1).
@Suite(.realTime, .serialized)
struct GateTests {
    static let all = Set(Capabilities.ChannelOperation.allCases)
    static let allUsers = Set(Capabilities.UserOperation.allCases)

    static func capability(_ user: String, channels: [String: Set<Capabilities.ChannelOperation>] = [:],
                           users: [String: Set<Capabilities.UserOperation>] = [:], issuedAt: UInt32? = nil) -> String {
        CapabilityToken.mint(Capabilities(channels: channels, users: users), appId: Harness.appId, userId: user,
                             appCertificate: Harness.certificate, issuedAt: issuedAt ?? UInt32(Date().timeIntervalSince1970), expiresAt: nil)
    }

    static func code(_ body: () async throws -> Void) async -> RTMErrorCode? { await CapabilityTests.code(body) }

    static func watchEnded(_ kind: WatchEndedEvent.Kind) -> @Sendable (RTMEvent) -> Bool {
        { if case .watchEnded(let e) = $0 { e.kind == kind } else { false } }
    }

    @Test("PROTOCOL §8.1: a narrower renewToken ends every watch it no longer allows, each with its event: a subscription's presence, metadata and lock parts, a user's metadata, a user's status, a stream topic")
    func narrowingEndsEveryWatch() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["*": Self.all], users: ["*": Self.allUsers]))
        _ = try await alice.subscribe("room", options: SubscribeOptions(withMetadata: true, withLock: true))
        _ = try await alice.subscribeUserMetadata(userId: "bob")
        try await alice.subscribePeersOnlineStatus(["bob"])
        let stream = try alice.createStreamChannel("s")
        _ = try await stream.join()
        try await stream.joinTopic("t")
        let mark = await events.mark()
        try await alice.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["room": [.subscribe], "s": [.streamJoin]]))
        for kind in [WatchEndedEvent.Kind.presence, .metadata, .lock, .userMetadata, .peerStatus, .topic] {
            let ended = await events.first(since: mark, within: soon, where: Self.watchEnded(kind))
            guard case .watchEnded(let event)? = ended else {
                Issue.record("no watchEnded \(kind): \(await events.all.dropFirst(mark).map { "\($0)".prefix(80) })")
                continue
            }
            #expect(event.code == .notPermitted, "\(kind)")
        }
        // The subscription itself holds: room's messages still come, and bob's metadata
        // changes no longer do (bob's publish after his change arrives with no storage event
        // before it).
        let after = await events.mark()
        _ = try await bob.setUserMetadata(Metadata(items: [MetadataItem(key: "k", value: "v")]))
        _ = try await bob.publish(channel: "room", message: "still subscribed")
        let message = await events.first(since: after, within: soon) { $0.messageEvent != nil }
        #expect(message?.messageEvent?.channelName == "room")
        #expect(await events.all.dropFirst(after).contains { if case .storage = $0 { true } else { false } } == false)
        #expect(await alice.subscribedChannels == ["room"])
        await alice.logout()
        await bob.logout()
    }

    @Test("PROTOCOL §8.1: subscribeMetadata of another user with only a channel grant is refused; a STREAM join with withMetadata or withLock needs metadata.read or lock there")
    func userMetadataAndStreamParts() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port, login: false)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["a": [.subscribe], "s": [.streamJoin]]))
        #expect(await Self.code { _ = try await alice.subscribeUserMetadata(userId: "bob") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.subscribeUserMetadata(userId: "alice") } == nil)   // oneself
        let withMetadata = try alice.createStreamChannel("s")
        #expect(await Self.code { _ = try await withMetadata.join(JoinChannelOptions(withMetadata: true)) } == .notPermitted)
        let withLock = try alice.createStreamChannel("s")
        #expect(await Self.code { _ = try await withLock.join(JoinChannelOptions(withLock: true)) } == .notPermitted)
        let plain = try alice.createStreamChannel("s")
        #expect(await Self.code { _ = try await plain.join() } == nil)
        await plain.leave()
        await alice.logout()
    }

    @Test("PROTOCOL §8.1: a namespace made no-presence by a reload: the presence part of open subscriptions ends (watchEnded), and nobody is listed to later subscribers, members from before included")
    func noPresenceReload() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let (carol, _) = try await Harness.client("carol", port: harness.port)
        _ = try await bob.subscribe("quiet.a")
        #expect(try await alice.subscribe("quiet.a").contains("bob"))
        try await harness.server.reloadNamespaces([try ChannelNamespace(parsing: "quiet.*:no-presence")])
        let ended = await events.first(within: soon, where: Self.watchEnded(.presence))
        guard case .watchEnded(let event)? = ended else { Issue.record("no watchEnded presence"); return }
        #expect(event.channelName == "quiet.a")
        #expect(try await carol.subscribe("quiet.a").isEmpty)
        await alice.logout(); await bob.logout(); await carol.logout()
    }

    @Test("PROTOCOL §8.1: no going back: a renewToken or a STREAM join with a capability token issued before the session's current one is refused; a STREAM join without one takes the session's grants")
    func noGoingBack() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port, login: false)
        let now = UInt32(Date().timeIntervalSince1970)
        let wide = Self.capability("alice", channels: ["*": Self.all], issuedAt: now - 60)
        try await alice.login(token: Harness.token("alice"), capability: wide)
        try await alice.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["a": Self.all], issuedAt: now))
        #expect(await Self.code { try await alice.renewToken(Harness.token("alice"), capability: wide) } == .invalidToken)
        #expect(await Self.code { _ = try await alice.subscribe("b") } == .notPermitted)
        // A STREAM join with the old token, or with none, does not widen the session.
        let old = try alice.createStreamChannel("b")
        #expect(await Self.code { _ = try await old.join(JoinChannelOptions(capability: wide)) } == .invalidToken)
        let granted = try alice.createStreamChannel("a")
        let joined = await Self.code { _ = try await granted.join() }
        #expect(joined == nil, "\(String(describing: joined))")
        await granted.leave()
        // A join with no capability token at all (a raw client): the session's grants.
        let raw = try await RawPeer.connect(port: harness.port)
        var hello = ByteBuffer(string: RawPeer.upgradeRequest())
        hello.writeImmutableBuffer(RawPeer.text(#"{"type":"join","id":1,"appId":"\#(Harness.appId)","userId":"alice","token":"\#(Harness.token("alice"))","channel":"b"}"#))
        try await raw.write(hello)
        let reply = await firstValue(within: soon) { raw.frames().first { $0.text.contains(#""id":1"#) } }
        #expect(reply?.text.contains("-10104") == true, "\(reply?.text ?? "no reply")")
        await raw.close()
        await alice.logout()
    }

    /// The reply to request `id` among `peer`'s frames, once it came.
    static func reply(_ id: Int, on peer: RawPeer) async -> [String: Any]? {
        await firstValue(within: soon) {
            peer.frames().lazy.compactMap { frame in
                (try? JSONSerialization.jsonObject(with: Data(frame.text.utf8))) as? [String: Any]
            }.first { $0["id"] as? Int == id }
        }
    }

    @Test("PROTOCOL §8.1: no going back at a resume: a login resuming a narrowed session with the older, wider capability token (or with none) is refused; with the current one it resumes")
    func noGoingBackAtResume() async throws {
        let harness = try await Harness.start()
        let now = UInt32(Date().timeIntervalSince1970)
        let wide = Self.capability("alice", channels: ["*": Self.all], issuedAt: now - 60)
        let narrow = Self.capability("alice", channels: ["a": Self.all], issuedAt: now)
        func login(_ capability: String?, resumeToken: String? = nil) async throws -> (RawPeer, [String: Any]?) {
            let peer = try await RawPeer.connect(port: harness.port)
            var frame: [String: Any] = ["type": "login", "id": 1, "appId": Harness.appId, "userId": "alice", "token": Harness.token("alice"),
                                        "heartbeatInterval": 60, "presenceTimeout": 60]   // no pings needed meanwhile
            frame["capability"] = capability
            frame["resumeToken"] = resumeToken
            var hello = ByteBuffer(string: RawPeer.upgradeRequest())
            hello.writeImmutableBuffer(RawPeer.text(String(decoding: try JSONSerialization.data(withJSONObject: frame), as: UTF8.self)))
            try await peer.write(hello)
            return (peer, await Self.reply(1, on: peer))
        }
        let (first, loggedIn) = try await login(wide)
        let resumeToken = try #require(loggedIn?["resumeToken"] as? String)
        try await first.write(RawPeer.text(#"{"type":"renewToken","id":2,"token":"\#(Harness.token("alice"))","capability":"\#(narrow)"}"#))
        #expect(await Self.reply(2, on: first)?["type"] as? String == "ok")
        await first.close()
        for older in [wide, nil] {
            let (peer, refused) = try await login(older, resumeToken: resumeToken)
            #expect(refused?["code"] as? Int == RTMErrorCode.invalidToken.rawValue, "\(String(describing: refused))")
            await peer.close()
        }
        let (peer, resumed) = try await login(narrow, resumeToken: resumeToken)
        #expect(resumed?["resumed"] as? Bool == true, "\(String(describing: resumed))")
        await peer.close()
    }

    @Test("PROTOCOL §8.1: the admin API keeps a namespace's rules too: no history stored in a no-history channel (400, -15004), the publish itself allowed")
    func adminHistoryInNoHistoryNamespace() async throws {
        let admin = try await AdminHarness.start { $0.namespaces = [try! ChannelNamespace(parsing: "ephemeral.*:no-history")] }
        let refused = try await admin.call("POST", "/v1/publish", body: ["channel": "ephemeral.a", "message": "x", "storeInHistory": true])
        #expect(refused.status == 400 && refused.json["code"] as? Int == RTMErrorCode.historyOperationNotPermitted.rawValue, "\(refused)")
        #expect(try await admin.call("POST", "/v1/publish", body: ["channel": "ephemeral.a", "message": "x"]).status == 200)
        #expect(try await admin.call("POST", "/v1/publish", body: ["channel": "kept", "message": "x", "storeInHistory": true]).status == 200)
    }

    @Test("PROTOCOL §8.1: the default capability binds sessions without a capability token, on channels and users alike; reloaded narrower, it ends what it no longer allows")
    func defaultCapability() async throws {
        let lobby = Capabilities(channels: ["lobby": [.subscribe, .publish, .presence]], users: ["bob": [.send]])
        let harness = try await Harness.start { $0.defaultCapabilities = lobby }
        let (alice, events) = try await Harness.client("alice", port: harness.port)
        _ = try await alice.subscribe("lobby")
        #expect(await Self.code { _ = try await alice.subscribe("other") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.publish(toUser: "bob", message: "hi") } == nil)
        #expect(await Self.code { _ = try await alice.publish(toUser: "carol", message: "hi") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.setUserMetadata(userId: "bob", Metadata(items: [MetadataItem(key: "k", value: "v")])) } == .notPermitted)
        #expect(await Self.code { _ = try await alice.queryPeersOnlineStatus(["bob"]) } == .notPermitted)
        try await harness.server.reloadAccessRules(namespaces: [], defaultCapabilities: Capabilities(channels: ["other": [.subscribe]]))
        let ended = await events.first(within: soon) { if case .unsubscribed = $0 { true } else { false } }
        guard case .unsubscribed(let event)? = ended else { Issue.record("no unsubscribed event"); return }
        #expect(event.channelName == "lobby" && event.reason.contains("default capability"))
        await alice.logout()
    }

    @Test("PROTOCOL §8.1: subscribe alone does not show the members: the reply lists nobody and says withPresence false, and no presence events come")
    func subscribeWithoutPresence() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        _ = try await bob.subscribe("room")
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["room": [.subscribe]]))
        #expect(try await alice.subscribe("room").isEmpty)
        let mark = await events.mark()
        await bob.logout()
        let (carol, _) = try await Harness.client("carol", port: harness.port)
        _ = try await carol.subscribe("room")
        _ = try await carol.publish(channel: "room", message: "after carol joined")
        _ = await events.first(since: mark, within: soon) { $0.messageEvent != nil }
        let presence = await events.all.dropFirst(mark).compactMap(\.presenceEvent)
        // The SDK's own (empty) snapshot from the reply, and nothing from the server.
        #expect(presence.allSatisfy { $0.kind == .snapshot && $0.members.isEmpty }, "\(presence)")
        await alice.logout(); await carol.logout()
    }

    @Test("PROTOCOL §8.1: without status on the receiver: sendUser does not say whether it is online (JSON and binary), invite is refused; whereNow lists only channels with presence granted")
    func onlineStatusHidden() async throws {
        let harness = try await Harness.start { $0.namespaces = [try! ChannelNamespace(parsing: "private.*:private")] }
        let (alice, _) = try await Harness.client("alice", port: harness.port, login: false)
        let (bob, _) = try await Harness.client("bob", port: harness.port, login: false)
        try await bob.login(token: Harness.token("bob"), capability: Self.capability("bob", channels: ["*": Self.all]))
        _ = try await bob.subscribe("lobby")
        _ = try await bob.subscribe("private.ops")
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["lobby": [.presence]],
                                                                                           users: ["bob": [.send]]))
        let binary = try await alice.publish(toUser: "bob", message: "hi")
        #expect(!binary.receiverStatusKnown && binary.stored)
        let json = try await alice.publish(toUser: "bob", message: "hi", storeInHistory: true)
        #expect(!json.receiverStatusKnown)
        #expect(await Self.code { _ = try await alice.sendLocalInvitation(calleeId: "bob") } == .notPermitted)
        // whereNow needs status on bob; with it, only lobby (presence granted) is listed.
        try await alice.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["lobby": [.presence]],
                                                                                        users: ["bob": [.send, .status]]))
        #expect(try await alice.whereNow(userId: "bob") == ["lobby"])
        #expect(try await alice.publish(toUser: "bob", message: "hi").receiverStatusKnown)
        await alice.logout(); await bob.logout()
    }
}
