import Foundation
import NIOConcurrencyHelpers
import RTMProtocol
import RTMServer
import Testing
@testable import RTMClient

/// A real `rtm listen` process, so that the client can be stopped with SIGSTOP and resumed with
/// SIGCONT as an operating system suspends an app (SPEC T-11).
final class ListenProcess: Sendable {
    let process: Process
    private let lines = NIOLockedValueBox<[String]>([])

    /// The `rtm` binary built next to the test bundle.
    static var binary: URL {
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [bundleDir, bundleDir.deletingLastPathComponent(), URL(fileURLWithPath: ".build/debug")] {
            let candidate = dir.appendingPathComponent("rtm")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: ".build/debug/rtm")
    }

    init(arguments: [String]) throws {
        process = Process()
        process.executableURL = Self.binary
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        let partial = NIOLockedValueBox("")
        let lines = self.lines
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let chunk = String(decoding: handle.availableData, as: UTF8.self)
            let complete = partial.withLockedValue { buffer -> [String] in
                buffer += chunk
                var parts = buffer.components(separatedBy: "\n")
                buffer = parts.removeLast()
                return parts
            }
            if !complete.isEmpty { lines.withLockedValue { $0 += complete } }
        }
        try process.run()
    }

    var output: [String] { lines.withLockedValue { $0 } }

    /// Waits until a printed line contains `text`; returns its index, or nil after `timeout`.
    func waitForLine(containing text: String, after start: Int = 0, within timeout: Duration = soon) async -> Int? {
        let end = ContinuousClock.now + timeout
        repeat {
            let current = output
            if start < current.count, let index = current[start...].firstIndex(where: { $0.contains(text) }) { return index }
            try? await Task.sleep(for: .milliseconds(10))
        } while ContinuousClock.now < end
        return nil
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    func stop() {
        signal(SIGCONT)
        process.terminate()
        process.waitUntilExit()
    }
}

@Suite(.serialized)
struct ProcessTests {
    @Test("T-11: a client process stopped (SIGSTOP) and resumed (SIGCONT) keeps a healthy link, and is back within a round trip after a long stop")
    func suspendedProcess() async throws {
        // The server allows 2 s of silence (0.1 s heartbeat + 1.9 s slack), so a 1 s stop is
        // survivable and a 3.5 s stop is not.
        let harness = try await Harness.start { $0.heartbeatSlack = .milliseconds(1900) }
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let listener = try ListenProcess(arguments: [
            "listen", "room", "--url", "ws://127.0.0.1:\(harness.port)", "--user", "sleeper",
            "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
            "--allow-test-timings", "--heartbeat", "0.1", "--pong-timeout", "0.3", "--presence-timeout", "0.5",
        ])
        defer { listener.stop() }
        let subscribed = await listener.waitForLine(containing: "snapshot")
        try #require(subscribed != nil, "listener never subscribed: \(listener.output)")

        // 1. A short stop: every timer of the client is stale on resume (pong deadline long
        //    past); it must probe again, not declare the link dead.
        listener.signal(SIGSTOP)
        try await Task.sleep(for: .seconds(1))   // the length of the fault, not a wait for a result
        listener.signal(SIGCONT)
        let mark = listener.output.count
        try await bob.publish(channel: "room", message: "after-short-stop")
        #expect(await listener.waitForLine(containing: "after-short-stop", after: mark) != nil)
        #expect(listener.output.allSatisfy { !$0.contains("→ disconnected") }, "\(listener.output)")
        #expect(await bobEvents.matching { $0.presenceEvent?.userId == "sleeper" && $0.presenceEvent?.kind != .remoteJoin }.isEmpty)

        // 2. A long stop: the server has given up on the connection meanwhile. On resume the
        //    client notices at once and is connected again within about one round trip.
        listener.signal(SIGSTOP)
        try await Task.sleep(for: .milliseconds(3500))
        let resumeMark = listener.output.count
        let resumed = ContinuousClock.now
        listener.signal(SIGCONT)
        let back = await listener.waitForLine(containing: "op=reconnected", after: resumeMark)
        #expect(back != nil, "\(listener.output)")
        #expect(ContinuousClock.now - resumed < .seconds(2))
        let mark2 = listener.output.count
        try await bob.publish(channel: "room", message: "after-long-stop")
        #expect(await listener.waitForLine(containing: "after-long-stop", after: mark2) != nil)
        await bob.logout()
        await harness.stop()
    }
}
