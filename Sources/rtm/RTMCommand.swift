import ArgumentParser
import Foundation

@main
struct RTMCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rtm",
        abstract: "A self-hostable real-time messaging server and its client tools.",
        discussion: """
            Start a server with `rtm serve` (it creates a development app id and certificate in its
            data directory on first start), then try it from other terminals with `rtm listen`,
            `rtm sub`, `rtm pub`, `rtm send`, `rtm stream`, `rtm meta`, `rtm lock` and `rtm history`; operate it with `rtm admin`. Client commands read the development credentials
            from the same data directory when --app-id / --token are not given.
            """,
        subcommands: [Serve.self, TokenCommand.self, Listen.self, Sub.self, Pub.self, Send.self,
                      StreamCommand.self, MetaCommand.self, LockCommand.self, HistoryCommand.self, OnlineCommand.self, CallCommand.self, AdminCommand.self, Bench.self])
}
