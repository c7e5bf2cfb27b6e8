import ArgumentParser
import Foundation
import RTMClient
import RTMProtocol

/// `rtm online`: peer online status (the classic API, AGORA_REFERENCE §1.7).
struct OnlineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "online",
        abstract: "Query or watch other users' online status (online, unreachable, offline).",
        discussion: """
            Examples:
              rtm online query bob carol     # print each user's state once (online or offline)
              rtm online watch bob carol     # print every change live until Ctrl-C
              rtm online count room lobby    # members of channels, without joining them
            A watched user is unreachable when the server has heard nothing from it for 6 s, and
            offline when its session ended (logout, or 30 s without a sign of life).
            """)
    enum Action: String, ExpressibleByArgument, CaseIterable { case query, watch, count }

    @OptionGroup var options: ClientOptions
    @Argument(help: "query, watch or count.") var action: Action
    @Argument(help: "User ids (query, watch; at most 256) or channel names (count; at most 32).") var names: [String]

    func run() async throws {
        switch action {
        case .query:
            let client = try await options.connect(printEvents: false)
            for status in try await client.queryPeersOnlineStatus(names) {
                print("\(status.userId)\t\(status.state)(\(status.state.rawValue))")
            }
            await client.logout()
        case .count:
            let client = try await options.connect(printEvents: false)
            let counts = try await client.getChannelMemberCount(names)
            for name in names { print("#\(name)\t\(counts[name] ?? 0)") }
            await client.logout()
        case .watch:
            Interrupt.install()
            let client = try await options.connect(printEvents: true)
            try await client.subscribePeersOnlineStatus(names)
            await Interrupt.logoutOnSignal(client)
        }
    }
}

/// `rtm call`: call invitations (the classic CallKit, AGORA_REFERENCE §1.8).
struct CallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Send, accept, refuse or cancel call invitations, printing every state change live.",
        discussion: """
            Examples:
              rtm call invite bob --content "video?" --channel call-42   # until answered; type cancel (or Ctrl-C) to cancel
              rtm call accept --response "on my way"     # waits for an invitation (--from, --id) and accepts it
              rtm call refuse --from alice --response busy
              rtm call cancel 3k9x2f1q                   # an invitation you sent, by id, from another terminal
            One user has one session (a new login ends the other, C-6): `rtm call cancel` from
            another terminal logs in as you, which ends the `rtm call invite` session and every
            invitation it sent (each callee is told it was canceled). To cancel one invitation and
            keep the session, type `cancel` in the `rtm call invite` window.
            The callee gets an invitation as soon as it is online; the caller's fails with
            remoteOffline if the callee stays offline for 30 s, remoteNoResponse if it never
            acknowledged within 30 s, expire if nobody acted on it within 60 s.
            """)
    enum Action: String, ExpressibleByArgument, CaseIterable { case invite, accept, refuse, cancel }

    @OptionGroup var options: ClientOptions
    @Argument(help: "invite, accept, refuse or cancel.") var action: Action
    @Argument(help: "invite: the callee's user id; cancel: the invitation id.") var target: String?
    @Option(help: "invite: what to say.") var content = ""
    @Option(help: "invite: a channel for the call.") var channel: String?
    @Option(help: "accept, refuse: the answer.") var response = ""
    @Option(help: "accept, refuse: only an invitation from this caller.") var from: String?
    @Option(help: "accept, refuse: only the invitation with this id.") var id: String?

    func validate() throws {
        if (action == .invite || action == .cancel) && target == nil {
            throw ValidationError("'\(action.rawValue)' needs \(action == .invite ? "the callee's user id" : "the invitation id")")
        }
    }

    func run() async throws {
        Interrupt.install()
        // Read after they are printed: the command ends on an invitation's final state, whose
        // line must be out before the process exits.
        let (events, printed) = AsyncStream<RTMEvent>.makeStream()
        let client = try await options.connect(printEvents: true, afterPrinting: printed)
        switch action {
        case .invite:
            let invitation = try await client.sendLocalInvitation(calleeId: target!, content: content, channelId: channel)
            EventPrinter.say("invitation \(invitation.id) sent to \(invitation.calleeId)")
            EventPrinter.say("type cancel (or press Ctrl-C) to cancel it")
            let id = invitation.id
            Task {
                await Interrupt.wait()
                try? await client.cancelLocalInvitation(id)
            }
            Task {
                for await line in Self.standardInputLines() where line.trimmingCharacters(in: .whitespaces) == "cancel" {
                    do {
                        try await client.cancelLocalInvitation(id)
                    } catch {
                        EventPrinter.say("could not cancel: \(error)")
                    }
                }
            }
            for await event in events {
                if case .call(.local(let local)) = event, local.id == id, local.state.isFinal { break }
            }
        case .accept, .refuse:
            EventPrinter.say("waiting for an invitation\(from.map { " from \($0)" } ?? "")…")
            let wanted = { (remote: RemoteInvitation) in
                remote.state == .invitationReceived && (from == nil || remote.callerId == from) && (id == nil || remote.id == id)
            }
            // One delivered at login, before `events` was registered, is already in the book.
            var found = await client.remoteInvitations.values.sorted { $0.id < $1.id }.first(where: wanted)
            if found == nil {
                for await event in events {
                    if case .call(.remote(let remote)) = event, wanted(remote) { found = remote; break }
                }
            }
            guard let remote = found else { break }
            if action == .accept {
                try await client.acceptRemoteInvitation(remote.id, response: response)
            } else {
                try await client.refuseRemoteInvitation(remote.id, response: response)
            }
            // Its final state is printed before the command logs out and exits (the reply can
            // come before the printer has written that line).
            for await event in events {
                if case .call(.remote(let answered)) = event, answered.id == remote.id, answered.state.isFinal { break }
            }
        case .cancel:
            do {
                try await client.cancelLocalInvitation(target!)
            } catch {
                // This login ended the session that sent it (one session per user), and with it
                // its invitations: canceled, as asked.
                guard error.code == .invitationAlreadyEnd, error.reason.contains("already canceled") else { throw error }
            }
            EventPrinter.say("invitation \(target!) canceled")
        }
        await client.logout()
    }

    /// The lines typed on standard input (read on a thread of their own: reading blocks).
    static func standardInputLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            let reader = Thread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }
            reader.start()
        }
    }
}
