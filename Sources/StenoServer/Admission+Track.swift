// One session as admission follows it (`Admission.Track`): samples of its lane's work
// over the window, the rate since its last mark, whether it is speaking or pausing and
// since when, and, for a newcomer, whether it spoke within its grace. Admission.swift sums
// these into the projected demand.

extension Admission {
    /// One session's work over time: samples of its lane's cumulative busy seconds, at least a
    /// second apart, the oldest one at or before the start of the window; and whether it is
    /// speaking now, as the rate of its lane shows.
    struct Track: Sendable {
        /// When it was admitted; nil when it was proven before it was (re)tracked.
        var admittedAt: Double?
        var samples: [(at: Double, work: Double)]
        var work: Double { samples.last?.work ?? 0 }
        /// Where the rate now being measured began.
        var mark: (at: Double, work: Double)
        /// Speaking (true), in a pause (false), or not spoken yet since it was tracked (nil).
        var speaking: Bool?
        /// When the present utterance or pause began.
        var since = 0.0
        /// While speaking: when its rate fell under the speaking rate, if it has, and the work
        /// and seconds since (speech if it goes on, the pause's start if it does not).
        var quietSince: Double?
        var held: (work: Double, seconds: Double) = (0, 0)
        /// A newcomer: whether it has spoken within its grace, and whether that was learned.
        var spokeEarly = false
        var learned: Bool

        init(admittedAt: Double?, at: Double, work: Double) {
            self.admittedAt = admittedAt
            samples = [(at, work)]
            mark = (at, work)
            learned = admittedAt == nil
        }

        /// Samples stay a second or more apart: the last one moves until a second has passed.
        mutating func add(_ at: Double, _ work: Double) {
            let n = samples.count
            if n >= 2 && at - samples[n - 2].at < 1 {
                samples[n - 1] = (at, work)
            } else {
                samples.append((at, work))
            }
        }

        /// What a rate showed: lane work and seconds at a speaking rate, and the utterance or
        /// pause that ended (seconds).
        struct Seen {
            var speechWork = 0.0, speechSeconds = 0.0
            var utterance: Double?
            var pause: Double?
        }

        /// The lane's rate since the mark, once it spans `interval`: speaking or not, and the
        /// utterance or pause that ends.
        mutating func observe(now: Double, work: Double, speakingRate: Double, over interval: Double,
                              pauseMinimum: Double) -> Seen {
            var seen = Seen()
            let span = now - mark.at
            guard span >= interval else { return seen }
            let done = max(0, work - mark.work)
            let from = mark.at
            mark = (now, work)
            if done / span >= speakingRate {
                seen.speechWork = done
                seen.speechSeconds = span
                if speaking == true {
                    // A dip inside the utterance was speech too: a busy machine ends jobs in
                    // bursts, and only the ticks where one ended would overstate the cost.
                    seen.speechWork += held.work
                    seen.speechSeconds += held.seconds
                    held = (0, 0)
                    quietSince = nil
                    return seen
                }
                if speaking == false { seen.pause = from - since }
                speaking = true
                since = from
                quietSince = nil
            } else if speaking == true {
                let quiet = quietSince ?? from
                quietSince = quiet
                held.work += done
                held.seconds += span
                if now - quiet >= pauseMinimum { seen.utterance = endUtterance(at: quiet) }
            }
            return seen
        }

        /// Its speech ended at `end`: a pause begins; returns the utterance's length.
        mutating func endUtterance(at end: Double) -> Double {
            let length = max(0, end - since)
            speaking = false
            since = end
            quietSince = nil
            held = (0, 0)
            return length
        }

        /// Drops the samples older than the one at or before `start`.
        mutating func trim(before start: Double) {
            var drop = 0
            while drop + 1 < samples.count && samples[drop + 1].at <= start { drop += 1 }
            if drop > 0 { samples.removeFirst(drop) }
        }
    }
}
