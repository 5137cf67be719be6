import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// Where and how an utterance ended: the parts of a final's latency that are the engine's.
/// Times on the recognizer's input timeline (seconds) unless said otherwise.
public struct UtteranceTiming: Sendable, Hashable {
    /// After which sample (as a time) the speech detector had seen enough silence to end the
    /// utterance; nil when something else ended it (a finalize, the end, the maximum length).
    public var detectorDecidedAt: Double?
    /// How far analysis had got when the utterance closed: the end of the block that showed
    /// the detector's decision (or of the audio a finalize or end took).
    public var closedAt: Double
    /// Monotonic clock (`SystemClock.now()`) when closing the utterance began.
    public var closeBegan: Double
    /// Wall seconds of `ps_end_utt` (the end of the search; with `-fwdflat yes` its second pass).
    public var endSearchSeconds: Double
    /// Wall seconds of reading the final's words: the lattice, its best path (`-bestpath`) and
    /// the word posteriors that are the confidences.
    public var wordsSeconds: Double
    /// Wall seconds of the alternatives (n-best), 0 without.
    public var alternativesSeconds: Double
    /// CPU seconds of the thread for all of it (the wall times above include waiting for a
    /// core on a busy machine).
    public var cpuSeconds: Double

    public init(detectorDecidedAt: Double?, closedAt: Double, closeBegan: Double, endSearchSeconds: Double,
                wordsSeconds: Double, alternativesSeconds: Double, cpuSeconds: Double) {
        self.detectorDecidedAt = detectorDecidedAt
        self.closedAt = closedAt
        self.closeBegan = closeBegan
        self.endSearchSeconds = endSearchSeconds
        self.wordsSeconds = wordsSeconds
        self.alternativesSeconds = alternativesSeconds
        self.cpuSeconds = cpuSeconds
    }
}

/// Times the closing of an utterance for its `UtteranceTiming`: from when it is made, in
/// wall-clock laps (one a step: the end of the search, reading the words, …) and in the CPU
/// seconds of the calling thread (what closing costs, whatever the load).
public struct UtteranceStopwatch {
    /// Monotonic clock (`SystemClock.now()`) when it was made.
    public let began: Double
    private let cpuBegan: Double
    private var lapBegan: Double

    public init() {
        began = SystemClock.now()
        cpuBegan = Self.threadCPUSeconds()
        lapBegan = began
    }

    /// Wall seconds since the last lap (the first: since it was made).
    public mutating func lap() -> Double {
        let now = SystemClock.now()
        defer { lapBegan = now }
        return now - lapBegan
    }

    /// CPU seconds of the calling thread since it was made.
    public var cpuSeconds: Double { Self.threadCPUSeconds() - cpuBegan }

    private static func threadCPUSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}
