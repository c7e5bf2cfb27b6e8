#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The process's own figures for `/metrics`, under the names every Prometheus client library
/// uses (`process_*`, so the usual dashboards and alerts work unchanged), and the build's
/// version (`rtm_build_info`). Read from `/proc/self` at each scrape; on a system without
/// `/proc` only the build info and the start time are given.
struct ProcessMetrics: Equatable, Sendable {
    /// User and system CPU time since the start, in seconds.
    var cpuSeconds: Double?
    /// Resident set size, in bytes.
    var residentBytes: Int?
    /// Virtual memory size, in bytes.
    var virtualBytes: Int?
    /// Open file descriptors (sockets included).
    var openFDs: Int?
    /// The soft limit on open file descriptors (`ulimit -n`).
    var maxFDs: Int?
    /// Threads of the process.
    var threads: Int?
    /// When the process started, in seconds since the Unix epoch.
    var startTimeSeconds: Double?

    /// The families in the Prometheus text format, each with its `# HELP` and `# TYPE` lines.
    func render(version: String) -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String, _ value: String?, labels: String = "") {
            guard let value else { return }
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name)\(labels) \(value)\n"
        }
        family("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", cpuSeconds.map { "\($0)" })
        family("process_resident_memory_bytes", "gauge", "Resident memory size, in bytes.", residentBytes.map { "\($0)" })
        family("process_virtual_memory_bytes", "gauge", "Virtual memory size, in bytes.", virtualBytes.map { "\($0)" })
        family("process_open_fds", "gauge", "Open file descriptors (client sockets included).", openFDs.map { "\($0)" })
        family("process_max_fds", "gauge", "The limit on open file descriptors (ulimit -n): connections beyond it are refused.",
               maxFDs.map { "\($0)" })
        family("process_threads", "gauge", "Threads of the process.", threads.map { "\($0)" })
        family("process_start_time_seconds", "gauge", "Start time of the process, in seconds since the Unix epoch.",
               startTimeSeconds.map { "\($0)" })
        family("rtm_build_info", "gauge", "Always 1; the label names the server's version.", "1", labels: "{version=\"\(version)\"}")
        return out
    }

    /// The figures now (Linux: `/proc/self/stat`, `/proc/self/fd`, `/proc/self/limits`,
    /// `/proc/stat`'s boot time); `fallbackStart` is the start time where `/proc` is missing.
    static func read(fallbackStart: Double) -> ProcessMetrics {
        var metrics = ProcessMetrics(startTimeSeconds: fallbackStart)
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8) else { return metrics }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        if let parsed = parseStat(stat, ticksPerSecond: ticks, pageSize: page) {
            metrics.cpuSeconds = parsed.cpuSeconds
            metrics.residentBytes = parsed.residentBytes
            metrics.virtualBytes = parsed.virtualBytes
            metrics.threads = parsed.threads
            if let boot = bootTime() { metrics.startTimeSeconds = boot + parsed.startTicks / ticks }
        }
        metrics.openFDs = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { max(0, $0.count - 1) }   // minus the listing's own
        if let limits = try? String(contentsOfFile: "/proc/self/limits", encoding: .utf8) { metrics.maxFDs = parseMaxFDs(limits) }
        return metrics
    }

    /// The fields of `/proc/self/stat` used here (proc(5): utime 14, stime 15, num_threads 20,
    /// starttime 22, vsize 23, rss 24, counted after the command name in parentheses, which may
    /// hold spaces).
    static func parseStat(_ text: String, ticksPerSecond: Double, pageSize: Int)
        -> (cpuSeconds: Double, residentBytes: Int, virtualBytes: Int, threads: Int, startTicks: Double)? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        // Fields from the 3rd (state) on.
        let fields = text[text.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        func field(_ number: Int) -> Double? { number - 3 < fields.count ? Double(fields[number - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let threads = field(20), let start = field(22),
              let vsize = field(23), let rss = field(24), ticksPerSecond > 0 else { return nil }
        return ((utime + stime) / ticksPerSecond, Int(rss) * pageSize, Int(vsize), Int(threads), start)
    }

    /// The soft limit of "Max open files" in `/proc/self/limits`.
    static func parseMaxFDs(_ text: String) -> Int? {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else { return nil }
        let values = line.dropFirst("Max open files".count).split(separator: " ", omittingEmptySubsequences: true)
        return values.first.flatMap { Int($0) }
    }

    /// The system's boot time (`btime` of `/proc/stat`), in seconds since the Unix epoch.
    private static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }) else { return nil }
        return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
    }
}
