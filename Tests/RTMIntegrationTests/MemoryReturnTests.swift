import Foundation
import NIOCore
import RTMProtocol
import Testing
@testable import RTMServer

/// The server gives memory back to the system when load ends (the C allocator would keep it:
/// without the trimmer the process stays at its peak size for ever).
@Suite(.realTimeAlone, .serialized)
struct MemoryReturnTests {
    @Test("Slow consumers' backlogs are cut at the budget and, once everyone is gone, the memory goes back to the system")
    func memoryGoesBackAfterSlowConsumers() async throws {
        let harness = try await Harness.start {
            $0.memoryTrimInterval = .milliseconds(100)
            $0.heartbeatSlack = .seconds(60)   // the readers that stop are cut as slow consumers, not as silent
        }
        // Whatever the tests before this one freed is given back first: reused, it would hide
        // the backlogs' growth (this suite runs alone, so nothing else allocates meanwhile).
        MemoryTrimmer.trimNow()
        let baseline = try #require(MemoryTrimmer.residentBytes())
        // Ten subscribers, each on a channel of its own, stop reading: each backlog grows to
        // the 4 MiB budget and the server cuts it.
        var sloths: [RawConnection] = []
        for i in 0..<10 {
            let raw = try await RawConnection.open(port: harness.port)
            #expect(await raw.login("sloth\(i)")?.type == .ok)
            raw.send(Frame(type: .subscribe, id: 2, channel: "mem\(i)"))
            #expect(await raw.reply(2)?.type == .ok)
            try await raw.channel.setOption(.autoRead, value: false).get()
            sloths.append(raw)
        }
        let publisher = try await RawConnection.open(port: harness.port)
        #expect(await publisher.login("flood")?.type == .ok)
        let text = String(repeating: "x", count: 30 * 1024)
        var peak = baseline
        var sent: UInt64 = 0
        while harness.server.connectionCount > 1 && sent < 20_000 {
            for i in 0..<10 {
                sent += 1
                publisher.send(Frame(type: .publish, id: 100 + sent, channel: "mem\(i)", text: text))
            }
            if sent % 200 == 0 {
                _ = await publisher.reply(100 + sent)   // keep pace with the server
            }
            if sent % 20 == 0 { peak = max(peak, MemoryTrimmer.residentBytes() ?? 0) }
        }
        #expect(await waitUntil { harness.server.connectionCount == 1 }, "the slow consumers were not cut")
        #expect(peak > baseline + 20 << 20, "the backlogs did not grow the process (peak \(peak >> 20) MiB, baseline \(baseline >> 20) MiB)")
        for raw in sloths { try? await raw.channel.close() }
        try? await publisher.channel.close()
        // Everyone gone: the memory goes back to the system.
        let target = peak - (peak - baseline) / 2
        let returned = await waitUntil(.seconds(5)) { (MemoryTrimmer.residentBytes() ?? .max) < target }
        #expect(returned, "resident \(MemoryTrimmer.residentBytes().map { $0 >> 20 } ?? 0) MiB after the load ended (peak \(peak >> 20) MiB, baseline \(baseline >> 20) MiB)")
        #expect(harness.server.memoryTrimmer.totals.trims > 0)
    }
}
