import ArgumentParser
import RTMClient

struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log in, subscribe to channels, and print every event live (link-state changes included).",
        discussion: "Kill and restart the server while it runs to watch the client reconnect and resubscribe.")
    @OptionGroup var options: ClientOptions
    @Argument(help: "Channels to subscribe to.") var channels: [String] = []

    func run() async throws {
        Interrupt.install()
        let client = try await options.connect(printEvents: true)
        for channel in channels { try await client.subscribe(channel) }
        await Interrupt.logoutOnSignal(client)
    }
}

struct Sub: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Subscribe to a channel and print what arrives (and every link-state change).")
    @OptionGroup var options: ClientOptions
    @Argument(help: "Channel name.") var channel: String

    func run() async throws {
        Interrupt.install()
        let client = try await options.connect(printEvents: true)
        try await client.subscribe(channel)
        await Interrupt.logoutOnSignal(client)
    }
}

struct Pub: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Publish one text message to a channel.")
    @OptionGroup var options: ClientOptions
    @Argument(help: "Channel name.") var channel: String
    @Argument(help: "Message text.") var message: String
    @Option(help: "Custom message type.") var customType: String?
    @Flag(help: "Also store it in the channel's history (see `rtm history`).") var store = false

    func run() async throws {
        let client = try await options.connect(printEvents: false)
        let seq = try await client.publish(channel: channel, message: message, customType: customType, storeInHistory: store)
        print("published to #\(channel) seq=\(seq)")
        await client.logout()
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send one text message to a user (peer-to-peer).")
    @OptionGroup var options: ClientOptions
    @Argument(help: "Receiver's user id.") var receiver: String
    @Argument(help: "Message text.") var message: String
    @Flag(help: "Also store it in the conversation's history (see `rtm history --with-user`).") var store = false

    func run() async throws {
        let client = try await options.connect(printEvents: false)
        let receipt = try await client.publish(toUser: receiver, message: message, storeInHistory: store)
        print(receipt.receiverOnline
              ? "delivered to \(receiver) (id \(receipt.messageId))"
              : "stored for \(receiver), who is offline: delivered when they log in (id \(receipt.messageId))")
        await client.logout()
    }
}
