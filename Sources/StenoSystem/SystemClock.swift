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

/// Where a driver reads the time: the system's clocks in a server or a command, a clock the test
/// moves by hand in memory (`ManualTime`), so that timers above the session machine (a short
/// audio batch's linger, a stalled utterance, idle and session limits) are tested without waiting.
public protocol TimeSource: Sendable {
    /// Monotonic seconds.
    func now() -> Double
    /// The wall clock (UTC).
    func wall() -> UTCTime
}

/// The system's clocks (`SystemClock`).
public struct SystemTime: TimeSource {
    public init() {}
    public func now() -> Double { SystemClock.now() }
    public func wall() -> UTCTime { SystemClock.wall() }
}

/// A clock that moves only when told (tests): monotonic time from `start`, the wall clock
/// `wallOrigin` plus the time moved.
public final class ManualTime: TimeSource {
    private let time: Locked<Double>
    private let start: Double
    private let wallOrigin: UTCTime

    public init(start: Double = 1_000, wallOrigin: UTCTime = UTCTime(millisecondsSince1970: 1_764_547_200_000)) {
        self.time = Locked(start)
        self.start = start
        self.wallOrigin = wallOrigin
    }

    public func now() -> Double { time.withLock { $0 } }

    public func wall() -> UTCTime {
        UTCTime(millisecondsSince1970: wallOrigin.millisecondsSince1970 + Int64(((now() - start) * 1000).rounded()))
    }

    /// Moves the clock on by `seconds`.
    public func advance(_ seconds: Double) { time.withLock { $0 += seconds } }

    /// Moves the clock on to `moment` exactly (never back).
    public func advance(to moment: Double) { time.withLock { $0 = max($0, moment) } }
}
