import ArgumentParser
import Foundation
import RTMBench

struct Soak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Churn for a long time (connect, login, subscribe, publish, cut, logout): server memory, descriptors, threads, latency.",
        discussion: """
            Each worker repeats: an SDK client logs in, subscribes, publishes and waits for its own
            message, logs out; a raw client logs in, subscribes and is cut (TCP reset). Every
            --report-every seconds a line with the server's RSS, open descriptors and threads (with
            --server-pid), cycles, errors and latency percentiles; at the end a verdict on memory
            growth (slope of RSS over the second half). Exits 2 if memory grew or a cycle failed.
            """)
    @Option(help: "Server URL.") var url = "ws://127.0.0.1:9600"
    @Option(help: "Seconds to churn.") var duration: Double = 60
    @Option(help: "Workers running cycles at the same time.") var concurrency = 8
    @Option(help: "Seconds between report lines.") var reportEvery: Double = 10
    @Option(help: "Server process id (its memory, descriptors and threads are read from /proc).") var serverPid: Int32?
    @OptionGroup var app: AppArguments
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        FileLimit.raise()
        var options = SoakRun.Options()
        options.url = url
        (options.appId, options.certificate) = try app.resolve()
        options.duration = duration
        options.concurrency = concurrency
        options.reportEvery = reportEvery
        options.serverPID = serverPid
        let result = try await SoakRun.run(options, log: BenchOutput.log)
        try BenchOutput.print(result, text: result.text, json: json)
        if result.growing == true || result.errors > 0 { throw ExitCode(2) }
    }
}

/// The app a bench command logs in to: given, or the data directory's development app.
struct AppArguments: ParsableArguments {
    @Option(help: "App id (default: the data directory's development app).") var appId: String?
    @Option(help: "App certificate.") var appCertificate: String?
    @Option(help: "Data directory holding the development app.") var dataDir = "rtm-data"

    /// App id and certificate (nil: the app takes any token).
    func resolve() throws -> (String, String?) {
        try Credentials.resolve(appId: appId, appCertificate: appCertificate, dataDir: dataDir)
    }
}
