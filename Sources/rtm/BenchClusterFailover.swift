import ArgumentParser
import Foundation
import RTMBench

struct ClusterFailover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster-failover",
        abstract: "Idle clients over N cluster nodes, one node killed (SIGKILL): time until its clients are back on the others and resubscribed.",
        discussion: """
            Starts a throwaway PostgreSQL and --nodes nodes (as `rtm bench cluster`; the nodes \
            keep their login admission control, --login-rate), then --workers generator \
            processes of this binary holding --clients clients in all (a process may hold about \
            20,000 sockets here), client i of each on node i mod N. Each client knows every node \
            and behaves as the SDK with several endpoints: when its link dies it tries the next \
            node after the SDK's jittered backoff (2 s × [0.5, 1], doubling), logs in and \
            subscribes again. After --hold seconds idle the last node is killed with SIGKILL; \
            the run reports when its clients were all back and resubscribed (p50 / p99 / max \
            from the kill), how many never came back within --deadline (stuck: exit 2) and how \
            many clients of the other nodes lost their link.

            The README's figure: rtm bench cluster-failover --nodes 4 --clients 59000 --workers 4 \
            (60,000 would put 20,000 clients on each survivor: the whole open-file limit here).
            """)
    @Option(help: "Nodes to start.") var nodes = 4
    @Option(help: "Clients over all workers.") var clients = 60_000
    @Option(help: "Generator processes.") var workers = 4
    @Option(help: "Seconds to hold the clients idle before the kill.") var hold: Double = 5
    @Option(help: "Seconds after the kill before a client not back counts as stuck.") var deadline: Double = 30
    @Option(help: "The nodes' login admission rate, logins/s per node (0 = none).") var loginRate: Double = 2000
    @Option(help: "PostgreSQL URL (default: a throwaway PostgreSQL of its own).") var postgres: String?
    @Option(help: "First port of the nodes.") var basePort = 19_800
    @Option(help: "Client event loops per worker (default: cores).") var threads: Int?
    @Flag(help: "Print JSON.") var json = false

    struct Result: Codable {
        var nodes: Int
        var clients: Int
        var victimClients: Int
        var back: Int
        var stuck: Int
        var allBackSeconds: Double?
        var p50Seconds: Double
        var p99Seconds: Double
        var maxSeconds: Double
        var otherNodesLinksLost: Int
        /// When the other nodes' clients lost their links, seconds from the kill (first, last).
        var otherLossesFromKill: [Double]
        var backPerNode: [Int]

        var text: String {
            """
            cluster-failover  nodes=\(nodes) clients=\(clients) killed node \(nodes) (SIGKILL) holding \(victimClients) clients
              all back on the other nodes and resubscribed after  \(allBackSeconds.map { String(format: "%.2f s", $0) } ?? "NOT ALL BACK")
              back after the kill  p50=\(String(format: "%.2f", p50Seconds)) s  p99=\(String(format: "%.2f", p99Seconds)) s  max=\(String(format: "%.2f", maxSeconds)) s
              came back on nodes 1…\(nodes - 1)  \(backPerNode.dropLast().map(String.init).joined(separator: " / "))
              stuck=\(stuck)  links lost on the other nodes=\(otherNodesLinksLost)\(otherLossesFromKill.isEmpty ? "" : String(format: " (%.2f … %.2f s after the kill)", otherLossesFromKill[0], otherLossesFromKill[1]))
            """
        }
    }

    func run() async throws {
        guard workers >= 1, nodes >= 2 else { throw ValidationError("--workers must be at least 1 and --nodes at least 2") }
        guard clients / workers <= 19_000 else { throw ValidationError("at most 19,000 clients per worker (--workers): a process may hold about 20,000 sockets") }
        FileLimit.raise()
        let log = BenchOutput.log
        let cluster = try await BenchCluster.start(nodeURLs: [], count: nodes, postgres: postgres, durable: true, basePort: basePort,
                                                   loginRate: loginRate, appId: nil, certificate: nil, log: log)
        defer { cluster.stop() }
        let binary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let victim = nodes - 1
        var running: [(process: Process, output: String)] = []
        defer { for worker in running where worker.process.isRunning { worker.process.terminate() } }
        for k in 0..<workers {
            let output = NSTemporaryDirectory() + "rtm-failover-\(getpid())-\(k).json"
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            var arguments = ["bench", "failover-clients", "--clients", "\(clients / workers + (k < clients % workers ? 1 : 0))",
                             "--app-id", cluster.appId, "--app-certificate", cluster.certificate, "--source", "127.0.0.\(2 + k)",
                             "--tag", "w\(k)", "--victim", "\(victim)", "--deadline", "\(hold + deadline + 30)", "--output", output]
            if let threads { arguments += ["--threads", "\(threads)"] }
            for endpoint in cluster.endpoints { arguments += ["--node", "ws://\(endpoint.host):\(endpoint.port)"] }
            process.arguments = arguments
            try process.run()
            running.append((process, output))
        }
        // Every worker connected?
        let setupEnd = ContinuousClock.now + .seconds(300)
        while running.contains(where: { !Self.contents($0.output).hasPrefix("READY") }) {
            if ContinuousClock.now > setupEnd || running.contains(where: { !$0.process.isRunning }) {
                throw ValidationError("a generator process did not get its clients connected")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        log("\(clients) clients connected over \(nodes) nodes; holding \(hold) s, then killing node \(nodes)")
        try await Task.sleep(for: .seconds(hold))
        let killedAt = BenchClock.now()
        cluster.nodeProcesses[victim].kill()
        for worker in running { worker.process.waitUntilExit() }
        var reports: [FailoverClients.Report] = []
        for worker in running {
            let text = Self.contents(worker.output)
            guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
                  let report = try? JSONDecoder().decode(FailoverClients.Report.self, from: Data(line.utf8)) else {
                throw ValidationError("a generator process gave no report: \(text.suffix(500))")
            }
            reports.append(report)
            try? FileManager.default.removeItem(atPath: worker.output)
        }
        let losses = reports.flatMap(\.losses)
        let victimLosses = losses.filter { $0.node == victim }
        let victimClients = reports.map { $0.perNode[victim] }.reduce(0, +)
        let limit = killedAt + UInt64(deadline * 1e9)
        let times = victimLosses.compactMap { loss in loss.backAt.flatMap { $0 <= limit ? Double($0 - killedAt) / 1e9 : nil } }.sorted()
        func percentile(_ p: Double) -> Double { times.isEmpty ? 0 : times[min(times.count - 1, Int(Double(times.count) * p))] }
        var backPerNode = Array(repeating: 0, count: nodes)
        for loss in victimLosses { if let node = loss.backOn { backPerNode[node] += 1 } }
        let result = Result(nodes: nodes, clients: clients, victimClients: victimClients, back: times.count,
                            stuck: victimClients - times.count, allBackSeconds: times.count == victimClients ? times.last : nil,
                            p50Seconds: percentile(0.5), p99Seconds: percentile(0.99), maxSeconds: times.last ?? 0,
                            otherNodesLinksLost: losses.count - victimLosses.count,
                            otherLossesFromKill: Self.range(losses.filter { $0.node != victim }.map { (Double($0.lostAt) - Double(killedAt)) / 1e9 }),
                            backPerNode: backPerNode)
        try BenchOutput.print(result, text: result.text, json: json)
        if result.stuck > 0 { throw ExitCode(2) }
    }

    private static func range(_ values: [Double]) -> [Double] {
        guard let low = values.min(), let high = values.max() else { return [] }
        return [low, high]
    }

    private static func contents(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}

/// The generator process of `rtm bench cluster-failover` (not for direct use).
struct FailoverClientsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "failover-clients", abstract: "A generator process of cluster-failover.", shouldDisplay: false)
    @Option(name: .customLong("node")) var nodeURLs: [String] = []
    @Option var clients = 15_000
    @Option var appId: String
    @Option var appCertificate: String
    @Option var source: String?
    @Option var tag: String
    @Option var victim: Int
    @Option var deadline: Double
    @Option var output: String
    @Option var threads: Int?

    func run() async throws {
        FileLimit.raise()
        var options = FailoverClients.Options()
        for url in nodeURLs {
            var parsed = LoadOptions()
            try parsed.setURL(url)
            options.nodes.append(BenchEndpoint(host: parsed.host, port: parsed.port))
        }
        options.clients = clients
        options.appId = appId
        options.certificate = appCertificate
        options.source = source
        options.tag = tag
        if let threads { options.threads = threads }
        let fleet = try await FailoverClients.start(options, log: BenchOutput.log)
        let onVictim = (0..<clients).filter { $0 % options.nodes.count == victim }.count
        try Data("READY\n".utf8).write(to: URL(fileURLWithPath: output))
        // Until every client of the victim is back (and a moment more, to see collateral losses),
        // or the deadline.
        let end = ContinuousClock.now + .seconds(deadline)
        var allBackSince: ContinuousClock.Instant?
        while ContinuousClock.now < end {
            let (lost, back) = fleet.counts()
            if lost >= onVictim && back == lost {
                if allBackSince == nil { allBackSince = .now }
                if ContinuousClock.now - allBackSince! > .seconds(1) { break }
            } else {
                allBackSince = nil
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let report = await fleet.report(nodes: options.nodes.count)
        let encoder = JSONEncoder()
        try (Data("READY\n".utf8) + encoder.encode(report) + Data("\n".utf8)).write(to: URL(fileURLWithPath: output))
    }
}
