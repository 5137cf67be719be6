/// When to try the server again, and when to give up.
///
/// Failures to connect back off exponentially (0.5 s, 1 s, 2 s … up to `maxDelay`), with a
/// little jitter so that many clients of a restarted server do not come back in step. A full
/// or draining server (503) is waited out: its `Retry-After` is honoured (up to `maxDelay`)
/// and the time spent does not count as the server being gone. The client gives up after
/// `giveUpAfter` seconds in which every attempt failed.
struct Reconnection: Sendable, Equatable {
    var maxDelay: Double
    var giveUpAfter: Double
    /// Attempts failed in a row.
    private(set) var failures = 0
    /// When the run of failures began (monotonic seconds); nil while connected.
    private(set) var failingSince: Double?

    init(maxDelay: Double = 30, giveUpAfter: Double = 300) {
        self.maxDelay = max(0.1, maxDelay)
        self.giveUpAfter = giveUpAfter
    }

    /// A session was reached: the next failure starts a new run.
    mutating func succeeded() {
        failures = 0
        failingSince = nil
    }

    /// An attempt failed (or a connection dropped) at `now`: the delay before the next one,
    /// or nil when it is time to give up. `jitter` is in 0...1.
    mutating func failed(at now: Double, jitter: Double) -> Double? {
        if failingSince == nil { failingSince = now }
        if let since = failingSince, now - since >= giveUpAfter { return nil }
        let base = min(maxDelay, 0.5 * Double(1 << min(failures, 16)))
        failures += 1
        // ±20 %, never beyond the cap.
        return min(maxDelay, base * (0.8 + 0.4 * min(max(jitter, 0), 1)))
    }

    /// The server said to come back after `retryAfter` seconds (503): the delay. The server
    /// is there, so this is not a failure.
    mutating func busy(retryAfter: Int?) -> Double {
        failures = 0
        failingSince = nil
        return min(maxDelay, Double(max(1, retryAfter ?? 5)))
    }
}
