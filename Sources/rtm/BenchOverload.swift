import ArgumentParser
import Foundation
import RTMBench
import RTMProtocol

struct Overload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Flat-out publishers saturate the server next to clients that behave: are the behaving ones still served?",
        discussion: """
            --floods raw publishers publish as fast as their sockets take it (binary, one request \
            per masked frame, pipelined), each on its own channel, reconnecting whenever the server \
            closes them; --paced raw publishers send --paced-rate messages/s (below the default \
            publish limit of 60/s); an SDK subscriber that only pings (heartbeat 5 s) receives an \
            SDK publisher's --healthy-rate messages/s. Run it against a server with its default \
            limits. Exits 2 when a behaving client was disconnected, refused by the rate limit or \
            lost a message.
            """)
    @Option(help: "Server URL.") var url = "ws://127.0.0.1:9600"
    @Option(help: "Flat-out publishers.") var floods = 200
    @Option(help: "Paced publishers.") var paced = 10
    @Option(help: "Messages per second of each paced publisher.") var pacedRate: Double = 50
    @Option(help: "Messages per second of the healthy SDK publisher.") var healthyRate: Double = 10
    @Option(help: "Measured seconds (after the warm-up).") var seconds: Double = 20
    @Option(help: "Warm-up seconds of flood, not measured.") var warmup: Double = 3
    @Option(help: "Event loops of the raw publishers.") var threads = 1
    @Option(help: "Server process id, to report its CPU.") var serverPid: Int32?
    @OptionGroup var app: AppArguments
    @Flag(help: "Print one JSON object instead of the table.") var json = false

    func run() async throws {
        FileLimit.raise()
        var load = LoadOptions()
        try load.setURL(url)
        var options = OverloadRun.Options()
        options.host = load.host
        options.port = load.port
        (options.appId, options.certificate) = try app.resolve()
        options.floods = floods
        options.paced = paced
        options.pacedRate = pacedRate
        options.healthyRate = healthyRate
        options.seconds = seconds
        options.warmup = warmup
        options.threads = threads
        options.serverPID = serverPid
        let result = try await OverloadRun.run(options, log: BenchOutput.log)
        try BenchOutput.print(result, text: result.text, json: json)
        if !result.fair { throw ExitCode(2) }
    }
}
