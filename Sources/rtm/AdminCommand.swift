import ArgumentParser
import Foundation
import RTMAdminAPI

/// `rtm admin <verb>`: the admin HTTP API from the command line (`openapi/admin.yaml`).
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Operate a running server through its admin API (needs the admin key).",
        discussion: """
            The server must run with an admin key (`rtm serve --admin-key K`, or RTM_ADMIN_KEY). Each verb
            prints the API's JSON answer. --admin-url / RTM_ADMIN_URL (default http://127.0.0.1:9601) and
            --admin-key / RTM_ADMIN_KEY say where and how.
            """,
        subcommands: [Info.self, Channels.self, Channel.self, Sessions.self, Publish.self, Send.self, WhoNow.self,
                      WhereNow.self, History.self, Disconnect.self, Kick.self, Ban.self, Unban.self, Bans.self, Revoke.self])

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Node info: version, uptime, connections, sessions, channels, counters.")
        @OptionGroup var admin: AdminOptions
        func run() async throws { try await admin.call { try await $0.getInfo().ok.body.json } }
    }

    struct Channels: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The channels the server knows, with member counts.")
        @OptionGroup var admin: AdminOptions
        func run() async throws { try await admin.call { try await $0.listChannels(query: .init(appId: admin.appId)).ok.body.json } }
    }

    struct Channel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Inspect one channel: members (with state) and its last messages.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "Channel name.") var channel: String
        func run() async throws {
            try await admin.call { try await $0.getChannel(path: .init(channel: channel), query: .init(appId: admin.appId)).ok.body.json }
        }
    }

    struct Sessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Sessions: connected users and users within their grace window.")
        @OptionGroup var admin: AdminOptions
        func run() async throws { try await admin.call { try await $0.listSessions(query: .init(appId: admin.appId)).ok.body.json } }
    }

    struct Publish: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Publish a text message to a channel as a backend.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "Channel name.") var channel: String
        @Argument(help: "Message text.") var message: String
        @Option(help: "Publisher user id shown to subscribers.") var publisher = "admin"
        @Option(help: "Custom message type.") var customType: String?
        @Flag(help: "Also store it in the channel's history.") var store = false
        func run() async throws {
            let fields = Operations.publish.Input.Body.jsonPayload.Value1Payload(
                appId: admin.appId, channel: channel, message: message, customType: customType, publisher: publisher, storeInHistory: store)
            try await admin.call { try await $0.publish(body: .json(.init(value1: fields, value2: .case1(.init())))).ok.body.json }
        }
    }

    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send a user message (durable, as a client's sendUser).")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "Receiver user id.") var user: String
        @Argument(help: "Message text.") var message: String
        @Option(help: "Sender user id.") var from = "admin"
        @Option(help: "Custom message type.") var customType: String?
        @Flag(help: "Also store it in the conversation's history.") var store = false
        func run() async throws {
            let fields = Operations.send.Input.Body.jsonPayload.Value1Payload(
                appId: admin.appId, user: .init(value1: user), message: message, customType: customType, from: from, storeInHistory: store)
            try await admin.call { try await $0.send(body: .json(.init(value1: fields, value2: .case1(.init())))).ok.body.json }
        }
    }

    struct WhoNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "whonow", abstract: "Who is in a channel (100 per page).")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "Channel name.") var channel: String
        @Flag(help: "Include each member's temporary state.") var includeState = false
        @Option(help: "The previous answer's nextPage.") var page: String?
        func run() async throws {
            let query = Operations.whoNow.Input.Query(channel: channel, includeState: includeState ? true : nil, page: page, appId: admin.appId)
            try await admin.call { try await $0.whoNow(query: query).ok.body.json }
        }
    }

    struct WhereNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "wherenow", abstract: "Which channels a user is in.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "User id.") var user: String
        func run() async throws { try await admin.call { try await $0.whereNow(query: .init(user: user, appId: admin.appId)).ok.body.json } }
    }

    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stored messages of a channel (or of a conversation 'userA:userB' with --user-conversation), newest first.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "Channel name, or userA:userB.") var channel: String
        @Flag(help: "CHANNEL names a user conversation, userA:userB.") var userConversation = false
        @Option(help: "Messages per page [1, 100].") var count = 100
        @Option(help: "Only messages older than this (ms; the previous answer's newStart).") var start: Int64?
        func run() async throws {
            let query = Operations.getHistory.Input.Query(channel: channel, channelType: userConversation ? .user : .message, count: count,
                                                          start: start.map { Int($0) }, appId: admin.appId)
            try await admin.call { try await $0.getHistory(query: query).ok.body.json }
        }
    }

    struct Disconnect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disconnect a user's connection; its client reconnects and resumes (others see nothing).",
            discussion: "The client gets `goaway` (code 28) with the reason; the SDK reports it in its link-state event's message.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "User id.") var user: String
        @Option(help: "Reason the client sees.") var reason: String?
        func run() async throws {
            try await admin.call { try await $0.disconnect(body: .json(.init(appId: admin.appId, user: user, reason: reason))).ok.body.json }
        }
    }

    struct Kick: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End a user's session (members see it leave); its client does not log in again by itself.",
            discussion: "The client gets `kicked` (code 28 kickedOutByServer) with the reason. --ban also refuses its logins for that long.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "User id.") var user: String
        @Option(help: "Reason the client sees.") var reason: String?
        @Option(help: "Also ban the user for this many seconds.") var ban: Double?
        func run() async throws {
            try await admin.call { try await $0.kick(body: .json(.init(appId: admin.appId, user: user, reason: reason, banSeconds: ban))).ok.body.json }
        }
    }

    struct Ban: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Ban a user for a time: its session ends, its logins are refused (-10012) until then.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "User id.") var user: String
        @Argument(help: "Seconds.") var seconds: Double
        @Option(help: "Reason the client sees.") var reason: String?
        func run() async throws {
            try await admin.call { try await $0.ban(body: .json(.init(appId: admin.appId, user: user, seconds: seconds, reason: reason))).ok.body.json }
        }
    }

    struct Unban: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lift a ban.")
        @OptionGroup var admin: AdminOptions
        @Argument(help: "User id.") var user: String
        func run() async throws { try await admin.call { try await $0.unban(body: .json(.init(appId: admin.appId, user: user))).ok.body.json } }
    }

    struct Bans: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List active bans.")
        @OptionGroup var admin: AdminOptions
        func run() async throws { try await admin.call { try await $0.listBans(query: .init(appId: admin.appId)).ok.body.json } }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke one token (--token), or every token of a user issued before now (--user); their sessions end.",
            discussion: "The client gets `kicked` (code 16 invalidToken); logins with a revoked token get -10005.")
        @OptionGroup var admin: AdminOptions
        @Option(help: "The user whose tokens issued before now are revoked.") var user: String?
        @Option(help: "The one token to revoke.") var token: String?
        @Option(help: "Reason the client sees.") var reason: String?
        func validate() throws {
            guard (user == nil) != (token == nil) else { throw ValidationError("give exactly one of --user and --token") }
        }
        func run() async throws {
            let fields = Operations.revoke.Input.Body.jsonPayload.Value1Payload(appId: admin.appId, user: user, token: token, reason: reason)
            let which = Operations.revoke.Input.Body.jsonPayload.Value2Payload(value1: token.map { _ in .init() }, value2: user.map { _ in .init() })
            try await admin.call { try await $0.revoke(body: .json(.init(value1: fields, value2: which))).ok.body.json }
        }
    }
}
