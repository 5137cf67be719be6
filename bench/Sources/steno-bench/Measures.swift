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
