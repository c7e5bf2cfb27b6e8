import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import RTMBench

/// `rtm bench soak`: the churn cycle against a real server, and the memory verdict.
@Suite(.realTimeAlone, .serialized)
struct SoakTests {
    @Test("soak: 2 s of churn (login, subscribe, publish → own delivery, logout, cut) against a real server, reported every 0.5 s")
    func shortSoak() async throws {
        let harness = try await Harness.start()
        var options = SoakRun.Options()
        options.url = "ws://127.0.0.1:\(harness.port)"
        options.appId = Harness.appId
        options.certificate = Harness.certificate
        options.duration = 2
        options.concurrency = 2
        options.reportEvery = 0.5
        options.serverPID = getpid()   // the server runs in this process
        let lines = NIOLockedLines()
        let result = try await SoakRun.run(options) { lines.append($0) }
        #expect(result.errors == 0, "\(result.firstErrors)")
        #expect(result.cycles > 0)
        #expect(result.samples.count >= 4, "\(lines.all)")
        #expect(result.samples.allSatisfy { $0.rssBytes != nil && $0.descriptors != nil && $0.threads != nil })
        #expect(result.samples.last?.cycles == result.cycles)
        #expect(result.samples.dropFirst().contains { $0.loginP50Ms > 0 && $0.deliveryP50Ms > 0 })
        #expect(result.growing != nil || result.verdict.hasPrefix("not judged"), "\(result.verdict)")
        #expect(lines.all.count == result.samples.count)
        // The cut sessions are left to the server's grace; every SDK client logged out.
        #expect(harness.server.connectionCounters.message <= options.concurrency)
    }

    static func samples(_ rss: [Int], every seconds: Double = 10, cyclesPerSample: Int = 100) -> [SoakRun.Sample] {
        rss.enumerated().map { i, bytes in
            SoakRun.Sample(seconds: Double(i) * seconds, rssBytes: bytes, descriptors: 20, threads: 5, cycles: i * cyclesPerSample,
                           errors: 0, loginP50Ms: 1, loginP99Ms: 2, deliveryP50Ms: 1, deliveryP99Ms: 2)
        }
    }

    @Test("soak verdict: RSS rising steadily over the second half is growth (bytes per cycle given); noise around a plateau is not")
    func verdict() {
        var options = SoakRun.Options()
        options.serverPID = 1
        let mib = 1_048_576
        // 100 cycles per 10 s, 1 MiB more per sample: ≈ 10 KiB per cycle.
        let rising = SoakRun.judge(options, seconds: 100, samples: Self.samples((0...10).map { 40 * mib + $0 * mib }),
                                   cycles: 1000, errors: 0, firstErrors: [])
        #expect(rising.growing == true, "\(rising.verdict)")
        #expect(abs((rising.bytesPerCycle ?? 0) - Double(mib) / 100) < 100)
        #expect(abs((rising.rssSlopeBytesPerMinute ?? 0) - Double(6 * mib)) < 1000)

        let plateau = SoakRun.judge(options, seconds: 100, samples: Self.samples([30, 38, 40, 41, 40, 41, 40, 41, 40, 41, 40].map { $0 * mib }),
                                    cycles: 1000, errors: 0, firstErrors: [])
        #expect(plateau.growing == false, "\(plateau.verdict)")

        let short = SoakRun.judge(options, seconds: 2, samples: Self.samples([40 * mib, 41 * mib], every: 1), cycles: 100, errors: 0, firstErrors: [])
        #expect(short.growing == nil)
        options.serverPID = nil
        #expect(SoakRun.judge(options, seconds: 100, samples: Self.samples([1, 2, 3]), cycles: 1, errors: 0, firstErrors: []).growing == nil)
    }
}

/// Lines logged from another task.
final class NIOLockedLines: Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    func append(_ line: String) { box.withLockedValue { $0.append(line) } }
    var all: [String] { box.withLockedValue { $0 } }
}
