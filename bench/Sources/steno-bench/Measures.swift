import Foundation
import Glibc
import StenoSystem
import StenoTestSupport

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
    let family = [pid] + childProcesses(of: pid)
    return (family.map { ProcessCPU.seconds(of: $0) }.reduce(0, +), family.map { Child.residentMB(of: $0) }.reduce(0, +))
}

/// The processes whose parent is `pid` (/proc/N/stat's ppid, the field after the state).
func childProcesses(of pid: pid_t) -> [pid_t] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
        guard let id = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 && pid_t(fields[1]) == pid ? id : nil
    }
}
