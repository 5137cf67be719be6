import StenoCore

#if canImport(Glibc)
import Glibc
#endif

/// The clocks: monotonic seconds for timers and latencies, and the wall clock (UTC) for
/// `startedAt` and log lines. Session machines are given their time by whoever drives them;
/// this is where the drivers read it.
public enum SystemClock {
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    public static func wall() -> UTCTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UTCTime(millisecondsSince1970: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}
