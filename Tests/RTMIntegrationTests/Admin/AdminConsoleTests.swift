import Foundation
import RTMServer
import Testing
@testable import RTMClient

/// Chromium on the PATH.
private let chromium: String? = ["chromium", "chromium-browser", "google-chrome"].lazy.compactMap { name in
    (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}.first

/// The admin web console in a real headless browser. Runs when Chromium and the Python
/// DevTools client (`websocket-client`) are installed, and always in CI (`RTM_CONSOLE_TEST=1`,
/// where a missing one is a failure); elsewhere it is skipped, with the reason.
@Suite("Admin console", .realTime, .serialized)
struct AdminConsoleTests {
    @Test("console: loads in headless Chromium, takes the key, shows a published message and a connected user, draws the chart",
          .enabled(if: runsWhen(chromium != nil && pythonHas(["websocket"]), orRequiredBy: "RTM_CONSOLE_TEST"),
                   "needs Chromium and the Python package websocket-client (.ci/run installs both)"))
    func consoleInBrowser() async throws {
        let admin = try await AdminHarness.start()
        let (alice, events) = try await Harness.client("alice", port: admin.port)
        let (bob, _) = try await Harness.client("bob", port: admin.port)
        defer { Task { await alice.logout(); await bob.logout() } }
        try await alice.subscribe("room")
        try await bob.subscribe("lobby")
        try await alice.setState(channel: "room", ["mood": "on call"])
        for text in ["hello from ops", "deploy at 14:00"] {
            #expect(try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": text, "publisher": "ops"]).status == 200)
        }
        _ = try await alice.publish(channel: "room", message: "roger")
        let screenshot = ProcessInfo.processInfo.environment["RTM_CONSOLE_SCREENSHOT"]
            ?? "\(packageRoot)/.build/console-test.png"
        let python = try #require(python3)
        let result = try await runProgram(python, [
            "\(packageRoot)/Tests/console/check_console.py", "--url", "\(admin.baseURL)/console", "--key", AdminHarness.key,
            "--expect", "hello from ops", "--expect", "roger", "--expect", "alice", "--expect", "bob",
            "--channel", "room", "--publish", "typed in the console", "--screenshot", screenshot,
        ])
        #expect(result.status == 0, "\(result.output)")
        // The console's publish form reached the channel's subscribers.
        #expect(await events.first(within: soon) { $0.messageEvent?.text == "typed in the console" } != nil)
        let attributes = try FileManager.default.attributesOfItem(atPath: screenshot)
        #expect((attributes[.size] as? Int ?? 0) > 10_000, "screenshot \(screenshot) is missing or empty")
    }

    @Test("console: the channel list comes a page at a time (50 rows), with its count, and 'next' shows the rest",
          .enabled(if: runsWhen(chromium != nil && pythonHas(["websocket"]), orRequiredBy: "RTM_CONSOLE_TEST"),
                   "needs Chromium and the Python package websocket-client (.ci/run installs both)"))
    func consolePages() async throws {
        let admin = try await AdminHarness.start()
        let (alice, _) = try await Harness.client("alice", port: admin.port)
        let (bob, _) = try await Harness.client("bob", port: admin.port)
        defer { Task { await alice.logout(); await bob.logout() } }
        for i in 0..<60 { _ = try await (i < 30 ? alice : bob).subscribe(String(format: "ch%02d", i)) }
        let python = try #require(python3)
        let result = try await runProgram(python, [
            "\(packageRoot)/Tests/console/check_console.py", "--url", "\(admin.baseURL)/console", "--key", AdminHarness.key,
            "--expect", "1–50 of 60", "--expect", "ch49", "--next-page", "channels", "--then-expect", "51–60 of 60",
            "--then-expect", "ch59", "--screenshot", "\(packageRoot)/.build/console-pages.png",
        ])
        #expect(result.status == 0, "\(result.output)")
    }
}
