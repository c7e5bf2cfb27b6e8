import RTMAuth
import RTMProtocol
import Testing
@testable import RTMServer

/// Access decisions as values: which request touches which channel or user, and what a
/// capability token or a private channel pattern allows.
struct SessionAccessTests {
    static let roomOnly = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["room.*": Set(Capabilities.ChannelOperation.allCases)]),
                                        privateChannels: [])

    static func frame(_ type: FrameType, channel: String? = nil, user: String? = nil, _ body: (inout Frame) -> Void = { _ in }) -> Frame {
        Frame(type: type, id: 1, userId: user, channel: channel).with(body)
    }

    @Test("a token limited to room.*: every channel operation allowed on room.a and refused on secret (-10104, naming it)")
    func channelOperations() {
        let requests: [Frame] = [
            Self.frame(.subscribe), Self.frame(.publish), Self.frame(.setState), Self.frame(.removeState), Self.frame(.getState),
            Self.frame(.whoNow), Self.frame(.getMessages), Self.frame(.setMetadata), Self.frame(.updateMetadata),
            Self.frame(.removeMetadata), Self.frame(.replaceMetadata), Self.frame(.getMetadata), Self.frame(.subscribeMetadata),
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

    @Test("each grant is its own: subscribe alone does not give publish, withMetadata needs metadata.read, withLock needs lock")
    func grantsAreSeparate() {
        let access = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["room.*": [.subscribe]]), privateChannels: [])
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "room.a")) == nil)
        #expect(access.refusal(for: Self.frame(.publish, channel: "room.a"))?.reason.contains("publish") == true)
        #expect(access.mayPublish("room.a") != nil)
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "room.a") { $0.withMetadata = true })?.reason.contains("metadata.read") == true)
        #expect(access.refusal(for: Self.frame(.subscribe, channel: "room.a") { $0.withLock = true })?.reason.contains("lock") == true)
        #expect(access.maySubscribe("room.a") && !access.maySubscribe("other"))
    }

    @Test("users: send, status, invite and user metadata need a user grant; oneself is always allowed")
    func userOperations() {
        let access = SessionAccess(userId: "alice", capabilities: Capabilities(users: ["bob": [.send]]), privateChannels: [])
        #expect(access.refusal(for: Self.frame(.sendUser, user: "bob")) == nil)
        #expect(access.maySend(to: "bob") == nil && access.maySend(to: "carol")?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.sendUser, user: "carol"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.whereNow, user: "bob"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.invite, user: "bob"))?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.queryPeersOnlineStatus) { $0.users = ["bob"] })?.code == .notPermitted)
        #expect(access.refusal(for: Self.frame(.getMetadata, user: "bob") { $0.storageType = "user" })?.code == .notPermitted)
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

    @Test("no capability token: everything allowed but the private channels, which need a grant")
    func privateChannels() {
        let open = SessionAccess(userId: "alice", capabilities: nil, privateChannels: [])
        #expect(open.isUnrestricted)
        #expect(open.refusal(for: Self.frame(.subscribe, channel: "anything")) == nil)
        let guarded = SessionAccess(userId: "alice", capabilities: nil, privateChannels: ["private.*", "admins"])
        #expect(!guarded.isUnrestricted)
        #expect(guarded.refusal(for: Self.frame(.subscribe, channel: "public.a")) == nil)
        #expect(guarded.refusal(for: Self.frame(.subscribe, channel: "private.a"))?.reason.contains("is private ('private.*')") == true)
        #expect(guarded.refusal(for: Self.frame(.getLocks, channel: "admins"))?.code == .notPermitted)
        #expect(guarded.refusal(for: Self.frame(.sendUser, user: "bob")) == nil)
        // A token granting the private channel opens it; what it does not grant stays closed.
        let granted = SessionAccess(userId: "alice", capabilities: Capabilities(channels: ["private.a": [.subscribe]]),
                                    privateChannels: ["private.*"])
        #expect(granted.refusal(for: Self.frame(.subscribe, channel: "private.a")) == nil)
        #expect(granted.refusal(for: Self.frame(.subscribe, channel: "public.a"))?.code == .notPermitted)
    }
}
