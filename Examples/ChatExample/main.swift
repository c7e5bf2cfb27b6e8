// rtm-chat-example: a command-line chat with presence, written against the public RTMClient
// API only (it depends on nothing else). See README "Example app".
//
//   rtm serve                                   # in one terminal (creates rtm-data/app.json)
//   rtm-chat-example --app-id <id from rtm serve> --user alice --token "$(rtm token --user alice)"
//
// Lines typed are published to the room; `/who` lists who is online, `/state k=v` sets your
// presence state, `/quit` (or Ctrl-D) logs out.
import Foundation
import RTMClient

struct Options {
    var url = "ws://127.0.0.1:9600"
    var appId = ""
    var user = "guest-\(Int.random(in: 1000...9999))"
    var token: String?
    var channel = "lobby"
    var caFile: String?

    static let usage = """
        usage: rtm-chat-example --app-id ID [--user NAME] [--token TOKEN] [--channel NAME] [--url ws://host:port] [--ca-file PEM]
          The token comes from your token server (or `rtm token --user NAME`); an app without a
          certificate accepts none. Environment: RTM_APP_ID, RTM_TOKEN, RTM_URL.
        """

    /// Parses `--name value` pairs; nil (after printing the usage) when something is wrong.
    static func parse(_ arguments: [String]) -> Options? {
        var options = Options()
        let environment = ProcessInfo.processInfo.environment
        options.appId = environment["RTM_APP_ID"] ?? ""
        options.token = environment["RTM_TOKEN"]
        options.url = environment["RTM_URL"] ?? options.url
        var index = 0
        while index < arguments.count {
            let name = arguments[index]
            guard index + 1 < arguments.count else { return nil }
            let value = arguments[index + 1]
            switch name {
            case "--url": options.url = value
            case "--app-id": options.appId = value
            case "--user": options.user = value
            case "--token": options.token = value
            case "--channel": options.channel = value
            case "--ca-file": options.caFile = value
            default: return nil
            }
            index += 2
        }
        return options.appId.isEmpty ? nil : options
    }
}

/// Prints a line at once (standard output may be a pipe).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data("\(line)\n".utf8))
}

/// What the chat shows for each SDK event; `lost` remembers a lost link until it is back.
func show(_ event: RTMEvent, lost: inout Bool) {
    switch event {
    case .message(let message) where message.channelType == .message:
        say("<\(message.publisher)> \(message.text ?? "(\(message.data?.count ?? 0) bytes)")")
    case .message(let message) where message.channelType == .user:
        say("[private] <\(message.publisher)> \(message.text ?? "")")
    case .presence(let presence):
        switch presence.kind {
        case .snapshot: say("* online in #\(presence.channelName): \(presence.members.joined(separator: ", "))")
        case .remoteJoin: say("* \(presence.userId) joined")
        case .remoteLeave: say("* \(presence.userId) left")
        case .remoteTimeout: say("* \(presence.userId) timed out")
        case .remoteStateChanged: say("* \(presence.userId) is now \(presence.state)")
        case .interval:
            say("* joined: \(presence.members), left: \(presence.left), timed out: \(presence.timedOut)")
        }
    case .linkState(let link) where link.currentState != link.previousState:
        // What to do in each state is in the DocC article "Connection states".
        switch link.currentState {
        case .connected where lost:
            lost = false
            // isResumed: the server still held the session (nobody saw us leave). Otherwise the
            // SDK joined every channel again; anything it could not replay comes as a gap.
            say("* back online\(link.isResumed ? " (session resumed)" : " (new session: channels joined again)")")
        case .disconnected, .suspended:
            lost = true
            say("* connection lost (\(link.reason)); reconnecting by itself…")
        case .failed: say("* stopped: \(link.reason). Restart the chat (log in again).")
        default: break
        }
    case .gap(let gap):
        say("* some messages in #\(gap.channelName) could not be replayed after the reconnection")
    case .tokenWillExpire:
        say("* the token expires soon: a real app renews it with renewToken(_:)")
    default:
        break
    }
}

guard let options = Options.parse(Array(CommandLine.arguments.dropFirst())) else {
    say(Options.usage)
    exit(2)
}

do {
    var config = RTMClientConfig(appId: options.appId, userId: options.user, endpoint: options.url)
    config.caFile = options.caFile
    let client = try RTMClient(config: config)
    let events = client.events()
    // Detached: the main code below blocks in readLine().
    let printer = Task.detached {
        var lost = false
        for await event in events { show(event, lost: &lost) }
    }
    try await client.login(token: options.token)
    _ = try await client.subscribe(options.channel, options: SubscribeOptions(withPresence: true))
    say("* you are \(options.user) in #\(options.channel); /who, /state key=value, /quit")

    while let line = readLine() {
        let text = line.trimmingCharacters(in: .whitespaces)
        if text.isEmpty { continue }
        do {
            switch text {
            case "/quit":
                break
            case "/who":
                let page = try await client.whoNow(channel: options.channel)
                say("* \(page.totalCount) online: \(page.users.joined(separator: ", "))")
                continue
            case let command where command.hasPrefix("/state "):
                let pairs = command.dropFirst(7).split(separator: " ").compactMap { pair -> (String, String)? in
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
                }
                try await client.setState(channel: options.channel, Dictionary(pairs, uniquingKeysWith: { $1 }))
                continue
            default:
                // Queued while reconnecting; fails with a timeout error if not sent in time (R-3).
                _ = try await client.publish(channel: options.channel, message: text)
                continue
            }
        } catch {
            say("* \(error)")
            continue
        }
        break
    }
    await client.logout()
    printer.cancel()
} catch {
    say("error: \(error)")
    exit(1)
}
