import Foundation

/// CPU time of this process, another process and the whole machine, to report cores in use
/// over an interval (1.0 = one core busy).
struct CPUSampler {
    struct Sample {
        let wall: UInt64
        let selfTicks: Double
        let serverTicks: Double?
        let machineBusy: Double
    }

    let serverPID: Int32?
    private let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    func sample() -> Sample {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let selfSeconds = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return Sample(wall: BenchClock.now(), selfTicks: selfSeconds, serverTicks: serverPID.flatMap(processSeconds),
                      machineBusy: machineSeconds())
    }

    func cores(from a: Sample, to b: Sample) -> (client: Double, server: Double?, machine: Double) {
        let wall = Double(b.wall - a.wall) / 1e9
        guard wall > 0 else { return (0, nil, 0) }
        let server = a.serverTicks.flatMap { start in b.serverTicks.map { ($0 - start) / wall } }
        return ((b.selfTicks - a.selfTicks) / wall, server, (b.machineBusy - a.machineBusy) / wall)
    }

    /// utime + stime of a process, seconds (/proc/PID/stat fields 14 and 15).
    private func processSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond
    }

    /// Busy seconds of all CPUs (/proc/stat: everything but idle and iowait).
    private func machineSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first else { return 0 }
        let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard values.count >= 5 else { return 0 }
        return (values.reduce(0, +) - values[3] - values[4]) / ticksPerSecond
    }

    /// Resident memory of a process, bytes (/proc/PID/status VmRSS).
    static func rss(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }.map { $0 * 1024 }
        }
        return nil
    }
}
