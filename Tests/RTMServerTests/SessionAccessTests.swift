import RTMAuth
import RTMProtocol
import Testing
@testable import RTMServer

extension SessionAccess {
    /// The decision on a JSON request.
    func refusal(for frame: Frame, streamChannel: String? = nil) -> RequestRefusal? {
        refusal(for: .json(RequestKind(frame.type)!, frame), streamChannel: streamChannel)
    }
}

/// Access decisions as values: which request touches which channel or user, and what a
/// capability token or a private channel pattern allows.
struct SessionAccessTests {
    static let roomOnly = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["room.*": Set(Capabilities.ChannelOperation.allCases)]),
                                        namespaces: [])

    static func frame(_ type: FrameType, channel: String? = nil, user: String? = nil, _ body: (inout Frame) -> Void = { _ in }) -> Frame {
        Frame(type: type, id: 1, userId: user, channel: channel).with(body)
    }

    @Test("a token limited to room.*: every channel operation allowed on room.a and refused on secret (-10104, naming it)")
    func channelOperations() {
        let requests: [Frame] = [
            Self.frame(.subscribe), Self.frame(.publish), Self.frame(.setState), Self.frame(.removeState), Self.frame(.getState),
            Self.frame(.whoNow), Self.frame(.getMessages), Self.frame(.setMetadata), Self.frame(.updateMetadata),
            Self.frame(.removeMetadata), Self.frame(.replaceMetadata), Self.frame(.getMetadata),
            Self.frame(.setLock), Self.frame(.acquireLock), Self.frame(.releaseLock), Self.frame(.revokeLock),
            Self.frame(.removeLock), Self.frame(.getLocks), Self.frame(.join), Self.frame(.joinTopic), Self.frame(.publishTopic),
        ]
        for request in requests {
            var allowed = request, refused = request
            allowed.channel = "room.a"
            refused.channel = "secret"
            #expect(Self.roomOnly.refusal(for: allowed) == nil, "\(request.type)")
            let refusal = Self.roomOnly.refusal(for: refused)
            #expect(refusal?.code == .notPermitted, "\(request.type)")
            #expect(refusal?.reason.contains("'secret'") == true, "\(request.type)")
        }
        #expect(Self.roomOnly.refusal(for: Self.frame(.getChannelMemberCount) { $0.channels = ["room.a", "secret"] })?.code == .notPermitted)
        #expect(Self.roomOnly.refusal(for: Self.frame(.getChannelMemberCount) { $0.channels = ["room.a", "room.b"] }) == nil)
        // A topic request names no channel: the STREAM connection's own is checked.
        #expect(Self.roomOnly.refusal(for: Self.frame(.publishTopic), streamChannel: "secret")?.code == .notPermitted)
        #expect(Self.roomOnly.refusal(for: Self.frame(.publishTopic), streamChannel: "room.a") == nil)
    }

    @Test("each grant is its own: subscribe alone does not give publish nor show the members (presence); withMetadata needs metadata.read, withLock lock")
    func grantsAreSeparate() {
        let access = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["room.*": [.subscribe]]), namespaces: [])
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "room.a")) == nil)
        #expect(!access.reveals(.membership(channel: "room.a")))
        #expect(access.refusal(toKeep: .subscription(channel: "room.a", features: .presence))?.reason.contains("does not grant presence") == true)
        #expect(access.refusal(toKeep: .subscription(channel: "room.a", features: [])) == nil)
        #expect(access.refusal(for: Self.frame(.publish, channel: "room.a"))?.reason.contains("publish") == true)
        #expect(access.refusal(for: .batchedPublish(channel: "room.a")) != nil)
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "room.a") { $0.withPresence = false; $0.withMetadata = true })?.reason.contains("metadata.read") == true)
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "room.a") { $0.withPresence = false; $0.withLock = true })?.reason.contains("lock") == true)
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "other") { $0.withPresence = false }) != nil)
    }

    @Test("users: send, status, invite and user metadata need a user grant; oneself is always allowed")
    func userOperations() {
        let access = SessionAccess(userId: "alice", capabilities: Capabilities(users: ["bob": [.send]]), namespaces: [])
        #expect(access.refusal(for: Self.frame(.sendUser, user: "bob")) == nil)
        #expect(access.refusal(for: .binarySendUser(receiver: "bob")) == nil)
        #expect(access.refusal(for: .binarySendUser(receiver: "carol"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.sendUser, user: "carol"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.whereNow, user: "bob"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.invite, user: "bob"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.queryPeersOnlineStatus) { $0.users = ["bob"] })?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.getMetadata, user: "bob") { $0.storageType = "user" })?.code == .notPermitted)
        // subscribeMetadata is always a user's (no storageType needed).
        #expect(access.refusal(for: Self.frame(.subscribeMetadata, user: "bob"))?.code == .notPermitted)
        // Oneself: its own metadata, where it is, messages to itself.
        #expect(access.refusal(for: Self.frame(.setMetadata, user: "alice") { $0.storageType = "user" }) == nil)
        #expect(access.refusal(for: Self.frame(.setMetadata) { $0.storageType = "user" }) == nil)
        #expect(access.refusal(for: Self.frame(.whereNow, user: "alice")) == nil)
        // A user conversation's history is the session's own; answering one's invitations too.
        #expect(access.refusal(for: Self.frame(.getMessages, channel: "carol") { $0.channelType = "user" }) == nil)
        #expect(access.refusal(for: Self.frame(.acceptInvitation) { $0.invitationId = "x" }) == nil)
        // Requests that touch nothing else.
        for type in [FrameType.ping, .logout, .unsubscribe, .ackUser, .renewToken, .unsubscribePeersOnlineStatus, .leave] {
            #expect(access.refusal(for: Self.frame(type, channel: "secret", user: "carol")) == nil, "\(type)")
        }
    }

    static func namespaces(_ texts: String...) -> [ChannelNamespace] {
        texts.map { try! ChannelNamespace(parsing: $0) }
    }

    @Test("no capability token: everything allowed but the private namespaces, which need a grant")
    func privateNamespaces() {
        let open = SessionAccess(userId: "alice", capabilities: nil, namespaces: [])
        #expect(open.isUnrestricted)
        #expect(open.refusal(for: Self.frame(.subscribe, channel: "anything")) == nil)
        let guarded = SessionAccess(userId: "alice", capabilities: nil, namespaces: Self.namespaces("private.*:private", "admins:private"))
        #expect(!guarded.isUnrestricted)
        #expect(guarded.refusal(for: Self.frame(.subscribe, channel: "public.a")) == nil)
        #expect(guarded.refusal(for: Self.frame(.subscribe, channel: "private.a"))?.reason.contains("is private (namespace 'private.*')") == true)
        #expect(guarded.refusal(for: Self.frame(.getLocks, channel: "admins"))?.code == .notPermitted)
        #expect(guarded.refusal(for: Self.frame(.sendUser, user: "bob")) == nil)
        // A token granting the private channel opens it; what it does not grant stays closed.
        let granted = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["private.a": [.subscribe]]),
                                    namespaces: Self.namespaces("private.*:private"))
        #expect(granted.refusal(for: Self.frame(.subscribe, channel: "private.a") { $0.withPresence = false }) == nil)
        #expect(granted.refusal(for: Self.frame(.subscribe, channel: "public.a"))?.code == .notPermitted)
    }

    @Test("namespace rules bound everyone, a capability token too: no client publishes, no presence requests, no history (-15004)")
    func namespaceRules() {
        let namespaces = Self.namespaces("news.*:no-client-publish", "quiet.*:no-presence", "ephemeral.*:no-history")
        let everything = Capabilities(channels: ["*": Set(Capabilities.ChannelOperation.allCases)])
        for access in [SessionAccess(userId: "alice", capabilities: nil, namespaces: namespaces),
                       SessionAccess(userId: "alice", capabilities: everything, namespaces: namespaces)] {
            #expect(access.refusal(for: Self.frame(.publish, channel: "news.today"))?.reason.contains("clients may not publish") == true)
            #expect(access.refusal(for: .batchedPublish(channel: "news.today"))?.code == .notPermitted)
            #expect(access.refusal(for: .batchedPublish(channel: "quiet.a")) == nil)
            #expect(access.refusal(for: Self.frame(.subscribe, channel: "news.today")) == nil)
            for type in [FrameType.whoNow, .getState, .setState, .removeState] {
                #expect(access.refusal(for: Self.frame(type, channel: "quiet.a"))?.reason.contains("has no presence") == true, "\(type)")
            }
            #expect(access.refusal(for: Self.frame(.getChannelMemberCount) { $0.channels = ["quiet.a"] })?.code == .notPermitted)
            #expect(access.refusal(for: Self.frame(.getMessages, channel: "ephemeral.a"))?.code == .historyOperationNotPermitted)
            #expect(access.refusal(for: Self.frame(.publish, channel: "ephemeral.a") { $0.storeInHistory = true })?.code == .historyOperationNotPermitted)
            #expect(access.refusal(for: Self.frame(.publish, channel: "ephemeral.a")) == nil)
            #expect(access.refusal(for: Self.frame(.getMessages, channel: "news.today")) == nil)
        }
    }

    @Test("namespace options parse from the command-line form; the first matching pattern wins; bad ones are named")
    func namespaceParsing() throws {
        let room = try ChannelNamespace(parsing: "room.*:max-members=50,no-history")
        #expect(room.pattern == "room.*" && room.maxMembers == 50 && !room.history && room.presence && room.clientPublish && !room.isPrivate)
        let colon = try ChannelNamespace(parsing: "a:b*:private")   // split at the last ':'
        #expect(colon.pattern == "a:b*" && colon.isPrivate)
        let list = Self.namespaces("room.vip*:private", "room.*:no-presence")
        #expect(list.namespace(of: "room.vip1")?.isPrivate == true)
        #expect(list.namespace(of: "room.a")?.presence == false)
        #expect(list.namespace(of: "lobby") == nil)
        for (text, problem) in [("room.*", "PATTERN:OPTION"), ("room.*:", "no option"), ("room.*:loud", "unknown option 'loud'"),
                                ("room.*:max-members=0", "max-members must be a whole number ≥ 1, got '0'"), ("a*b:private", "before its end")] {
            do {
                _ = try ChannelNamespace(parsing: text)
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.description.contains(problem), "\(text): \(error)")
            }
        }
    }
}
