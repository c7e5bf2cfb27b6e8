import Foundation
import RTMClient
import RTMTestSupport
import Testing

/// `rtm serve`'s durability and retention flags reach the server (a real process), and a bad
/// value is refused by name before anything listens.
@Suite(.serialized)
struct ServeOptionsTests {
    @Test("M-1: `rtm serve --user-message-cap 2`: the third waiting message drops the oldest and the receiver is told; `--user-message-cap 0` and `--user-message-resend-window 0.5` are refused by name")
    func storeFlags() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-flags-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        for (flag, value) in [("--user-message-cap", "0"), ("--user-message-resend-window", "0.5")] {
            let refused = try RTMProcess(arguments: ["serve", "--port", "0", "--data-dir", dataDir, flag, value])
            refused.process.waitUntilExit()
            #expect(refused.process.terminationStatus != 0)
            #expect(refused.output.contains { $0.contains(flag) }, "\(refused.output)")
        }
        let port = try LoopbackPort.free()
        let server = try RTMProcess(arguments: [
            "serve", "--port", "\(port)", "--data-dir", dataDir, "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
            "--publish-rate", "0", "--user-message-cap", "2", "--store-full-sync", "--history-retention-hours", "0",
        ])
        defer { server.stop() }
        try #require(await server.waitForLine(containing: "listening") != nil, "\(server.output)")
        let (alice, _) = try await Harness.client("alice", port: port)
        for i in 1...3 { try await alice.publish(toUser: "bob", message: "m\(i)") }
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        let dropped = await bobEvents.first(within: soon) { if case .userMessagesDropped = $0 { true } else { false } }
        if case .userMessagesDropped(let count)? = dropped { #expect(count == 1) } else { Issue.record("no dropped notice") }
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "m3" }
        #expect(await DeliveryTests.texts(bobEvents, user: true) == ["m2", "m3"])
        await bob.logout()
        await alice.logout()
    }
}
