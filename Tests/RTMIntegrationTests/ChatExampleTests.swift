import Foundation
import Testing
@testable import RTMClient

/// The example app (`rtm-chat-example`, public SDK API only) chats with an SDK
/// client and shows presence.
@Suite(.realTime, .serialized)
struct ChatExampleTests {
    @Test("Example app: rtm-chat-example shows who is online, publishes typed lines, prints messages, /who, and leaves on /quit")
    func chat() async throws {
        let harness = try await Harness.start()
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        _ = try await bob.subscribe("lobby")
        let input = Pipe()
        let chat = try RTMProcess(arguments: [
            "--url", "ws://127.0.0.1:\(harness.port)", "--app-id", Harness.appId, "--user", "alice",
            "--token", Harness.token("alice"), "--channel", "lobby",
        ], binary: RTMProcess.built("rtm-chat-example"), input: input)
        let type = { (line: String) in input.fileHandleForWriting.write(Data("\(line)\n".utf8)) }

        #expect(await chat.waitForLine(containing: "online in #lobby: alice, bob") != nil, "\(chat.output)")
        #expect(await bobEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteJoin && $0.presenceEvent?.userId == "alice" } != nil)
        type("hello from the example")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "hello from the example" }?.messageEvent?.publisher == "alice")
        _ = try await bob.publish(channel: "lobby", message: "hi alice")
        #expect(await chat.waitForLine(containing: "<bob> hi alice") != nil, "\(chat.output)")
        type("/who")
        #expect(await chat.waitForLine(containing: "2 online: alice, bob") != nil, "\(chat.output)")
        type("/quit")
        #expect(await bobEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteLeave && $0.presenceEvent?.userId == "alice" } != nil)
        await chat.waitUntilExit()
        #expect(chat.process.terminationStatus == 0, "\(chat.output)")
        await bob.logout()
    }
}
