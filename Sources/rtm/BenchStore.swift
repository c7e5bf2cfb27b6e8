import ArgumentParser
import Foundation
import RTMServer

/// `rtm bench store`: the embedded user-message store alone, driven the way the mailbox drives it
/// under `rtm bench pairs --users` (each commit stores a batch of messages between pairs of users
/// and applies the acknowledgements of the previous batch), without sockets. Its cost per message
/// is what the one writer of a server spends, serially, per durable user message.
struct BenchStore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "The embedded user-message store alone: commits of N messages among P pairs, µs per message.",
        discussion: """
            Each commit stores --batch messages, each from a random sender to its pair's receiver \
            with the sender's next client message id, and applies the acknowledgements of the \
            previous commit's messages (receivers online, acknowledging everything). Prints wall \
            and CPU time per message and per commit. The database is a fresh one in --dir.
            """)
    @Option(help: "Sender/receiver pairs.") var pairs = 1000
    @Option(help: "Messages per commit.") var batch = 500
    @Option(help: "Measured commits (after 50 not measured).") var commits = 400
    @Option(help: "Payload bytes (text).") var size = 100
    @Option(help: "Directory for the database (a fresh file in it, removed afterwards).") var dir = NSTemporaryDirectory()
    @Flag(help: "No client message ids (no resend records).") var noMsgId = false
    @Flag(help: "Print one JSON object instead of the table.") var json = false

    struct Result: Codable {
        var pairs: Int, batch: Int, commits: Int
        var wallMicrosPerMessage: Double, cpuMicrosPerMessage: Double, wallMillisPerCommit: Double
    }

    func run() async throws {
        guard pairs > 0, batch > 0, commits > 0 else { throw ValidationError("--pairs, --batch and --commits must be > 0") }
        let path = (dir as NSString).appendingPathComponent("rtm-bench-store-\(getpid()).sqlite")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteUserMessageStore(path: path)
        let app = "0123456789abcdef0123456789abcdef"
        let text = String(repeating: "x", count: size)
        var nextClientID = [UInt64](repeating: 0, count: pairs)
        var unacked: [Int: Int64] = [:]
        var wall: UInt64 = 0, cpu: UInt64 = 0
        for round in 0..<(50 + commits) {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var messages: [StoredUserMessage] = []
            messages.reserveCapacity(batch)
            var receivers: [Int] = []
            for _ in 0..<batch {
                let pair = Int.random(in: 0..<pairs)
                nextClientID[pair] += 1
                messages.append(StoredUserMessage(appId: app, receiver: "r\(pair)", sender: "s\(pair)", text: text, data: nil, customType: nil,
                                                  ts: now, clientMsgId: noMsgId ? nil : nextClientID[pair]))
                receivers.append(pair)
            }
            let acks = unacked.map { (appId: app, receiver: "r\($0.key)", upTo: $0.value) }
            let (wall0, cpu0) = (DispatchTime.now().uptimeNanoseconds, Self.cpuNanos())
            let results = try store.commit(messages, acknowledgements: acks, cap: 200, resendsSince: now - 60_000)
            if round >= 50 {
                wall += DispatchTime.now().uptimeNanoseconds - wall0
                cpu += Self.cpuNanos() - cpu0
            }
            unacked = [:]
            for (pair, result) in zip(receivers, results) { unacked[pair] = max(unacked[pair] ?? 0, result.id) }
        }
        let total = Double(commits * batch)
        let result = Result(pairs: pairs, batch: batch, commits: commits, wallMicrosPerMessage: Double(wall) / 1000 / total,
                            cpuMicrosPerMessage: Double(cpu) / 1000 / total, wallMillisPerCommit: Double(wall) / 1e6 / Double(commits))
        if json {
            print(String(decoding: try JSONEncoder().encode(result), as: UTF8.self))
        } else {
            print(String(format: "store: %d pairs, %d messages per commit, %d commits: %.2f µs/message wall, %.2f µs CPU, %.2f ms/commit",
                         pairs, batch, commits, result.wallMicrosPerMessage, result.cpuMicrosPerMessage, result.wallMillisPerCommit))
        }
    }

    /// This thread's CPU time (ns).
    static func cpuNanos() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
