import Foundation
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// Ctrl-C on the long-running CLI commands: the process logs out (the server and the other
/// members see an intentional leave, not a timeout) and exits 0 (130 if the logout hangs).
///
/// Each command is started the way a script starts a background job: through `sh` with SIGINT
/// ignored (`trap '' INT`, kept across `exec`), as a non-interactive shell does for `cmd &`. A
/// command that relied on the inherited disposition never saw the signal.
@Suite(.realTime, .serialized)
struct InterruptTests {
    /// `rtm <arguments>` against the harness, started with SIGINT ignored.
    static func start(_ arguments: [String], user: String, port: Int) throws -> RTMProcess {
        let command = ([RTMProcess.binary.path] + arguments + [
            "--url", "ws://127.0.0.1:\(port)", "--user", user,
            "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
        ]).map { "'\($0)'" }.joined(separator: " ")
        return try RTMProcess(arguments: ["-c", "trap '' INT; exec \(command)"], binary: URL(fileURLWithPath: "/bin/sh"))
    }

    /// Sends SIGINT and waits (at most `bound`) for the process to end; its exit status, nil if it
    /// is still running.
    static func interrupt(_ process: RTMProcess, within bound: Duration = .seconds(3)) async -> Int32? {
        process.signal(SIGINT)
        _ = await eventually(within: bound, every: .milliseconds(20)) { !process.process.isRunning }
        return process.process.isRunning ? nil : process.process.terminationStatus
    }

    @Test("rtm listen: Ctrl-C logs out (others see a leave, not a timeout) and exits")
    func listen() async throws {
        let harness = try await Harness.start()
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let listener = try Self.start(["listen", "room"], user: "ctrl-c", port: harness.port)
        #expect(await bobEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteJoin && $0.presenceEvent?.userId == "ctrl-c" } != nil,
                "\(listener.output)")
        #expect(await listener.waitForLine(containing: "snapshot") != nil, "\(listener.output)")

        let mark = await bobEvents.mark()
        let status = await Self.interrupt(listener)
        #expect(status == 0 || status == 130, "still running or failed (\(String(describing: status))): \(listener.output)")
        let left = await bobEvents.first(since: mark, within: soon) { $0.presenceEvent?.userId == "ctrl-c" && $0.presenceEvent?.kind != .remoteJoin }
        #expect(left?.presenceEvent?.kind == .remoteLeave, "\(String(describing: left))")
        await bob.logout()
    }

    @Test("rtm lock acquire: Ctrl-C logs out, which releases the lock at once, and exits")
    func lockAcquire() async throws {
        let harness = try await Harness.start()
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.setLock(channel: "room", lockName: "door", ttl: 60)
        try await bob.subscribe("room", options: SubscribeOptions(withPresence: false, withLock: true))
        let holder = try Self.start(["lock", "acquire", "room", "door"], user: "ctrl-c", port: harness.port)
        #expect(await holder.waitForLine(containing: "fencing token") != nil, "\(holder.output)")
        #expect(await bobEvents.first(within: soon, where: LockTests.lock(.lockAcquired)) != nil)

        let mark = await bobEvents.mark()
        let status = await Self.interrupt(holder)
        #expect(status == 0 || status == 130, "still running or failed (\(String(describing: status))): \(holder.output)")
        // Released by the logout, not after the 60 s TTL of a lost connection.
        #expect(await bobEvents.first(since: mark, within: soon, where: LockTests.lock(.lockReleased)) != nil)
        #expect(harness.server.connectionCounters.message == 1)
        await bob.logout()
    }

    @Test("rtm meta watch: Ctrl-C logs out (the server drops the connection) and exits")
    func metaWatch() async throws {
        let harness = try await Harness.start()
        let watcher = try Self.start(["meta", "watch", "--channel", "doc"], user: "ctrl-c", port: harness.port)
        #expect(await watcher.waitForLine(containing: "storage") != nil, "\(watcher.output)")
        #expect(harness.server.connectionCounters.message == 1)

        let status = await Self.interrupt(watcher)
        #expect(status == 0 || status == 130, "still running or failed (\(String(describing: status))): \(watcher.output)")
        #expect(await eventually(within: soon, every: .milliseconds(20)) { harness.server.connectionCounters.message == 0 })
    }
}
