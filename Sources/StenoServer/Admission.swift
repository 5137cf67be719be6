import StenoSpeech

/// Admission by measured load, not by a count of sessions: a new session is refused (503 with
/// `Retry-After`, reason `overload` in /metrics) while a new talker could not be kept within
/// the lag target, that is while
/// - sessions with speech have been waiting for a shared decoder for `waitGrace` or more (all
///   decoders are held by utterances in progress), or
/// - the sessions that have audio waiting for analysis are behind real time by more than
///   `lagTarget` (the 95th percentile of their lags: the workers cannot keep up).
/// It is admitted again once nobody waits and that lag is under half the target (hysteresis,
/// so that admission does not flap with every tick).
///
/// Silent sessions cost neither a decoder nor analysis, so they do not count: thousands of
/// connected, quiet sessions leave room for talkers. A value type fed measurements at each
/// tick, with no clock of its own.
struct Admission: Sendable {
    /// Lag above which the server is too busy for another talker (seconds of audio).
    var lagTarget: Double = 1
    /// How long sessions may wait for a decoder before the server counts as busy (seconds).
    var waitGrace: Double = 1
    /// A session counts as having audio waiting when its backlog is over one recognizer block.
    var laggingFloor: Double = 0.15

    /// Whether new sessions are refused now.
    private(set) var isBusy = false
    /// The lag measured last (the 95th percentile of lagging sessions), for /metrics.
    private(set) var lag = 0.0
    private var waitingSince: Double?

    /// Takes one measurement: monotonic `now`, the engine's load, every live session's lag.
    mutating func measure(now: Double, load: RecognizerLoad, lags: [Double]) {
        if load.waiting > 0 {
            if waitingSince == nil { waitingSince = now }
        } else {
            waitingSince = nil
        }
        let short = waitingSince.map { now - $0 >= waitGrace } ?? false
        lag = Self.percentile95(lags.filter { $0 > laggingFloor })
        if isBusy {
            isBusy = load.waiting > 0 || lag > lagTarget / 2
        } else {
            isBusy = short || lag > lagTarget
        }
    }

    /// The nearest-rank 95th percentile (0 for none).
    static func percentile95(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let rank = Int((0.95 * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }
}
