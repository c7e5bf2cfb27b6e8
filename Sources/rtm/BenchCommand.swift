import ArgumentParser
import Foundation
import RTMAuth
import RTMBench
import RTMServer

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the server: fan-out, many small channels, idle connections, reconnect storm, a cluster of nodes.",
        discussion: """
            Every scenario ends by itself (60 s at most by default) and prints a table; --json \
            prints one JSON object instead. By default the generator sends what real clients \
            send: every frame masked with its own random key, one request per frame; a shortcut \
            (--unmasked-shortcut, --no-msg-id) is opt-in and named in every figure printed. Run the server with its per-client rate limits raised \
            for load (rtm serve --publish-rate 0 --login-rate 0), built for deployment: \
            RTM_FAST=1 swift build -c release -Xswiftc -enforce-exclusivity=unchecked.

            Benchmarks/compare.sh runs the whole comparison with the bare transport limit \
            (the reference floor server) and nats-server, and prints the three-way table.
            """,
        subcommands: [Fanout.self, Pairs.self, SDK.self, Overload.self, Idle.self, IdleFloor.self, Storm.self, Soak.self, Cluster.self, ClusterFailover.self, ClusterOutage.self,
                      FailoverClientsCommand.self, BenchStore.self])
}

/// Options shared by the load scenarios.
struct LoadArguments: ParsableArguments {
    @Option(help: "Server URL.") var url = "ws://127.0.0.1:9600"
    @Option(help: "Protocol of --url: rtm (this server) or floor (the reference floor server's SUB/PUB).") var `protocol` = "rtm"
    @Option(help: "Also run the same load against a floor-protocol server at this URL, back to back, and print the ratio.") var baseline: String?
    @Option(help: "Payload bytes (at least 16).") var size = 100
    @Option(help: "Messages per second over all publishers; 0 = as fast as the window allows.") var rate: Double = 0
    @Option(help: "Measured seconds (after the warm-up).") var seconds: Double = 5
    @Option(help: "Warm-up seconds, not measured.") var warmup: Double = 1
    @Option(help: "Client event loops (default: cores).") var threads: Int?
    @Option(help: "Max rate: messages in flight per publisher (published, not yet at every subscriber); default 4096, fewer when more than 65,536 messages or ≈ 4 M deliveries would be in flight.") var window: Int?
    @Option(help: "Server process id, to report its CPU.") var serverPid: Int32?
    @Option(help: "Server process id of the baseline server.") var baselinePid: Int32?
    @Flag(help: "Print one JSON object instead of the table.") var json = false
    @Flag(help: "Shortcut (labelled in the output): publish and send user messages without client message ids, which the SDK always sends.") var noMsgId = false
    @Flag(help: "Shortcut (labelled in the output): mask every frame with the zero key, which no real client does (the default is a random key per frame, RFC 6455 §5.3).")
    var unmaskedShortcut = false
    @Flag(help: "Publish JSON `publish` requests (text, one per frame, masked), as browsers and other-language clients do, instead of binary publishes.")
    var jsonPublish = false
    @Option(help: "App id (default: the data directory's development app).") var appId: String?
    @Option(help: "App certificate (default: the data directory's development app).") var appCertificate: String?
    @Option(help: "Data directory holding the development app.") var dataDir = "rtm-data"
    @Flag(help: "Log every client in with a capability token too (granting subscribe and publish on bench-*), to measure access control's cost.")
    var capability = false

    func options(groups: Int, subscribersPerGroup: Int) throws -> LoadOptions {
        var options = LoadOptions()
        try options.setURL(url)
        if `protocol` == "floor" {
            options.target = .floor
        } else {
            let (appId, certificate) = try Credentials.resolve(appId: appId, appCertificate: appCertificate, dataDir: dataDir)
            guard !capability || certificate != nil else { throw ValidationError("--capability needs the app certificate (tokens are signed with it)") }
            options.target = .rtm(appId: appId, certificate: certificate,
                                  capabilities: capability ? Capabilities(channels: ["bench-*": [.subscribe, .publish]]) : nil)
            if options.path == "/" { options.path = "/v1" }
        }
        options.groups = groups
        options.subscribersPerGroup = subscribersPerGroup
        options.size = size
        options.rate = rate
        options.seconds = seconds
        options.warmup = warmup
        if let threads { options.threads = threads }
        options.window = window
        options.serverPID = serverPid
        options.progress = !json
        options.msgIds = !noMsgId
        options.unmaskedShortcut = unmaskedShortcut
        options.jsonPublish = jsonPublish
        if jsonPublish && `protocol` != "rtm" { throw ValidationError("--json-publish needs this server's protocol") }
        return options
    }

    /// `storeFloor`: user messages, followed by the store floor with its database in this directory.
    func run(groups: Int, subscribersPerGroup: Int, userMessages: Bool = false, storeFloor: String? = nil) async throws {
        FileLimit.raise()
        let log = BenchOutput.log
        var ours = try options(groups: groups, subscribersPerGroup: subscribersPerGroup)
        ours.userMessages = userMessages
        let commits = "rtm_user_message_store_commits_total"
        let commitsBefore = storeFloor == nil ? nil : try? await MetricsScrape.counter(commits, host: ours.host, port: ours.port)
        var results = [try await LoadRun.run(ours, log: log)]
        if let directory = storeFloor {
            let commitsAfter = try? await MetricsScrape.counter(commits, host: ours.host, port: ours.port)
            results[0].storeFloor = Self.storeFloor(after: results[0], commits: (commitsAfter ?? 0) - (commitsBefore ?? 0),
                                                    options: ours, directory: directory, log: log)
        }
        if let baseline {
            var floor = ours
            try floor.setURL(baseline)
            floor.target = .floor
            floor.serverPID = baselinePid
            floor.jsonPublish = false   // the floor has one format: compare with --json-publish off
            results.append(try await LoadRun.run(floor, log: log))
        }
        try LoadReport.finish(results, json: json, ratio: "rtm/floor")
    }
}

extension LoadArguments {
    /// The store floor of a user-message run: its messages inserted and deleted by SQLite under
    /// GRDB directly (`UserMessageStoreFloor`), in transactions of the server's average commit
    /// over the run; nil, with a line saying why, when that is unknown or the floor fails.
    static func storeFloor(after result: LoadResult, commits: Double, options: LoadOptions, directory: String,
                           log: @Sendable (String) -> Void) -> StoreFloorFigures? {
        let rows = Int(result.published)
        guard commits >= 1, rows > 0 else {
            log("store floor: not run (the server's /metrics gave no rtm_user_message_store_commits_total for the run)")
            return nil
        }
        let batch = max(1, Int((Double(rows) / commits).rounded()))
        log("store floor: \(rows) rows in transactions of \(batch), in \(directory)")
        do {
            let floor = try UserMessageStoreFloor.run(directory: directory, rows: rows, batch: batch, pairs: options.groups, size: options.payloadSize)
            return StoreFloorFigures(rows: rows, batch: batch, rowsPerSecond: floor.rowsPerSecond, directory: directory)
        } catch {
            log("store floor: failed: \(error)")
            return nil
        }
    }
}

/// How the load scenarios end.
enum LoadReport {
    /// Prints the runs (tables, or one JSON value) and, for two, the first's figures over the
    /// second's (`ratio` names them); exits 2 when any run lost, duplicated, reordered or left
    /// a message undelivered, or had a subscriber cut.
    static func finish(_ results: [LoadResult], json: Bool, ratio: String) throws {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let data = results.count == 1 ? try encoder.encode(results[0]) : try encoder.encode(results)
            print(String(decoding: data, as: UTF8.self))
        } else {
            for result in results { print(result.text) }
            if results.count == 2, results[1].deliveriesPerSecond > 0 {
                print(String(format: "ratio \(ratio): deliveries %.2f, p50 %.2f, p99 %.2f",
                             results[0].deliveriesPerSecond / results[1].deliveriesPerSecond,
                             results[0].p50Micros / max(1, results[1].p50Micros), results[0].p99Micros / max(1, results[1].p99Micros)))
            }
        }
        let broken = results.filter { $0.lost + $0.outOfOrder + $0.duplicated + $0.undelivered > 0 || $0.disconnected > 0 }
        if !broken.isEmpty { throw ExitCode(2) }   // loss, duplicates, reordering or drops: a failed run
    }
}

struct Fanout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One publisher, one channel, N subscribers: deliveries/s, publish→deliver latency, loss and order.")
    @OptionGroup var load: LoadArguments
    @Option(help: "Subscribers.") var subs = 100

    func run() async throws { try await load.run(groups: 1, subscribersPerGroup: subs) }
}

struct Pairs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "N publisher/subscriber pairs on N channels (many small channels), or N pairs of users sending user messages (--users); --rate is the total.")
    @OptionGroup var load: LoadArguments
    @Option(help: "Pairs.") var pairs = 100
    @Flag(help: "User-to-user messages (sendUser: stored durably, then delivered and acknowledged) instead of channel messages.")
    var users = false
    @Option(help: "--users: directory for the store floor's database, run after the load (default: --data-dir, the server's disk when it serves from the same one).")
    var storeFloorDir: String?
    @Flag(help: "--users: no store floor.") var noStoreFloor = false

    func run() async throws {
        if users && (load.baseline != nil || load.protocol != "rtm") {
            throw ValidationError("--users needs this server's protocol (the floor server has no user messages)")
        }
        try await load.run(groups: pairs, subscribersPerGroup: 1, userMessages: users,
                           storeFloor: users && !noStoreFloor ? storeFloorDir ?? load.dataDir : nil)
    }
}

struct SDK: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sdk",
        abstract: "One SDK publisher (RTMClient.publish), N SDK subscribers: the Swift SDK's own send and receive paths.",
        discussion: "Deliveries/s, publish → delegate latency, lost / duplicated / reordered, all through the SDK's public API. Each publish is one awaited RTMClient.publish call; --window of them run at once.")
    @Option(help: "Server URL (ws://host:port).") var url = "ws://127.0.0.1:9600"
    @Option(help: "Subscribers.") var subs = 10
    @Option(help: "Publishes per second; 0 = as fast as the window allows.") var rate: Double = 0
    @Option(help: "Publishes awaiting their acknowledgement at most.") var window = 256
    @Option(help: "Payload bytes (at least 16).") var size = 100
    @Option(help: "Measured seconds (after the warm-up).") var seconds: Double = 5
    @Option(help: "Warm-up seconds, not measured.") var warmup: Double = 1
    @Option(help: "Server process id, to report its CPU.") var serverPid: Int32?
    @Option(help: "App id (default: the data directory's development app).") var appId: String?
    @Option(help: "App certificate (default: the data directory's development app).") var appCertificate: String?
    @Option(help: "Data directory holding the development app.") var dataDir = "rtm-data"
    @Flag(help: "Print one JSON object instead of the table.") var json = false

    func run() async throws {
        FileLimit.raise()
        var load = LoadOptions()
        try load.setURL(url)
        let (appId, certificate) = try Credentials.resolve(appId: appId, appCertificate: appCertificate, dataDir: dataDir)
        var options = SDKRun.Options()
        options.host = load.host
        options.port = load.port
        options.appId = appId
        options.certificate = certificate
        options.subscribers = subs
        options.rate = rate
        options.window = max(1, window)
        options.size = size
        options.seconds = seconds
        options.warmup = warmup
        options.serverPID = serverPid
        options.progress = !json
        let result = try await SDKRun.run(options, log: BenchOutput.log)
        try BenchOutput.print(result, text: result.text, json: json)
        if result.lost + result.duplicated + result.reordered > 0 { throw ExitCode(2) }
    }
}
