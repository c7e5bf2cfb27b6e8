import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RTMAuth
import RTMClient

/// `rtm bench storm`: N real SDK clients, logged in and subscribed; the server process is
/// killed (SIGKILL) and started again; how long until every client is back and resubscribed, the
/// distribution of those times, and the peak rate of admitted logins. The clients come back by
/// themselves (jittered backoff, T-9); the server protects itself with its login rate limit.
public enum StormRun {
    /// The figures.
    public struct Result: Codable, Sendable {
        public var clients: Int
        public var allBackSeconds: Double?
        public var p50Seconds: Double
        public var p90Seconds: Double
        public var p99Seconds: Double
        public var maxSeconds: Double
        public var peakLoginsPerSecond: Int
        public var stuck: Int
        public var loginRate: Double

        public var text: String {
            let all = allBackSeconds.map { String(format: "%.2f s", $0) } ?? "not all back"
            return """
            storm  clients=\(clients) server login rate limit=\(loginRate == 0 ? "none" : String(Int(loginRate)))/s
              all back and resubscribed after  \(all)
              reconnect time  p50=\(String(format: "%.2f", p50Seconds)) s  p90=\(String(format: "%.2f", p90Seconds)) s  p99=\(String(format: "%.2f", p99Seconds)) s  max=\(String(format: "%.2f", maxSeconds)) s
              peak admitted logins  \(peakLoginsPerSecond)/s
              stuck=\(stuck)
            """
        }
    }

    /// Counts each client's return (delegate callbacks arrive on the clients' event loops).
    final class Watcher: RTMClientDelegate {
        /// Each client's first return after the kill.
        let back = NIOLockedValueBox<[ObjectIdentifier: UInt64]>([:])
        nonisolated(unsafe) var lostDuringSetup: NIOLockedValueBox<Int>?
        func rtmClient(_ client: RTMClient, didReceiveLinkStateEvent event: LinkStateEvent) {
            if event.currentState == .disconnected, let lost = lostDuringSetup {
                lost.withLockedValue { $0 += 1 }
                FileHandle.standardError.write(Data("setup: \(event)\n".utf8))
            }
            if event.currentState == .connected && event.operation == .reconnected {
                let now = BenchClock.now()
                back.withLockedValue { if $0[ObjectIdentifier(client)] == nil { $0[ObjectIdentifier(client)] = now } }
            }
        }
    }

    /// `startServer` starts the server process and returns once it accepts connections;
    /// `killServer` kills it with SIGKILL.
    public static func run(host: String, port: Int, appId: String, certificate: String, clients: Int, loginRate: Double,
                           deadline: Double,
                           startServer: @escaping @Sendable () async throws -> Void, killServer: @escaping @Sendable () -> Void,
                           log: @escaping @Sendable (String) -> Void) async throws -> Result {
        try await startServer()
        let watcher = Watcher()
        let setupRetries = NIOLockedValueBox(0)
        let setupLost = NIOLockedValueBox(0)
        watcher.lostDuringSetup = setupLost
        var all: [RTMClient] = []
        let start = BenchClock.now()
        try await withThrowingTaskGroup(of: RTMClient.self) { group in
            var next = 0
            func add() {
                let i = next
                next += 1
                group.addTask {
                    var config = RTMClientConfig(appId: appId, userId: "storm-\(i)", endpoint: "ws://\(host):\(port)")
                    config.loginTimeout = 60
                    let client = try RTMClient(config: config)
                    await client.setDelegate(watcher)
                    let token = AccessToken006.buildRTMToken(appId: appId, appCertificate: certificate, userId: "storm-\(i)",
                                                             privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 3600)
                    try await client.login(token: token)
                    // While thousands log in, a request can time out; the SDK recovers, so retry.
                    var attempts = 0
                    while true {
                        do {
                            try await client.subscribe("storm")
                            return client
                        } catch where attempts < 5 {
                            attempts += 1
                            setupRetries.withLockedValue { $0 += 1 }
                        }
                    }
                }
            }
            for _ in 0..<min(clients, 200) { add() }
            for try await client in group {
                all.append(client)
                if next < clients { add() }
            }
        }
        log("\(clients) clients logged in and subscribed in \(String(format: "%.1f", Double(BenchClock.now() - start) / 1e9)) s "
            + "(\(setupRetries.withLockedValue { $0 }) subscribe retries, \(setupLost.withLockedValue { $0 }) links lost during set-up); killing the server")
        watcher.lostDuringSetup = nil
        killServer()
        let killed = BenchClock.now()
        try await startServer()
        log("server restarted after \(String(format: "%.2f", Double(BenchClock.now() - killed) / 1e9)) s; waiting for the clients")
        let end = killed + UInt64(deadline * 1e9)
        while watcher.back.withLockedValue({ $0.count }) < clients && BenchClock.now() < end {
            try await Task.sleep(for: .milliseconds(50))
        }
        let times = watcher.back.withLockedValue { Array($0.values) }.map { Double($0 - killed) / 1e9 }.sorted()
        func percentile(_ p: Double) -> Double { times.isEmpty ? 0 : times[min(times.count - 1, Int(Double(times.count) * p))] }
        var peak = 0
        var windowStart = 0
        for (i, t) in times.enumerated() {
            while t - times[windowStart] > 1 { windowStart += 1 }
            peak = max(peak, i - windowStart + 1)
        }
        await withTaskGroup(of: Void.self) { group in for client in all { group.addTask { await client.logout() } } }
        return Result(clients: clients, allBackSeconds: times.count >= clients ? times.last : nil,
                      p50Seconds: percentile(0.5), p90Seconds: percentile(0.9), p99Seconds: percentile(0.99), maxSeconds: times.last ?? 0,
                      peakLoginsPerSecond: peak, stuck: clients - times.count, loginRate: loginRate)
    }
}
