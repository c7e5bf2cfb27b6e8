import ArgumentParser
import Foundation
import RTMClient
import RTMProtocol

/// `rtm stream`: join a stream channel (its own STREAM connection), topics.
struct StreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Join a stream channel over its own STREAM connection, publish to and subscribe to topics.",
        discussion: """
            Joins CHANNEL, joins --topic as a publisher, subscribes to --subscribe topics (from every
            publisher), prints every event (topic events, topic messages, the stream link state;
            with --with-metadata / --with-lock the channel's storage and lock events too),
            and publishes each line read from standard input to the --topic topic. Ctrl-D leaves,
            Ctrl-C logs out.
            """)
    @OptionGroup var options: ClientOptions
    @Argument(help: "Stream channel name.") var channel: String
    @Option(help: "Topic to join as a publisher (lines from stdin are published to it).") var topic: String?
    @Option(help: "Publisher meta shown to others (≤ 256 bytes).") var meta = ""
    @Option(help: "Topics to subscribe to (repeatable).") var subscribe: [String] = []
    @Flag(help: "Also print the channel's storage events (a snapshot first): the join option withMetadata.") var withMetadata = false
    @Flag(help: "Also print the channel's lock events (a snapshot first): the join option withLock.") var withLock = false

    func run() async throws {
        Interrupt.install()
        let client = try await options.connect(printEvents: true)
        let stream = try client.createStreamChannel(channel)
        let members = try await stream.join(JoinChannelOptions(withMetadata: withMetadata, withLock: withLock))
        EventPrinter.say("joined stream channel \(channel): members \(members)")
        if let topic { try await stream.joinTopic(topic, options: JoinTopicOptions(meta: meta)) }
        for name in subscribe { try await stream.subscribeTopic(name) }
        guard let topic else {
            await Interrupt.logoutOnSignal(client)
            return
        }
        // Ctrl-D (end of input) leaves the channel, then logs out; Ctrl-C logs out at once. The
        // line reader may stay blocked in readLine: returning from run() ends the process.
        let (ends, end) = AsyncStream<Bool>.makeStream()
        Task {
            while let line = readLine() {
                do { try await stream.publishTopicMessage(topic: topic, message: line) } catch { print("publish failed: \(error)") }
            }
            end.yield(true)
        }
        Task {
            await Interrupt.wait()
            end.yield(false)
        }
        for await endOfInput in ends {
            if endOfInput { await stream.leave() }
            break
        }
        await client.logout()
    }
}

/// `rtm meta`: channel and user metadata.
struct MetaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "meta",
        abstract: "Read and write channel or user metadata (compare-and-set with --revision).",
        discussion: """
            Examples:
              rtm meta get --channel room
              rtm meta set --channel room topic=swift mood=calm --revision 3
              rtm meta remove --user alice status
              rtm meta watch --user alice      # print storage events until Ctrl-C
            """)
    enum Action: String, ExpressibleByArgument, CaseIterable { case get, set, update, remove, watch }

    @OptionGroup var options: ClientOptions
    @Argument(help: "get, set, update, remove or watch.") var action: Action
    @Argument(help: "key=value items (set, update) or keys (remove).") var items: [String] = []
    @Option(help: "A channel's metadata.") var channel: String?
    @Option(help: "A user's metadata (default: your own).") var userTarget: String?
    @Option(help: "Expected majorRevision (compare-and-set; -1 = no check).") var revision: Int64 = -1
    @Option(help: "Only write while holding this lock (channel metadata).") var lock: String?
    @Flag(help: "Record the write time and author in the items.") var record = false

    func run() async throws {
        if action == .watch { Interrupt.install() }
        let client = try await options.connect(printEvents: action == .watch)
        defer { Task { await client.logout() } }
        var metadata = Metadata(majorRevision: revision)
        for item in items {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            metadata.items.append(MetadataItem(key: parts[0], value: parts.count > 1 ? parts[1] : ""))
        }
        let recordOptions = MetadataOptions(recordTs: record, recordUserId: record)
        let result: Metadata
        switch (action, channel) {
        case (.get, let channel?): result = try await client.getChannelMetadata(channel)
        case (.set, let channel?): result = try await client.setChannelMetadata(channel, metadata, options: recordOptions, lock: lock)
        case (.update, let channel?): result = try await client.updateChannelMetadata(channel, metadata, options: recordOptions, lock: lock)
        case (.remove, let channel?): result = try await client.removeChannelMetadata(channel, metadata, lock: lock)
        case (.watch, let channel?):
            try await client.subscribe(channel, options: SubscribeOptions(withPresence: false, withMetadata: true))
            await Interrupt.logoutOnSignal(client)
            return
        case (.get, nil): result = try await client.getUserMetadata(userId: userTarget)
        case (.set, nil): result = try await client.setUserMetadata(userId: userTarget, metadata, options: recordOptions)
        case (.update, nil): result = try await client.updateUserMetadata(userId: userTarget, metadata, options: recordOptions)
        case (.remove, nil): result = try await client.removeUserMetadata(userId: userTarget, metadata)
        case (.watch, nil):
            try await client.subscribeUserMetadata(userId: userTarget ?? client.config.userId)
            await Interrupt.logoutOnSignal(client)
            return
        }
        print("majorRevision \(result.majorRevision)")
        for item in result.items {
            var line = "  \(item.key) = \(item.value)  (revision \(item.revision)"
            if let author = item.authorUserId { line += ", by \(author)" }
            if let ts = item.updateTs { line += ", at \(ts)" }
            print(line + ")")
        }
        await client.logout()
    }
}

/// `rtm lock`: locks with fencing tokens.
struct LockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Define, take, give back, revoke, remove and list a channel's locks.",
        discussion: """
            `acquire` holds the lock until Ctrl-C (then releases it) and prints its fencing token;
            with --retry it waits for the lock first. Cut the network of an `acquire` to watch the
            lock survive for its TTL, then go to someone else.
            """)
    enum Action: String, ExpressibleByArgument, CaseIterable { case set, acquire, release, revoke, remove, list }

    @OptionGroup var options: ClientOptions
    @Argument(help: "set, acquire, release, revoke, remove or list.") var action: Action
    @Argument(help: "Channel name.") var channel: String
    @Argument(help: "Lock name (not for list).") var lockName: String?
    @Option(help: "TTL in seconds [10, 300] (set).") var ttl = 10
    @Flag(help: "Wait for the lock instead of failing (acquire).") var retry = false
    @Option(help: "The holder to take it from (revoke).") var owner: String?

    func run() async throws {
        if action == .acquire { Interrupt.install() }
        let client = try await options.connect(printEvents: action == .acquire)
        if action == .list {
            for lock in try await client.getLocks(channel: channel) {
                print("\(lock.lockName)  owner=\(lock.owner.isEmpty ? "-" : lock.owner)  ttl=\(lock.ttl)s  fencingToken=\(lock.fencingToken)")
            }
            await client.logout()
            return
        }
        guard let lockName else { throw ValidationError("give a lock name") }
        switch action {
        case .set: try await client.setLock(channel: channel, lockName: lockName, ttl: ttl)
        case .acquire:
            let token = try await client.acquireLock(channel: channel, lockName: lockName, retry: retry)
            EventPrinter.say("acquired \(lockName) in #\(channel): fencing token \(token) (Ctrl-C releases it)")
            try await client.subscribe(channel, options: SubscribeOptions(withPresence: false, withLock: true))
            await Interrupt.logoutOnSignal(client)   // logout releases it at once
            return
        case .release: try await client.releaseLock(channel: channel, lockName: lockName)
        case .revoke:
            guard let owner else { throw ValidationError("revoke needs --owner") }
            try await client.revokeLock(channel: channel, lockName: lockName, owner: owner)
        case .remove: try await client.removeLock(channel: channel, lockName: lockName)
        case .list: break
        }
        print("ok: \(action.rawValue) \(lockName) in #\(channel)")
        await client.logout()
    }
}

/// `rtm history`: a channel's stored messages.
struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Print a channel's stored messages (published with --store), newest first, all pages.")
    @OptionGroup var options: ClientOptions
    @Argument(help: "Channel name, or the other user's id with --with-user.") var channel: String
    @Flag(help: "The conversation with user CHANNEL instead of a message channel.") var withUser = false
    @Option(help: "Messages per page (≤ 100).") var pageSize = 100
    @Option(help: "At most this many messages in all.") var limit = 1000

    func run() async throws {
        let client = try await options.connect(printEvents: false)
        var start: Int64 = 0
        var printed = 0
        repeat {
            let page = try await client.getMessages(channel: channel, channelType: withUser ? .user : .message, count: pageSize, start: start)
            for message in page.messages where printed < limit {
                let body = message.text ?? message.data.map { "<\($0.count) bytes>" } ?? ""
                print("\(message.ts)  \(message.publisher): \(body)")
                printed += 1
            }
            start = page.newStart
        } while start != 0 && printed < limit
        await client.logout()
    }
}
