import Foundation
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// `rtm online` and `rtm call` as real processes against a real server (§1.7, §1.8).
@Suite(.realTime, .serialized)
struct SignalingCLITests {
    static func rtm(_ arguments: [String], user: String, port: Int) throws -> RTMProcess {
        try RTMProcess(arguments: arguments + [
            "--url", "ws://127.0.0.1:\(port)", "--user", user, "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
        ])
    }

    static func waitForExit(_ process: RTMProcess, within timeout: Duration = soon) async -> Int32? {
        _ = await eventually(within: timeout) { !process.process.isRunning }
        return process.process.isRunning ? nil : process.process.terminationStatus
    }

    @Test("rtm online watch prints each change live; rtm online query and count print once")
    func online() async throws {
        let harness = try await Harness.start()
        let watcher = try Self.rtm(["online", "watch", "bob"], user: "alice", port: harness.port)
        #expect(await watcher.waitForLine(containing: "bob=offline(2)") != nil, "\(watcher.output)")
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let online = await watcher.waitForLine(containing: "bob=online(0)")
        #expect(online != nil, "\(watcher.output)")

        let query = try Self.rtm(["online", "query", "bob", "carol"], user: "dave", port: harness.port)
        #expect(await Self.waitForExit(query) == 0)
        #expect(query.output.contains("bob\tonline(0)"), "\(query.output)")
        #expect(query.output.contains("carol\toffline(2)"), "\(query.output)")
        let count = try Self.rtm(["online", "count", "room", "empty"], user: "dave", port: harness.port)
        #expect(await Self.waitForExit(count) == 0)
        #expect(count.output.contains("#room\t1"), "\(count.output)")
        #expect(count.output.contains("#empty\t0"), "\(count.output)")

        await bob.logout()
        #expect(await watcher.waitForLine(containing: "bob=offline(2)", after: (online ?? 0) + 1) != nil, "\(watcher.output)")
    }

    @Test("rtm call accept waits for an invitation and answers it; rtm call invite prints the states until the end")
    func call() async throws {
        let harness = try await Harness.start()
        let callee = try Self.rtm(["call", "accept", "--from", "alice", "--response", "on my way"], user: "bob", port: harness.port)
        #expect(await callee.waitForLine(containing: "waiting for an invitation") != nil, "\(callee.output)")
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob", content: "video?")
        let accepted = await aliceEvents.first(within: soon) { event in
            if case .call(.local(let i)) = event { i.id == sent.id && i.state == .acceptedByRemote } else { false }
        }
        if case .call(.local(let local))? = accepted { #expect(local.response == "on my way") } else { Issue.record("not accepted: \(callee.output)") }
        #expect(await Self.waitForExit(callee) == 0)
        #expect(await callee.waitForLine(containing: "invitationReceived(1) content=video?") != nil, "\(callee.output)")
        #expect(await callee.waitForLine(containing: "accepted(4)") != nil, "\(callee.output)")

        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let caller = try Self.rtm(["call", "invite", "bob", "--content", "again?"], user: "carol", port: harness.port)
        let received = await bobEvents.first(within: soon) { event in
            if case .call(.remote(let i)) = event { i.callerId == "carol" && i.state == .invitationReceived } else { false }
        }
        guard case .call(.remote(let invitation))? = received else { Issue.record("bob got nothing: \(caller.output)"); return }
        try await bob.refuseRemoteInvitation(invitation.id, response: "busy")
        #expect(await Self.waitForExit(caller) == 0)
        // Exited: its last lines may still be in the output pipe, so each is awaited, not looked up.
        #expect(await caller.waitForLine(containing: "receivedByRemote(2)") != nil, "\(caller.output)")
        #expect(await caller.waitForLine(containing: "refusedByRemote(4) response=busy") != nil, "\(caller.output)")
        await alice.logout()
        await bob.logout()
    }

    @Test("rtm call cancel as users run it: typing cancel in the rtm call invite window cancels that invitation (the callee told) and the command ends; rtm call cancel ID from another terminal succeeds too")
    func cancelAsUsersRunIt() async throws {
        let harness = try await Harness.start()
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let input = Pipe()
        let caller = try RTMProcess(arguments: ["call", "invite", "bob", "--url", "ws://127.0.0.1:\(harness.port)", "--user", "alice",
                                                "--app-id", Harness.appId, "--app-certificate", Harness.certificate], input: input)
        #expect(await caller.waitForLine(containing: "type cancel") != nil, "\(caller.output)")
        let received = await bobEvents.first(within: soon) { event in
            if case .call(.remote(let i)) = event { i.callerId == "alice" && i.state == .invitationReceived } else { false }
        }
        guard case .call(.remote(let first))? = received else { Issue.record("bob got nothing: \(caller.output)"); return }
        input.fileHandleForWriting.write(Data("cancel\n".utf8))
        let canceled = await bobEvents.first(within: soon) { event in
            if case .call(.remote(let i)) = event { i.id == first.id && i.state == .canceled } else { false }
        }
        #expect(canceled != nil, "\(caller.output)")
        #expect(await Self.waitForExit(caller) == 0)
        #expect(await caller.waitForLine(containing: "canceled(") != nil, "\(caller.output)")

        // From another terminal, by id.
        let second = try Self.rtm(["call", "invite", "bob"], user: "carol", port: harness.port)
        let again = await bobEvents.first(within: soon) { event in
            if case .call(.remote(let i)) = event { i.callerId == "carol" && i.state == .invitationReceived } else { false }
        }
        guard case .call(.remote(let invitation))? = again else { Issue.record("bob got nothing: \(second.output)"); return }
        let cancel = try Self.rtm(["call", "cancel", invitation.id], user: "carol", port: harness.port)
        #expect(await Self.waitForExit(cancel) == 0, "\(cancel.output)")
        #expect(await cancel.waitForLine(containing: "invitation \(invitation.id) canceled") != nil, "\(cancel.output)")
        let told = await bobEvents.first(within: soon) { event in
            if case .call(.remote(let i)) = event { i.id == invitation.id && i.state == .canceled } else { false }
        }
        #expect(told != nil)
        await bob.logout()
    }
}
