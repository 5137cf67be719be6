import StenoSpeech

/// Admission by predicted compute demand, with the measured lag as a backstop: a new session
/// is refused (503 with `Retry-After`, reason `overload` in /metrics) while another talker
/// would not fit in the workers' time.
///
/// ## The prediction
/// Every session's demand is the share of one worker its lane's jobs took (wall-clock time
/// inside them, ``WorkerPool/Work/busy``, so a machine shared with other work makes jobs
/// dearer) over the last `window` seconds. The projected utilization is
///
///     (Σ sessions' demand + one newcomer at the average talker's demand) ÷ workers
///
/// and new sessions are refused while it is over `utilizationTarget`, admitted again once it
/// is `hysteresis` under it. The average talker is the mean demand of the sessions whose
/// demand over a whole window is a talker's (`talkerFloor` or more; `presumedTalker` before
/// any has been measured).
///
/// Lag builds only seconds after a ramp of talkers has been admitted, and a window's average
/// is slow to rise too; so a session younger than `window`, which has not had time to show its
/// rate, counts as the average talker for the rest of its window as soon as it shows speech
/// (its lane's rate since admission is a talker's): each newcomer of a ramp is counted in full
/// from its first second of speech, not a window later. Until it speaks it counts only its
/// work, so that a burst of quiet connections (thousands of tabs opening) is not taken for a
/// burst of talkers; the cost is that sessions admitted together and silent until all are in
/// can overshoot by as many as were admitted before the first of them spoke. A session
/// silent for the whole window (no lane work) counts 0 and is no longer followed: quiet
/// connections cost nothing here, however many there are.
///
/// ## The backstop
/// The prediction cannot know a session that has been quiet for an hour is about to talk, nor
/// a recognizer shortage; so new sessions are refused as well while
/// - sessions with speech have been waiting for a shared decoder for `waitGrace` or more (all
///   decoders are held by utterances in progress), or
/// - the sessions that have audio waiting for analysis are behind real time by more than
///   `lagTarget` (the 95th percentile of their lags),
/// until nobody waits and that lag is under half the target.
///
/// A value type fed measurements (times, the lanes' work, lags) from outside, with no clock
/// and no pool of its own, so it is tested in memory with any number of sessions. `Key` names
/// a session (the server uses the session object's identity).
struct Admission<Key: Hashable & Sendable>: Sendable {
    /// Lag above which the server is too busy for another talker (seconds of audio).
    var lagTarget: Double = 1
    /// How long sessions may wait for a decoder before the server counts as busy (seconds).
    var waitGrace: Double = 1
    /// A session counts as having audio waiting when its backlog is over one recognizer block.
    var laggingFloor: Double = 0.15
    /// The projected share of the workers' time above which new sessions are refused; 0
    /// refuses by the backstop alone.
    var utilizationTarget: Double = 0.9
    /// Refused sessions are admitted again once the projection is this far under the target.
    var hysteresis: Double = 0.05
    /// How far back a session's demand is measured, and how long a new one counts as
    /// unproven (seconds). Utterances and pauses last seconds; 15 s holds a few of each.
    var window: Double = 15
    /// What a talker is presumed to cost (workers) until one has been measured for a whole
    /// window: speaking half the time at the engine's RTF ≈ 0.45, with its overhead.
    var presumedTalker: Double = 0.25
    /// Demand under which a session is not a talker (streaming silence costs ≈ 0.005 workers).
    var talkerFloor: Double = 0.02

    /// Whether new sessions are refused now.
    private(set) var isBusy = false
    /// Why, when they are.
    private(set) var reason: Reason?
    /// The lag measured last (the 95th percentile of lagging sessions), for /metrics.
    private(set) var lag = 0.0
    /// The projected utilization measured last, a newcomer included (for /metrics).
    private(set) var utilization = 0.0
    /// The mean demand of the sessions talking now (workers; the last one measured when none
    /// does, `presumedTalker` before any): what the newcomer is counted at.
    var talkerDemand: Double { measuredTalkerDemand ?? presumedTalker }
    /// Sessions followed now (those with work in the window, or younger than it).
    var trackedCount: Int { tracks.count }

    enum Reason: String, Sendable {
        /// The projected utilization is over the target.
        case demand
        /// Live talkers are behind by more than the lag target.
        case lag
        /// Sessions with speech wait for a shared decoder.
        case recognizers
    }

    private var waitingSince: Double?
    private var lagBusy = false
    private var demandBusy = false
    private var measuredTalkerDemand: Double?
    private var tracks: [Key: Track] = [:]

    /// One session's work over time: samples of its lane's cumulative busy seconds, at least a
    /// second apart, the oldest one at or before the start of the window.
    private struct Track: Sendable {
        /// When it was admitted; nil when it was proven before it was (re)tracked.
        var admittedAt: Double?
        var samples: [(at: Double, work: Double)]
        var work: Double { samples.last?.work ?? 0 }

        /// Samples stay a second or more apart: the last one moves until a second has passed.
        mutating func add(_ at: Double, _ work: Double) {
            let n = samples.count
            if n >= 2 && at - samples[n - 2].at < 1 {
                samples[n - 1] = (at, work)
            } else {
                samples.append((at, work))
            }
        }

        /// Drops the samples older than the one at or before `start`.
        mutating func trim(before start: Double) {
            var drop = 0
            while drop + 1 < samples.count && samples[drop + 1].at <= start { drop += 1 }
            if drop > 0 { samples.removeFirst(drop) }
        }
    }

    init() {}

    /// A session admitted at `now`: unproven, counted as a newcomer until a window has passed.
    mutating func opened(_ key: Key, now: Double) {
        tracks[key] = Track(admittedAt: now, samples: [(now, 0)])
    }

    /// A session gone: its demand leaves the sum.
    mutating func closed(_ key: Key) {
        tracks[key] = nil
    }

    /// Takes one measurement at monotonic `now`: the engine's load, every live talker's lag,
    /// the cumulative lane work (busy seconds) of the sessions that had something to do since
    /// the last one (the others have done no work meanwhile), and how many workers there are.
    mutating func measure(now: Double, load: RecognizerLoad, lags: [Double], work: [(Key, Double)] = [], workers: Int = 1) {
        record(now: now, work: work)
        let demand = projectDemand(now: now)
        utilization = demand / Double(max(1, workers))

        if load.waiting > 0 {
            if waitingSince == nil { waitingSince = now }
        } else {
            waitingSince = nil
        }
        let short = waitingSince.map { now - $0 >= waitGrace } ?? false
        lag = Self.percentile95(lags.filter { $0 > laggingFloor })
        lagBusy = lagBusy ? load.waiting > 0 || lag > lagTarget / 2 : short || lag > lagTarget
        if utilizationTarget > 0 {
            demandBusy = demandBusy ? utilization > utilizationTarget - hysteresis : utilization > utilizationTarget
        } else {
            demandBusy = false
        }
        isBusy = lagBusy || demandBusy
        reason = !isBusy ? nil : demandBusy ? .demand : short || load.waiting > 0 ? .recognizers : .lag
    }

    private mutating func record(now: Double, work: [(Key, Double)]) {
        for (key, value) in work {
            guard tracks[key] != nil else {
                // Back from a quiet spell longer than the window (or never opened here): proven,
                // its demand counted from now on.
                tracks[key] = Track(admittedAt: nil, samples: [(now, value)])
                continue
            }
            tracks[key]!.add(now, value)
        }
    }

    /// Σ demand of every tracked session plus one newcomer at the talkers' mean, in workers;
    /// drops sessions that have done nothing for a whole window, and learns what sessions
    /// completing their first window cost.
    private mutating func projectDemand(now: Double) -> Double {
        let start = now - window
        var total = 0.0
        var talkers = 0.0, talkerCount = 0
        var idle: [Key] = []
        // In place (the values are a mutable collection): no copy of thousands of tracks a tick.
        for index in tracks.values.indices {
            tracks.values[index].trim(before: start)
            let track = tracks.values[index]
            if let admitted = track.admittedAt {
                let age = now - admitted
                if age < window {
                    // Unproven. Once it shows speech (its rate so far is a talker's), it counts
                    // as the average talker for the rest of its window; until then its work.
                    let talking = track.work / max(age, 1) >= talkerFloor
                    total += (track.work + (talking ? talkerDemand * (window - age) : 0)) / window
                    continue
                }
                tracks.values[index].admittedAt = nil
            }
            // Over the window, or the little more back to the sample that starts it (samples
            // are a second apart); a session tracked again lately did nothing before its first.
            let base = track.samples[0]
            let demand = max(0, track.work - base.work) / max(window, now - base.at)
            if demand == 0 && base.at <= start {
                idle.append(tracks.keys[index])
                continue
            }
            total += demand
            if demand >= talkerFloor {
                talkers += demand
                talkerCount += 1
            }
        }
        for key in idle { tracks[key] = nil }
        if talkerCount > 0 { measuredTalkerDemand = talkers / Double(talkerCount) }
        return total + talkerDemand
    }

    /// The nearest-rank 95th percentile (0 for none).
    static func percentile95(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let rank = Int((0.95 * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }
}
