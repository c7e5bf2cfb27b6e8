import Foundation
import RTMTestSupport
import Testing
@testable import RTMClient

/// A rolling upgrade with two builds: a node of the previous release (`RTM_PREVIOUS_BINARY`,
/// built by CI from an earlier commit) and a node of this one on one PostgreSQL, real SDK
/// clients on both; then the old node is stopped (SIGTERM) and this release started in its place.
extension ClusterTests {
    static var previousBinary: URL? {
        ProcessInfo.processInfo.environment["RTM_PREVIOUS_BINARY"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
    }

    @Test("rolling upgrade: a node of the previous release and one of this release on one database exchange channel and user messages and presence both ways; the old node replaced by this release on its port, its client comes back and both directions still work",
          .enabled(if: runsWhen(previousBinary != nil, orRequiredBy: "RTM_REQUIRE_PREVIOUS_BINARY"),
                   "needs RTM_PREVIOUS_BINARY: an rtm built from an earlier release (.ci/run builds one)"))
    func rollingUpgrade() async throws {
        let previous = try #require(Self.previousBinary, "RTM_PREVIOUS_BINARY is not set")
        let database = try await PostgresTestServer.start()
        defer { database.destroy() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-upgrade-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func node(_ name: String, port: Int, binary: URL) async throws -> RTMProcess {
            let process = try RTMProcess(arguments: [
                "serve", "--port", "\(port)", "--data-dir", "\(directory)/\(name)", "--app-id", Harness.appId,
                "--app-certificate", Harness.certificate, "--publish-rate", "0", "--lease-seconds", "5",
                "--postgres", database.url + "?sslmode=disable", "--node-id", name,
            ], binary: binary)
            let listening = await process.waitForLine(containing: "listening", within: processStart)
            try #require(listening != nil, "\(process.output)")
            return process
        }
        let (oldPort, newPort) = (try LoopbackPort.free(), try LoopbackPort.free())
        var old = try await node("n1", port: oldPort, binary: previous)   // the previous release creates the schema
        _ = try await node("n2", port: newPort, binary: RTMProcess.binary)   // this release (stopped when the test ends)

        let (talker, talkerEvents) = try await ClusterTests.client("talker", port: oldPort)
        let (listener, listenerEvents) = try await ClusterTests.client("listener", port: newPort)
        try await talker.subscribe("room")
        try await listener.subscribe("room")
        #expect(await talkerEvents.first(within: soon, where: RTMEvent.isPresence(of: "listener", [.remoteJoin])) != nil)
        let oldToNew = try await talker.publish(channel: "room", message: "old to new")
        #expect(await listenerEvents.first(within: soon) { $0.messageEvent?.text == "old to new" }?.messageEvent?.seq == oldToNew)
        _ = try await listener.publish(channel: "room", message: "new to old")
        #expect(await talkerEvents.first(within: soon) { $0.messageEvent?.text == "new to old" } != nil)
        let sent = try await talker.publish(toUser: "listener", message: "direct")
        #expect(sent.stored && sent.receiverOnline)
        #expect(await listenerEvents.first(within: soon) { $0.messageEvent?.channelType == .user && $0.messageEvent?.text == "direct" } != nil)
        #expect(try await listener.whoNow(channel: "room").users == ["listener", "talker"])

        // The upgrade of n1: stopped (it drains), this release started on its port.
        await old.stopped()
        old = try await node("n1", port: oldPort, binary: RTMProcess.binary)
        #expect(await talkerEvents.first(within: .seconds(15)) { $0.link?.currentState == .connected && $0.link?.operation == .reconnected } != nil)
        let afterUpgrade = try await talker.publish(channel: "room", message: "after the upgrade")
        #expect(await listenerEvents.first(within: soon) { $0.messageEvent?.text == "after the upgrade" }?.messageEvent?.seq == afterUpgrade)
        _ = try await listener.publish(channel: "room", message: "back to n1")
        #expect(await talkerEvents.first(within: soon) { $0.messageEvent?.text == "back to n1" } != nil)
        await talker.logout()
        await listener.logout()
    }
}
