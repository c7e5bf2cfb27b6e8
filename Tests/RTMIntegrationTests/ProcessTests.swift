import Foundation
import NIOConcurrencyHelpers
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// A real `rtm` process (a listener to stop with SIGSTOP as an operating system suspends an app,
/// SPEC T-11; a server to kill with SIGKILL, SPEC M-1), with its output collected line by line.
final class RTMProcess: Sendable {
    let process: Process
    private let lines = NIOLockedValueBox<[String]>([])
    /// Set once its output has ended (the pipe's end was read).
    private let outputEnded = NIOLockedValueBox(false)
    /// Set once the process has exited.
    private let hasExited = NIOLockedValueBox(false)

    /// The `rtm` binary under test: `RTM_BINARY` when set (CI runs the process tests a second
    /// time against the release build users run), else the one built next to the test bundle.
    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["RTM_BINARY"], !path.isEmpty { return URL(fileURLWithPath: path) }
        return built("rtm")
    }

    /// An executable of this package built next to the test bundle.
    static func built(_ name: String) -> URL {
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [bundleDir, bundleDir.deletingLastPathComponent(), URL(fileURLWithPath: ".build/debug")] {
            let candidate = dir.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: ".build/debug/\(name)")
    }

    /// Runs `rtm` with `arguments`; with `user`, as that user through `runuser` (the test
    /// runs as root then), from `binary`, in `directory` (nil: the test's own).
    init(arguments: [String], user: String? = nil, binary: URL = RTMProcess.binary, input: Pipe? = nil, directory: URL? = nil,
         environment: [String: String] = [:]) throws {
        process = Process()
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        if let input { process.standardInput = input }
        if let directory { process.currentDirectoryURL = directory }
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--", binary.path] + arguments
        } else {
            process.executableURL = binary
            process.arguments = arguments
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        // Bytes, not text, until a line is complete: a write can end inside a character ("…").
        let partial = NIOLockedValueBox(Data())
        let lines = self.lines
        let outputEnded = self.outputEnded
        // Read by a thread of its own with blocking reads, not by `readabilityHandler`: that
        // one is a libdispatch read source, and on Linux tearing it down races the descriptor's
        // close and can crash the whole test process in `_dispatch_event_loop_drain` (a dangling
        // epoll registration). A blocking read registers nothing; the pipe's end ends the loop.
        let reading = pipe.fileHandleForReading
        let reader = Thread {
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(reading.fileDescriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                let complete = partial.withLockedValue { buffer -> [String] in
                    buffer.append(contentsOf: chunk[..<count])
                    guard let end = buffer.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
                    let text = String(decoding: buffer[..<end], as: UTF8.self)
                    buffer = Data(buffer[buffer.index(after: end)...])
                    return text.components(separatedBy: "\n")
                }
                if !complete.isEmpty { lines.withLockedValue { $0 += complete } }
            }
            let last = partial.withLockedValue { buffer in
                defer { buffer = Data() }
                return buffer
            }
            if !last.isEmpty { lines.withLockedValue { $0.append(String(decoding: last, as: UTF8.self)) } }
            outputEnded.withLockedValue { $0 = true }
            try? reading.close()
        }
        let hasExited = self.hasExited
        process.terminationHandler = { _ in
            hasExited.withLockedValue { $0 = true }
        }
        try process.run()
        reader.start()
        TestResources.register { [self] in await stopped() }   // stopped when the test ends, whatever it threw
    }

    var output: [String] { lines.withLockedValue { $0 } }

    /// Waits for the process to exit and for the whole of its output to be read (the output
    /// is read apart from the exit, so `output` right after `process.waitUntilExit()` could
    /// miss its last lines). Polls (the exit has no awaitable event in Foundation's `Process`)
    /// instead of blocking a thread of the Swift concurrency pool. A process still running
    /// after `timeout` fails the test and is killed, so that `terminationStatus` can be read.
    func waitUntilExit(within timeout: Duration = .seconds(120)) async {
        if await !eventually(within: timeout, { hasExited.withLockedValue { $0 } }) {
            Issue.record("the process did not exit within \(timeout); killed. Last output:\n\(output.suffix(20).joined(separator: "\n"))")
            signal(SIGKILL)
            _ = await eventually(within: .seconds(30)) { hasExited.withLockedValue { $0 } }
        }
        _ = await eventually(within: .seconds(5)) { outputEnded.withLockedValue { $0 } }
    }

    /// Waits until a printed line contains `text`; returns its index, or nil after `timeout`.
    func waitForLine(containing text: String, after start: Int = 0, within timeout: Duration = soon) async -> Int? {
        await firstValue(within: timeout) {
            let current = output
            return start < current.count ? current[start...].firstIndex(where: { $0.contains(text) }) : nil
        }
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Sends SIGSTOP and returns once the process is stopped (`T` in /proc/PID/stat): the signal
    /// is only queued when kill(2) returns, and a thread on another core runs on until then.
    /// False if it is not stopped within `timeout`.
    func pause(within timeout: Duration = .seconds(5)) async -> Bool {
        signal(SIGSTOP)
        // Polling the kernel's view of the process: there is no event for it.
        return await eventually(within: timeout, every: .milliseconds(2)) {
            // The state follows the command name's closing parenthesis: "PID (comm) S …".
            guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
        }
    }

    /// Stops it (SIGTERM, after SIGCONT in case it is paused) and waits for its exit and the end
    /// of its output, polling instead of holding a thread of the Swift concurrency pool; one
    /// still running 30 s later fails the test and is killed. The test's `TestResources` scope
    /// calls it when the test ends.
    func stopped() async {
        if process.isRunning {
            signal(SIGCONT)
            process.terminate()
        }
        await waitUntilExit(within: .seconds(30))
    }

    /// Kills it at once (SIGKILL): no shutdown code runs.
    func kill9() async {
        signal(SIGKILL)
        await waitUntilExit()
    }


    /// `rtm serve` on `port` with the test app and a data directory.
    static func server(port: Int, dataDir: String, extraArguments: [String] = []) throws -> RTMProcess {
        let server = try RTMProcess(arguments: [
            "serve", "--port", "\(port)", "--data-dir", dataDir, "--app-id", Harness.appId,
            "--app-certificate", Harness.certificate, "--heartbeat-slack", "0.2", "--publish-rate", "0",
        ] + extraArguments)
        return server
    }
}

/// `rtm serve` on a data directory that outlives the process: killed with SIGKILL and started
/// again on the same port and directory (SPEC M-1).
final class DurableServer: @unchecked Sendable {
    let port: Int
    let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-kill9-\(UUID().uuidString)").path
    private(set) var process: RTMProcess
    /// More `rtm serve` options, at every start.
    private let extraArguments: [String]

    /// Started and listening; stopped (its directory removed) when the test ends.
    init(extraArguments: [String] = []) async throws {
        port = try LoopbackPort.free()
        self.extraArguments = extraArguments
        process = try RTMProcess.server(port: port, dataDir: dataDir, extraArguments: extraArguments)
        TestResources.register { [self] in await stopped() }
        try await listening()
    }

    /// Kills it at once (no shutdown code runs) and starts it again on the same directory,
    /// `outage` later.
    func killAndRestart(outage: Duration = .zero) async throws {
        await process.kill9()
        if outage > .zero { try await Task.sleep(for: outage) }   // the length of the fault, not a wait for a result
        process = try RTMProcess.server(port: port, dataDir: dataDir, extraArguments: extraArguments)
        try await listening()
    }

    /// Stops it and removes its directory.
    func stopped() async {
        await process.stopped()
        try? FileManager.default.removeItem(atPath: dataDir)
    }

    private func listening() async throws {
        let line = await process.waitForLine(containing: "listening", within: processStart)
        try #require(line != nil, "\(process.output)")
    }
}

@Suite(.realTime, .serialized)
struct ProcessTests {
    @Test("T-11: a client process stopped (SIGSTOP) and resumed (SIGCONT) keeps a healthy link, and is back within a round trip after a long stop")
    func suspendedProcess() async throws {
        // The server allows 2 s of silence (0.1 s heartbeat + 1.9 s slack), so a 1 s stop is
        // survivable and a 3.5 s stop is not.
        let harness = try await Harness.start { $0.heartbeatSlack = .milliseconds(1900) }
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let listener = try RTMProcess(arguments: [
            "listen", "room", "--url", "ws://127.0.0.1:\(harness.port)", "--user", "sleeper",
            "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
            "--allow-test-timings", "--heartbeat", "0.1", "--pong-timeout", "0.3", "--presence-timeout", "0.5",
        ])
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
        try await Task.sleep(for: .milliseconds(3500))   // the length of the fault, not a wait for a result
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
    }

    @Test("K-1/K-2, the server and SDK clients run as an ordinary user (no socket option or port that needs privileges)")
    func unprivileged() async throws {
        guard let ordinary = try OrdinaryUser.prepare() else { return }
        defer { ordinary.remove() }
        let (user, binary) = (ordinary.user, ordinary.binary)
        // A data directory that the ordinary user can write.
        let data = ordinary.dir.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: data.path)
        let port = try LoopbackPort.free()
        let server = try RTMProcess(arguments: [
            "serve", "--port", "\(port)", "--data-dir", data.path, "--app-id", Harness.appId,
            "--app-certificate", Harness.certificate,
        ], user: user, binary: binary)
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "server: \(server.output)")
        let client = ["--url", "ws://127.0.0.1:\(port)", "--app-id", Harness.appId, "--app-certificate", Harness.certificate]
        let listener = try RTMProcess(arguments: ["listen", "room", "--user", "reader"] + client, user: user, binary: binary)
        try #require(await listener.waitForLine(containing: "snapshot") != nil, "listener never logged in: \(listener.output)")
        let publisher = try RTMProcess(arguments: ["pub", "room", "hello from an ordinary user", "--user", "writer"] + client,
                                       user: user, binary: binary)
        await publisher.waitUntilExit()
        #expect(publisher.process.terminationStatus == 0, "\(publisher.output)")
        #expect(await listener.waitForLine(containing: "hello from an ordinary user") != nil, "\(listener.output)")
        // Really unprivileged: the server process's effective uid is not root's.
        if user != nil {
            let children = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/task/\(server.process.processIdentifier)/children", encoding: .utf8)
            let pid = try #require(children.split(separator: " ").first)
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            let uid = status.split(separator: "\n").first { $0.hasPrefix("Uid:") }
            #expect(uid?.split(separator: "\t").dropFirst().first == "65534", "\(uid ?? "no Uid line")")
        }
    }
}

/// Running `rtm` as an ordinary user: root (CI) runs it through `runuser -u nobody`, an ordinary
/// user as itself; from a copy of the binary in a fresh directory everybody can read and search.
struct OrdinaryUser {
    /// The user to pass to `RTMProcess` (nil: the test already runs as an ordinary user).
    let user: String?
    /// The fresh directory (mode 0755).
    let dir: URL
    /// The copy of `rtm` in it.
    let binary: URL

    /// Nil, with the test failed, when running as root without `runuser`.
    static func prepare() throws -> OrdinaryUser? {
        let user: String? = getuid() == 0 ? "nobody" : nil
        if user != nil, !FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") {
            Issue.record("running as root without runuser: cannot prove the unprivileged case")
            return nil
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-unprivileged-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let binary = dir.appendingPathComponent("rtm")
        try FileManager.default.copyItem(at: RTMProcess.binary, to: binary)
        for path in [dir.path, binary.path] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        return OrdinaryUser(user: user, dir: dir, binary: binary)
    }

    /// Removes the directory (made writable again first, where a test locked part of it).
    func remove() {
        if let items = FileManager.default.enumerator(atPath: dir.path) {
            for case let item as String in items {
                try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.appendingPathComponent(item).path)
            }
        }
        try? FileManager.default.removeItem(at: dir)
    }
}
