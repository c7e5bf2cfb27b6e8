import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import RTMBench

struct Idle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "N logged-in clients held idle with default heartbeats: server memory per connection and CPU.",
        discussion: "Needs --server-pid (the server's memory is read from /proc). A process may hold at most 20,000 sockets here: run several for more.")
    @Option(help: "Server URL.") var url = "ws://127.0.0.1:9600"
    @Option(help: "Clients.") var clients = 15_000
    @Option(help: "Seconds to hold them after all are connected.") var hold: Double = 20
    @Option(help: "Server process id (required).") var serverPid: Int32
    @Option(help: "Client event loops (default: cores).") var threads: Int?
    @Option(help: "Port for the idle floor it runs right after (`rtm bench idle-floor`: NIO WebSocket connections that only answer pings, measured the same way); 0: no floor.")
    var floorPort = 19_601
    @OptionGroup var app: AppArguments
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        FileLimit.raise()
        var options = LoadOptions()
        try options.setURL(url)
        if options.path == "/" { options.path = "/v1" }
        let (appId, certificate) = try app.resolve()
        options.target = .rtm(appId: appId, certificate: certificate)
        options.serverPID = serverPid
        if let threads { options.threads = threads }
        var result = try await IdleRun.run(options, clients: clients, hold: hold, log: BenchOutput.log)
        if floorPort > 0 { result.floor = try await floor(options) }
        try BenchOutput.print(result, text: result.text, json: json)
    }

    /// The same clients, held the same way, against the idle floor in a child process.
    private func floor(_ options: LoadOptions) async throws -> IdleRun.Result.Floor {
        let binary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let server = ServerProcess(arguments: [binary, "bench", "idle-floor", "--port", "\(floorPort)"], port: floorPort)
        defer { server.kill() }
        try await server.start()
        var floor = options
        try floor.setURL("ws://127.0.0.1:\(floorPort)/")
        floor.target = .floor
        floor.serverPID = server.pid
        BenchOutput.log("idle floor: the same \(clients) clients on NIO WebSocket connections that only answer pings")
        let measured = try await IdleRun.run(floor, clients: clients, hold: hold, log: BenchOutput.log)
        return .init(bytesPerConnection: measured.bytesPerConnection, serverCores: measured.serverCores, disconnected: measured.disconnected)
    }
}

struct Storm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "N SDK clients logged in and subscribed; the server is killed (SIGKILL) and restarted: time until all are back.",
        discussion: "Starts its own server (this binary's `serve`, on --port with a temporary data directory) so that it can kill it.")
    @Option(help: "Clients.") var clients = 10_000
    @Option(help: "Port for the server it starts.") var port = 19_600
    @Option(help: "The server's login rate limit (admission control), logins/s; 0 = none.") var loginRate: Double = 2000
    @Option(help: "Give up waiting after this many seconds.") var deadline: Double = 50
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        FileLimit.raise()
        let appId = "0123456789abcdef0123456789abcdef"
        let certificate = DevCredentials.randomHex(32)
        let dataDir = NSTemporaryDirectory() + "rtm-storm-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let binary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let server = ServerProcess(arguments: [binary, "serve", "--port", "\(port)", "--data-dir", dataDir, "--app-id", appId,
                                               "--app-certificate", certificate, "--login-rate", "\(loginRate)",
                                               "--publish-rate", "0", "--log-level", "error"], port: port)
        defer { server.kill() }
        let result = try await StormRun.run(
            host: "127.0.0.1", port: port, appId: appId, certificate: certificate, clients: clients, loginRate: loginRate,
            deadline: deadline, startServer: { try await server.start() }, killServer: { server.kill() },
            log: BenchOutput.log)
        try BenchOutput.print(result, text: result.text, json: json)
        if result.stuck > 0 { throw ExitCode(2) }
    }
}

/// A server child process that can be killed and started again on the same port.
final class ServerProcess: @unchecked Sendable {
    private let arguments: [String]
    private let port: Int
    private var process: Process?

    init(arguments: [String], port: Int) {
        self.arguments = arguments
        self.port = port
    }

    /// Its process id while it runs.
    var pid: Int32? { process.flatMap { $0.isRunning ? $0.processIdentifier : nil } }

    /// Starts it and waits until it accepts connections (`timeout` at most).
    func start(within timeout: Duration = .seconds(10)) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = process
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get() {
                try? await channel.close()
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ValidationError("the server did not start listening on port \(port)")
    }

    /// SIGKILL, and wait for it to be gone.
    func kill() {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Raises this process's open-file limit to its hard limit (many sockets).
enum FileLimit {
    static func raise() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// How the bench commands report: live lines on stderr, the result on stdout (table or JSON).
enum BenchOutput {
    static let log: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }

    static func print(_ result: some Encodable, text: String, json: Bool) throws {
        guard json else { Swift.print(text); return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        Swift.print(String(decoding: try encoder.encode(result), as: UTF8.self))
    }
}
