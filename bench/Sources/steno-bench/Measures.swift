import Foundation
import Glibc

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The load average (1, 5, 15 minutes) now, which every table quotes: these machines are shared.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// The nearest-rank percentile of `values` (p in 0…1); `empty` when there are none.
func percentile(_ values: [Double], _ p: Double, empty: Double = 0) -> Double {
    guard !values.isEmpty else { return empty }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
}

/// A process and its children now (a server and its Whisper worker): their CPU seconds (user +
/// system) and resident memory in MB, from /proc.
func familyUsage(_ pid: pid_t) -> (cpu: Double, residentMB: Double) {
    var cpu = 0.0
    var kilobytes = 0.0
    let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let id = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // After the command: state, ppid, … utime (14th in proc(5)), stime (15th).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, id == pid || pid_t(fields[1]) == pid else { continue }
        cpu += ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / tick
        let status = (try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            kilobytes += line.split(separator: " ").compactMap { Double($0) }.first ?? 0
        }
    }
    return (cpu, kilobytes / 1024)
}
