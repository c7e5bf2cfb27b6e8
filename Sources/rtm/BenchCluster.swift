import ArgumentParser
import Foundation
import RTMBench
import RTMLocalPostgres

extension BenchPlacement: ExpressibleByArgument {}

struct Cluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "N nodes over one PostgreSQL: cross-node publishes/s, publish → remote delivery latency, deliveries/s, lost / duplicated / reordered.",
        discussion: """
            Starts a throwaway PostgreSQL (initdb + pg_ctl in a temporary directory, with \
            PostgreSQL's default durability: fsync and synchronous commit on; --postgres URL uses \
            yours instead) and --nodes `rtm serve --postgres URL --node-id nK` processes of this \
            binary on --base-port, --base-port + 1, … (--node URL, repeated, uses running nodes \
            instead), then the load: --channels channels, each with one publisher on node \
            (channel mod N) and --subs subscribers, on the nodes other than the publisher's \
            (--placement remote: every delivery crosses the database to another node) or round \
            all of them (--placement spread). A run with any message lost, duplicated, reordered \
            or undelivered exits 2. --single-node also runs the same load against one node \
            started without PostgreSQL and prints the ratio.

            The README's figures:
              rtm bench cluster --channels 30 --subs 2                  (max cross-node rate)
              rtm bench cluster --channels 30 --subs 2 --rate 1000      (p99 at 1,000 publishes/s)
              rtm bench cluster --channels 1 --subs 1000 --placement spread --single-node   (fan-out)
            """)
    @Option(help: "Nodes to start.") var nodes = 3
    @Option(name: .customLong("node"), help: "A running node's URL, ws://host:port (repeat for each node); the bench then starts none.")
    var nodeURLs: [String] = []
    @Option(help: "PostgreSQL URL for the nodes it starts (default: a throwaway PostgreSQL of its own).") var postgres: String?
    @Flag(help: "The throwaway PostgreSQL without durability (fsync, synchronous_commit and full_page_writes off, as the tests run it).")
    var pgNoSync = false
    @Option(help: "Channels, one publisher each.") var channels = 30
    @Option(help: "Subscribers per channel.") var subs = 2
    @Option(help: "Where subscribers connect: remote (other nodes than their publisher's) or spread (all nodes).") var placement: BenchPlacement = .remote
    @Option(help: "Publishes per second over all publishers; 0 = as fast as the windows allow.") var rate: Double = 0
    @Option(help: "Payload bytes (at least 16).") var size = 100
    @Option(help: "Measured seconds (after the warm-up).") var seconds: Double = 5
    @Option(help: "Warm-up seconds, not measured.") var warmup: Double = 1
    @Option(help: "Client event loops (default: cores).") var threads: Int?
    @Option(help: "Messages in flight per publisher at max rate (default: automatic).") var window: Int?
    @Option(help: "First port of the nodes it starts.") var basePort = 19_700
    @Flag(help: "Also run the same load against one node without PostgreSQL (started on --base-port + nodes) and print the ratio.")
    var singleNode = false
    @Option(help: "App id of running nodes (--node); the nodes it starts get a fresh app.") var appId: String?
    @Option(help: "App certificate of running nodes (--node).") var appCertificate: String?
    @Flag(help: "Print one JSON object (an array with --single-node) instead of the tables.") var json = false

    func run() async throws {
        FileLimit.raise()
        var load = LoadOptions()
        load.groups = channels
        load.subscribersPerGroup = subs
        load.placement = placement
        load.rate = rate
        load.size = size
        load.seconds = seconds
        load.warmup = warmup
        load.window = window
        load.progress = !json
        if let threads { load.threads = threads }
        let log = BenchOutput.log
        let cluster = try await BenchCluster.start(nodeURLs: nodeURLs, count: nodes, postgres: postgres, durable: !pgNoSync,
                                                   basePort: basePort, appId: appId, certificate: appCertificate, log: log)
        defer { cluster.stop() }
        load.target = .rtm(appId: cluster.appId, certificate: cluster.certificate)
        load.nodes = cluster.endpoints
        load.host = cluster.endpoints[0].host
        load.port = cluster.endpoints[0].port
        var results = [try await LoadRun.run(load, log: log)]
        if singleNode {
            let port = basePort + cluster.endpoints.count
            let single = try await cluster.startNode(name: "single", port: port, postgres: nil)
            var alone = load
            alone.nodes = []
            alone.port = port
            results.append(try await LoadRun.run(alone, log: log))
            single.kill()
        }
        try LoadReport.finish(results, json: json, ratio: "cluster/single node")
    }
}

/// The nodes (and database) of a `rtm bench cluster` run: started by the bench, or given.
final class BenchCluster: @unchecked Sendable {
    let appId: String
    let certificate: String
    private(set) var endpoints: [BenchEndpoint] = []
    private var processes: [ServerProcess] = []
    private var directories: [String] = []
    private var database: LocalPostgres?
    private let postgresURL: String?
    private var loginRate: Double = 0
    private var serveArguments: [String] = []

    private init(appId: String, certificate: String, postgresURL: String?, database: LocalPostgres?) {
        self.appId = appId
        self.certificate = certificate
        self.postgresURL = postgresURL
        self.database = database
    }

    /// Uses `nodeURLs` when given; else starts a database (unless `postgres`) and `count` nodes.
    /// `loginRate`: the nodes' login admission rate (0 = none, for load runs).
    static func start(nodeURLs: [String], count: Int, postgres: String?, durable: Bool, basePort: Int, loginRate: Double = 0,
                      appId: String?, certificate: String?, log: @Sendable (String) -> Void) async throws -> BenchCluster {
        if !nodeURLs.isEmpty {
            guard let appId, let certificate else { throw ValidationError("--node needs the nodes' --app-id and --app-certificate") }
            let cluster = BenchCluster(appId: appId, certificate: certificate, postgresURL: nil, database: nil)
            for url in nodeURLs {
                var options = LoadOptions()
                try options.setURL(url)
                cluster.endpoints.append(BenchEndpoint(host: options.host, port: options.port))
            }
            return cluster
        }
        guard count >= 1 else { throw ValidationError("--nodes must be at least 1") }
        var database: LocalPostgres?
        var url = postgres
        if url == nil {
            let server = try await LocalPostgres.start(durable: durable)
            database = server
            url = server.url + "?sslmode=disable"
            log("started PostgreSQL on port \(server.port) (\(durable ? "fsync and synchronous commit on" : "no fsync, no synchronous commit"))")
        }
        let cluster = BenchCluster(appId: "0123456789abcdef0123456789abcdef", certificate: DevCredentials.randomHex(32),
                                   postgresURL: url, database: database)
        cluster.loginRate = loginRate
        try await cluster.startNodes(Array(repeating: url, count: count), basePort: basePort, log: log)
        return cluster
    }

    /// Starts `urls.count` nodes, node k on `basePort + k` reaching PostgreSQL at `urls[k]`
    /// (each through its own address: `rtm bench cluster-outage` cuts one node off).
    /// `serveArguments`: added to every node's `rtm serve` command line.
    static func start(postgresURLs urls: [String], basePort: Int, serveArguments: [String] = [],
                      log: @Sendable (String) -> Void) async throws -> BenchCluster {
        let cluster = BenchCluster(appId: "0123456789abcdef0123456789abcdef", certificate: DevCredentials.randomHex(32),
                                   postgresURL: nil, database: nil)
        cluster.serveArguments = serveArguments
        try await cluster.startNodes(urls, basePort: basePort, log: log)
        return cluster
    }

    /// Node k (`nk+1`) on `basePort + k`, reaching PostgreSQL at `urls[k]`; on a failure, stops
    /// what it started.
    private func startNodes(_ urls: [String?], basePort: Int, log: @Sendable (String) -> Void) async throws {
        do {
            for (k, url) in urls.enumerated() {
                _ = try await startNode(name: "n\(k + 1)", port: basePort + k, postgres: url)
                endpoints.append(BenchEndpoint(host: "127.0.0.1", port: basePort + k))
            }
        } catch {
            stop()
            throw error
        }
        log("started \(urls.count) nodes on ports \(basePort)–\(basePort + urls.count - 1)")
    }

    /// Starts one `rtm serve` of this binary (cluster node when `postgres` is set) and waits
    /// until it listens.
    func startNode(name: String, port: Int, postgres: String?) async throws -> ServerProcess {
        let directory = NSTemporaryDirectory() + "rtm-bench-\(name)-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        directories.append(directory)
        let binary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var arguments = [binary, "serve", "--port", "\(port)", "--data-dir", directory, "--app-id", appId, "--app-certificate", certificate,
                         "--publish-rate", "0", "--login-rate", "\(loginRate)", "--log-level", "error"]
        if let postgres { arguments += ["--postgres", postgres, "--node-id", name] }
        arguments += serveArguments
        let process = ServerProcess(arguments: arguments, port: port)
        processes.append(process)
        try await process.start(within: .seconds(30))
        return process
    }

    /// The started node processes, in order (`kill -9` scenarios).
    var nodeProcesses: [ServerProcess] { processes }

    /// Stops what it started.
    func stop() {
        for process in processes { process.kill() }
        processes = []
        database?.destroy()
        database = nil
        for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        directories = []
    }
}
