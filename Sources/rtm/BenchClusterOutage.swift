import ArgumentParser
import Foundation
import RTMBench
import RTMFaultProxy
import RTMLocalPostgres

/// What `rtm bench cluster-outage` does to the database.
enum OutageCase: String, ExpressibleByArgument, CaseIterable {
    /// The primary killed (SIGKILL), its streaming replica promoted, the nodes' address moved.
    case failover
    /// One node's link to the database black-holed (a network partition), its clients kept.
    case partition
}

struct ClusterOutage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster-outage",
        abstract: "A database failover or a node cut off from the database under publish load: seconds until publishes are acknowledged again, and what was reported lost.",
        discussion: """
            Starts a throwaway PostgreSQL (fsync and synchronous commit on) and --nodes \
            `rtm serve --postgres` processes of this binary, each reaching the database through \
            its own TCP forwarder (the stand-in for a virtual IP or a network path), then Swift \
            SDK clients (public API, every node as an endpoint): --publishers publishers, one \
            channel each, --rate publishes/s each, every publish awaited, and --subs subscribers \
            per channel. After --before seconds:
              failover   a streaming replica (pg_basebackup -R; --synchronous: a synchronous \
            standby, ANY 1 (*)) is promoted while the primary is killed with SIGKILL, and every \
            forwarder moves to it (its open connections reset);
              partition  the last node's forwarder black-holes both ways (sockets stay open, \
            nothing flows), as a network partition between that node and PostgreSQL; its \
            clients still reach it.
            The load ends --after seconds after every publisher was acknowledged again (or at \
            --deadline); the subscribers then have --settle seconds to get every acknowledged \
            message. It reports how long publishes went unacknowledged (from the fault), \
            which subscribers lost their link, the gap notices they got, and every acknowledged \
            message a subscriber never got, announced by a notice or silently; exit 2 when \
            anything was lost silently, delivered twice or out of order, or a publisher stuck.

            A subscriber that moves to another node is replayed what it missed from that \
            node's buffer (--replay-max sets the nodes' --channel-replay-max); beyond it, it is \
            told the count with a gap notice (announced, not silent).

            The README's figures:
              rtm bench cluster-outage --case partition
              rtm bench cluster-outage --case partition --replay-max 1000
              rtm bench cluster-outage --case failover
              rtm bench cluster-outage --case failover --synchronous
            """)
    @Option(name: .customLong("case"), help: "failover or partition.") var outage: OutageCase = .partition
    @Option(help: "Nodes to start.") var nodes = 3
    @Option(help: "Publishers, one channel each.") var publishers = 12
    @Option(help: "Subscribers per channel.") var subs = 2
    @Option(help: "Publishes per second of each publisher.") var rate: Double = 20
    @Option(help: "Seconds of load before the fault.") var before: Double = 3
    @Option(help: "Seconds after the fault by which every publisher must be acknowledged again.") var deadline: Double = 60
    @Option(help: "Seconds of load after every publisher was acknowledged again.") var after: Double = 3
    @Option(help: "Seconds after the load for the subscribers to get every acknowledged message (what has not arrived by then is not delivered).")
    var settle: Double = 10
    @Option(help: "failover: seconds the nodes' address still leads to the dead primary before it moves to the promoted replica (the time a virtual IP or DNS failover takes).")
    var moveAfter: Double = 0
    @Flag(help: "failover: the replica is a synchronous standby (synchronous_standby_names = 'ANY 1 (*)').") var synchronous = false
    @Option(help: "The nodes' --channel-replay-max (default: the server's, 32): how many missed messages a subscriber that moves to another node gets replayed.")
    var replayMax: Int?
    @Option(help: "First port of the nodes.") var basePort = 19_850
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        guard nodes >= 2 else { throw ValidationError("--nodes must be at least 2") }
        guard moveAfter >= 0 && moveAfter <= 3600 else { throw ValidationError("--move-after must be between 0 and 3600 seconds") }
        // A synchronous primary without its standby would never acknowledge a commit.
        guard !synchronous || outage == .failover else { throw ValidationError("--synchronous goes with --case failover (it needs the replica)") }
        FileLimit.raise()
        let log = BenchOutput.log
        let primary = try await LocalPostgres.start(durable: true)
        defer { primary.destroy() }
        if synchronous { try await primary.requireSynchronousStandby() }
        let replica = outage == .failover ? try await primary.startReplica() : nil
        defer { replica?.destroy() }
        log("started PostgreSQL on port \(primary.port)" + (replica.map { ", its \(synchronous ? "synchronous" : "asynchronous") replica on \($0.port)" } ?? ""))
        var started: [FaultProxy] = []
        for _ in 0..<nodes { started.append(try await FaultProxy.start(targetPort: primary.port)) }
        let forwarders = started
        let urls = forwarders.map { "postgres://\(primary.user)@127.0.0.1:\($0.port)/\(primary.database)?sslmode=disable" }
        let cluster = try await BenchCluster.start(postgresURLs: urls, basePort: basePort,
                                                   serveArguments: replayMax.map { ["--channel-replay-max", "\($0)"] } ?? [], log: log)
        defer { cluster.stop() }
        var options = OutageRun.Options()
        options.endpoints = cluster.endpoints.map { "ws://\($0.host):\($0.port)" }
        options.appId = cluster.appId
        options.certificate = cluster.certificate
        options.publishers = publishers
        options.subscribersPerChannel = subs
        options.ratePerPublisher = rate
        options.before = before
        options.deadline = deadline
        options.after = after
        options.settle = settle
        let kind = outage, isSynchronous = synchronous, victim = nodes, moveDelay = moveAfter
        let result = try await OutageRun.run(options, fault: {
            switch kind {
            case .failover:
                guard let replica else { throw ValidationError("no replica") }
                try primary.crash()
                if moveDelay > 0 { try await Task.sleep(for: .seconds(moveDelay)) }   // the address still leads to the dead primary
                try await replica.promote()
                for forwarder in forwarders {
                    forwarder.retarget(to: replica.port)
                    forwarder.cutAll()
                }
                return "failover: primary killed (SIGKILL), \(isSynchronous ? "synchronous" : "asynchronous") replica promoted, the nodes' address moved to it"
                    + (moveDelay > 0 ? " \(moveDelay) s later" : "")
            case .partition:
                forwarders[victim - 1].setMode(.blackhole)
                return "partition: node \(victim)'s link to PostgreSQL black-holed (its clients still reach it)"
            }
        }, log: log)
        for forwarder in forwarders { try? await forwarder.stop() }
        try BenchOutput.print(result, text: result.text, json: json)
        if !result.isClean { throw ExitCode(2) }
    }
}
