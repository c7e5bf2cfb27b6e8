import Foundation
import Logging
import NIOConcurrencyHelpers
import RTMClient
import RTMServer
import RTMTestSupport
import Testing
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real server with its admin listener on 127.0.0.1:0, a recording logger, and an HTTP
/// client for the admin API that records every exchange (for the OpenAPI check).
struct AdminHarness {
    static let key = "test-admin-key-0123456789"

    let harness: Harness
    let adminPort: Int
    let logs: LogRecorder
    let exchanges: ExchangeRecorder

    var port: Int { harness.port }
    var baseURL: String { "http://127.0.0.1:\(adminPort)" }

    static func start(_ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> AdminHarness {
        var config = Harness.serverConfig()
        config.adminKey = key
        config.adminPort = 0
        configure(&config)
        let logs = LogRecorder()
        let server = try RTMServer(configuration: config, logger: Logger(label: "test.admin") { _ in logs.handler() })
        let port = try await server.start()
        TestResources.register { try? await server.shutdown() }   // stopped when the test ends, whatever it threw
        let adminPort = try #require(server.adminPort)
        return AdminHarness(harness: Harness(server: server, port: port), adminPort: adminPort, logs: logs, exchanges: ExchangeRecorder())
    }

    func stop() async { await harness.stop() }

    /// alice and bob, logged in and both in `channel`, with their events.
    func aliceAndBob(in channel: String) async throws -> (RTMClient, AsyncRecorder<RTMEvent>, RTMClient, AsyncRecorder<RTMEvent>) {
        let (alice, aliceEvents) = try await Harness.client("alice", port: port)
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        try await alice.subscribe(channel)
        try await bob.subscribe(channel)
        return (alice, aliceEvents, bob, bobEvents)
    }

    /// One call; returns the status and the body (JSON decoded when it is JSON).
    @discardableResult
    func call(_ method: String, _ path: String, body: [String: Any]? = nil, key: String? = AdminHarness.key) async throws -> (status: Int, json: [String: Any]) {
        // Through the server's own NIO HTTP client, not URLSession: on Linux URLSession watches
        // curl's sockets with libdispatch sources whose teardown races the socket's close and
        // can crash the whole test process.
        let target = try #require(WebhookHTTPClient.Target(baseURL + path))
        let client = try WebhookHTTPClient(target: target, timeout: .seconds(30), group: MultiThreadedEventLoopGroup.singleton,
                                           maxResponseBytes: 64 << 20)
        let requestBody = try body.map { try JSONSerialization.data(withJSONObject: $0) }
        let reply = try await client.send(HTTPMethod(rawValue: method), body: requestBody,
                                          headers: key.map { [("Authorization", "Bearer \($0)")] } ?? [], userAgent: "rtm-tests").get()
        let data = Data(reply.body.readableBytesView)
        let status = Int(reply.status.code)
        let contentType = reply.headers.first(name: "Content-Type") ?? ""
        exchanges.append(["method": method, "path": path, "status": status, "contentType": contentType,
                          "body": String(decoding: data, as: UTF8.self),
                          "requestBody": requestBody.map { String(decoding: $0, as: UTF8.self) } ?? NSNull()])
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return (status, json)
    }
}

/// Every exchange with the admin API, as `openapi/check_exchanges.py` reads them.
final class ExchangeRecorder: Sendable {
    private let items = NIOLockedValueBox<[[String: any Sendable]]>([])

    func append(_ exchange: [String: any Sendable]) { items.withLockedValue { $0.append(exchange) } }

    /// Writes them as JSON to `path`.
    func write(to path: String) throws {
        let all = items.withLockedValue { $0 }
        try JSONSerialization.data(withJSONObject: all, options: [.prettyPrinted]).write(to: URL(fileURLWithPath: path))
    }
}

/// Log lines a server wrote (level and message), for tests that check what is logged.
final class LogRecorder: Sendable {
    let lines = NIOLockedValueBox<[(Logger.Level, String)]>([])

    func handler() -> RecordingLogHandler { RecordingLogHandler(recorder: self) }

    func contains(_ level: Logger.Level, _ fragment: String) -> Bool {
        lines.withLockedValue { $0.contains { $0.0 == level && $0.1.contains(fragment) } }
    }
}

struct RecordingLogHandler: LogHandler {
    let recorder: LogRecorder
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let text = "\(event.message) " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        recorder.lines.withLockedValue { $0.append((event.level, text)) }
    }
}

/// Runs a program to its end; returns its exit status and its output (stdout and stderr).
/// The wait holds a thread of its own, not one of the Swift concurrency pool's.
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
    try await onOwnThread { try runProgramBlocking(executable, arguments, environment: environment) }
}

/// `runProgram` holding the calling thread: for a test trait's condition, which is not async.
func runProgramBlocking(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// The path of the program `name` on the PATH, if any.
func program(named name: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// `python3` on the PATH.
var python3: String? { program(named: "python3") }

/// Whether `python3` can import every module of `modules` (the checkers the admin tests run
/// need packages that only `.ci/run` installs).
func pythonHas(_ modules: [String]) -> Bool {
    guard let python3, let result = try? runProgramBlocking(python3, ["-c", "import " + modules.joined(separator: ", ")]) else { return false }
    return result.status == 0
}

/// Whether a test that needs something outside the Swift toolchain runs: when `available`, or
/// when CI requires it with `variable=1` (then a missing piece is a failure, not a skip).
func runsWhen(_ available: @autoclosure () -> Bool, orRequiredBy variable: String) -> Bool {
    ProcessInfo.processInfo.environment[variable] == "1" || available()
}

/// The package's root directory (the tests run from it; found from this file otherwise).
var packageRoot: String {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
    }
    return FileManager.default.currentDirectoryPath
}
