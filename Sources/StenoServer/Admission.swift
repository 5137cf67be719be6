import StenoSpeech

/// Admission by predicted compute demand, with the measured lag as a backstop: a new session
/// is refused (503 with `Retry-After`, reason `overload` in /metrics) while another talker
/// would not fit in the workers' time.
///
/// ## The prediction
/// Every session's demand is the share of one worker its lane's jobs took (wall-clock time
/// inside them, ``WorkerPool/Work/busy``, so a machine shared with other work makes jobs
/// dearer) over the last `window` seconds; an engine that recognizes in a worker process of
/// its own (Whisper) has the CPU it spent for the session charged to the session's lane as it
/// answers (``SpeechRecognizer/engineSeconds``), so its demand is what it costs the machine
/// whichever process does the work. The projected utilization is
///
///     (Σ sessions' demand + one newcomer at the talker's demand) ÷ workers
///
/// and new sessions are refused while it is over `utilizationTarget`, admitted again once it
/// is `hysteresis` under it.
///
/// ## What a talker costs
/// A talker's demand is what it costs per second of speech times the share of its time it
/// speaks, both measured, each with a prior that only matters until it has been:
/// - **cost per second of speech**: the lanes' work in their utterances over the utterances'
///   time, all sessions together, remembered for `costMemory`. An utterance runs from a tick
///   where the lane worked at a speaking rate (`speakingRate`: a recognizer is engaged; a
///   quiet stream's gate costs a twentieth of it) to the last such tick before `pauseMinimum`
///   without one; the dips inside it count (a busy machine ends jobs in bursts). It is the engine's RTF on this machine with Steno's overhead, and a
///   few seconds of anyone's speech measure it (the prior, `presumedTalker ÷
///   presumedSpeechFraction`, weighs as `priorSpeechSeconds` of speech).
/// - **share of time speaking**: mean utterance ÷ (mean utterance + mean pause), each mean the
///   time seen in that state over the number of them that have ended (the time-on-test
///   estimate: an utterance or pause still going counts its time so far but not as one ended,
///   so a stream that has talked without a pause shows it, and a cut-off interval biases
///   nothing), over every session that has spoken. A newcomer's rate over its first seconds
///   would not do: it has just started to speak (most of them start by talking), which
///   shows twice its long-run share. The pause before a session's first speech is not one
///   of a talker's pauses (it began at the handshake, and a tab may sit quiet for an hour),
///   nor is one longer than the window (the session is a quiet one then, counted by what it
///   does). The prior, `presumedSpeechFraction` of a cycle of `priorCycle` seconds, weighs
///   as `priorIntervals` of each.
///
/// Sessions measured over a whole window (`talkerFloor` or more) are talkers seen as they
/// are; their mean is blended in, the estimate above weighing as `priorTalkers` of them.
///
/// ## Newcomers
/// Lag builds only seconds after a ramp of talkers has been admitted, and a window's average
/// is slow to rise too; so a session younger than `window` counts as the talker for the rest
/// of its window as soon as it shows speech (its lane's rate since admission is a talker's):
/// each newcomer of a ramp is counted in full from its first second of speech.
///
/// Before it speaks a newcomer counts, for its first `newcomerGrace` seconds, as the share of
/// recent newcomers that spoke within their grace (learned one newcomer at a time, each
/// weighing `newcomerLearning`, once its grace is over so that a talker found early does not
/// count before the quiet ones found late) times a talker; it is added to the projection at
/// the handshake (``opened(_:now:)``), not at the next tick, so a burst of handshakes between
/// two ticks is counted too. Talkers who all connect before any speaks are held near the
/// line once newcomers have been seen to talk; a reconnect storm of quiet microphones is
/// let in as fast as the newcomers before it proved quiet (a fresh server has seen none and
/// lets the first burst in whole: the issue's ≥ 1,000 quiet sessions at once; after talkers,
/// a storm comes in over a few `Retry-After` rounds, each proving its quiet sessions quiet).
/// After the grace a newcomer that has not spoken counts only its work; a session silent
/// for the whole window (no lane work) counts 0 and is no longer followed: quiet
/// connections cost nothing here, however many there are.
///
/// ## The backstop
/// The prediction cannot know a session that has been quiet for an hour is about to talk, nor
/// a recognizer shortage; so new sessions are refused as well while
/// - sessions with speech have been waiting for a shared decoder for `waitGrace` or more (all
///   decoders are held by utterances in progress), or
/// - the sessions that have audio waiting for analysis are behind real time by more than
///   `lagTarget` (the 95th percentile of their lags; a Whisper session's lag is how long the
///   oldest final it awaits has been due: the worker falling behind shows here),
/// until nobody waits and that lag is under half the target.
///
/// A value type fed measurements (times, the lanes' work, lags) from outside, with no clock
/// and no pool of its own, so it is tested in memory with any number of sessions. `Key` names
/// a session (the server uses the session object's identity). It counts no sessions: how
/// many are live (the connection limit, `--max-sessions`) is the session registry's
/// `liveCount`, which the router reads beside `isBusy`; the tracks here are sessions' demand,
/// and a quiet session has none.
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
    /// The prior of a talker's demand (workers) before anything has been measured: speaking
    /// half the time at an RTF ≈ 0.45, with its overhead. Measurements replace it within
    /// seconds of the first speech.
    var presumedTalker: Double = 0.25
    /// The prior share of its time a talker speaks (people in conversation: about half).
    var presumedSpeechFraction: Double = 0.5
    /// How many seconds of speech the prior cost per speech second weighs as.
    var priorSpeechSeconds: Double = 1
    /// The length of the prior's utterance-and-pause cycle (seconds), and how many of each it
    /// weighs as: little, so that a stream that never pauses shows it within seconds.
    var priorCycle: Double = 6
    var priorIntervals: Double = 0.25
    /// How many talkers measured over a whole window the estimate from cost and share weighs as.
    var priorTalkers: Double = 1
    /// How long measured costs and intervals are remembered (the time constant, seconds): long
    /// enough for many utterances, short enough to follow a machine that gets busier.
    var costMemory: Double = 120
    /// A lane working at this rate or more over a tick (share of a worker) has its recognizer
    /// engaged: speech. Streaming silence costs ≈ 0.005, speech ≈ the engine's RTF (0.2–0.5).
    var speakingRate: Double = 0.1
    /// Rates are taken over at least this long (seconds): shorter, a single job's end decides.
    var rateInterval: Double = 0.2
    /// Speech ends after this long below the speaking rate (seconds): a gap between jobs is
    /// not a pause, even on a busy machine that ends a lane's jobs in bursts. Cutting speech
    /// and pauses a little differently moves cost and share against each other and leaves
    /// their product, the demand, as it is.
    var pauseMinimum: Double = 1
    /// Demand under which a session is not a talker (streaming silence costs ≈ 0.005 workers).
    var talkerFloor: Double = 0.02
    /// How long after its handshake a newcomer that came to talk has usually started (seconds).
    var newcomerGrace: Double = 3
    /// What each newcomer's outcome (spoke within its grace or not) weighs in the learned share.
    var newcomerLearning: Double = 0.3

    /// Whether new sessions are refused now.
    private(set) var isBusy = false
    /// Why, when they are.
    private(set) var reason: Reason?
    /// The lag measured last (the 95th percentile of lagging sessions), for /metrics.
    private(set) var lag = 0.0
    /// The projected utilization, a newcomer included: measured at the last tick, plus the
    /// newcomers admitted since (for /metrics and the decision).
    private(set) var utilization = 0.0
    /// The share of recent newcomers that spoke within their grace (0 before any: nothing
    /// learned, so a fresh server's first burst of connections is let in whole).
    private(set) var newcomersTalking = 0.0
    /// Workers' time per second of speech (measured, the prior until then).
    var speechCost: Double {
        (speech.sum + priorSpeechSeconds * presumedTalker / presumedSpeechFraction) / (speech.count + priorSpeechSeconds)
    }
    /// The share of its time a talker speaks (measured, the prior until then), from the
    /// intervals ended (remembered) and those going on (at the last measurement).
    var speechFraction: Double {
        let weight = priorIntervals
        let utterance = (utterances.sum + ongoingUtterances + weight * presumedSpeechFraction * priorCycle)
            / (utterances.count + weight)
        let pause = (pauses.sum + ongoingPauses + weight * (1 - presumedSpeechFraction) * priorCycle)
            / (pauses.count + weight)
        return utterance / max(utterance + pause, 1e-9)
    }
    /// What a talker takes (share of one worker): what the newcomer is counted at.
    var talkerDemand: Double {
        let estimate = speechCost * speechFraction
        return (proven.sum + priorTalkers * estimate) / (proven.count + priorTalkers)
    }
    /// Sessions followed now (those with work in the window, or younger than it): not the
    /// sessions open or live, which the registry counts.
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
    private var workers = 1
    /// Talkers measured over a whole window at the last measurement that had any (their
    /// demand summed, and how many).
    private var proven = Tally()
    /// Lane work in speaking ticks and those ticks' seconds; utterances and pauses that ended
    /// (seconds, and how many): all decaying with `costMemory`.
    private var speech = Tally(), utterances = Tally(), pauses = Tally()
    private var decayedAt: Double?
    /// Seconds of the utterances and talkers' pauses going on, at the last measurement.
    private var ongoingUtterances = 0.0, ongoingPauses = 0.0
    private var tracks: [Key: Track] = [:]

    /// A sum and a count (or a weight).
    private struct Tally: Sendable {
        var sum = 0.0
        var count = 0.0

        mutating func add(_ value: Double, _ weight: Double = 1) {
            sum += value
            count += weight
        }

        mutating func scale(_ factor: Double) {
            sum *= factor
            count *= factor
        }
    }

    init() {}

    /// A session admitted at `now`: unproven, counted as a newcomer until a window has passed,
    /// and added to the projection at once at what a newcomer is presumed to take.
    mutating func opened(_ key: Key, now: Double) {
        tracks[key] = Track(admittedAt: now, at: now, work: 0)
        utilization += newcomersTalking * talkerDemand / Double(workers)
        decideDemand()
    }

    /// A session gone: its demand leaves the sum.
    mutating func closed(_ key: Key) {
        tracks[key] = nil
    }

    /// Takes one measurement at monotonic `now`: the engine's load, every live talker's lag,
    /// the cumulative lane work (busy seconds) of the sessions that had something to do since
    /// the last one (the others have done no work meanwhile), and how many workers there are.
    mutating func measure(now: Double, load: RecognizerLoad, lags: [Double], work: [(Key, Double)] = [], workers: Int = 1) {
        self.workers = max(1, workers)
        decay(to: now)
        record(now: now, work: work)
        let demand = projectDemand(now: now)
        utilization = demand / Double(self.workers)

        if load.waiting > 0 {
            if waitingSince == nil { waitingSince = now }
        } else {
            waitingSince = nil
        }
        let short = waitingSince.map { now - $0 >= waitGrace } ?? false
        lag = Self.percentile95(lags.filter { $0 > laggingFloor })
        lagBusy = lagBusy ? load.waiting > 0 || lag > lagTarget / 2 : short || lag > lagTarget
        decideDemand()
        if isBusy && !demandBusy { reason = short || load.waiting > 0 ? .recognizers : .lag }
    }

    private mutating func decideDemand() {
        if utilizationTarget > 0 {
            demandBusy = demandBusy ? utilization > utilizationTarget - hysteresis : utilization > utilizationTarget
        } else {
            demandBusy = false
        }
        isBusy = lagBusy || demandBusy
        reason = !isBusy ? nil : demandBusy ? .demand : reason ?? .lag
    }

    /// What was measured fades with `costMemory`, so the estimates follow a machine whose
    /// cost changes (other work arriving) and forget talkers long gone.
    private mutating func decay(to now: Double) {
        if let last = decayedAt, now > last {
            // 1 / (1 + t/τ): e^(−t/τ) for ticks a fraction of a second apart, and never below 0.
            let factor = 1 / (1 + (now - last) / costMemory)
            speech.scale(factor)
            utterances.scale(factor)
            pauses.scale(factor)
        }
        decayedAt = now
    }

    private mutating func record(now: Double, work: [(Key, Double)]) {
        for (key, value) in work {
            guard tracks[key] != nil else {
                // Back from a quiet spell longer than the window (or never opened here): proven,
                // its demand counted from now on.
                tracks[key] = Track(admittedAt: nil, at: now, work: value)
                continue
            }
            tracks[key]!.add(now, value)
            learn(tracks[key]!.observe(now: now, work: value, speakingRate: speakingRate,
                                       over: rateInterval, pauseMinimum: pauseMinimum))
        }
    }

    /// Adds what a track's rate showed to the tallies.
    private mutating func learn(_ seen: Track.Seen) {
        if seen.speechSeconds > 0 { speech.add(seen.speechWork, seen.speechSeconds) }
        if let utterance = seen.utterance { utterances.add(utterance) }
        // A pause longer than the window was a quiet spell, not a talker's.
        if let pause = seen.pause, pause < window { pauses.add(pause) }
    }

    /// Σ demand of every tracked session plus one newcomer at the talker's, in workers; drops
    /// sessions that have done nothing for a whole window, learns what sessions completing
    /// their first window cost and whether newcomers talk, and sums the utterances and
    /// pauses going on.
    private mutating func projectDemand(now: Double) -> Double {
        let start = now - window
        let talker = talkerDemand
        var total = 0.0
        var talkers = Tally()
        var idle: [Key] = []
        var utterancesGoingOn = 0.0, pausesGoingOn = 0.0
        // In place (the values are a mutable collection): no copy of thousands of tracks a tick.
        for index in tracks.values.indices {
            tracks.values[index].trim(before: start)
            // A lane that stopped being reported has done nothing since: its speech ended.
            if tracks.values[index].speaking == true, now - tracks.values[index].mark.at >= pauseMinimum {
                let track = tracks.values[index]
                let utterance = tracks.values[index].endUtterance(at: track.quietSince ?? track.mark.at)
                utterances.add(utterance)
            }
            let track = tracks.values[index]
            switch track.speaking {
            case true?: utterancesGoingOn += now - track.since
            case false? where now - track.since < window: pausesGoingOn += now - track.since
            default: break
            }
            if let admitted = track.admittedAt {
                let age = now - admitted
                // Once it shows speech (its rate so far is a talker's) it counts as a talker for
                // the rest of its window; a newcomer in its grace, as the share that talk.
                let talking = track.work / max(age, 1) >= talkerFloor
                if !track.learned {
                    if talking && age < newcomerGrace { tracks.values[index].spokeEarly = true }
                    if age >= newcomerGrace {
                        let spoke: Double = tracks.values[index].spokeEarly ? 1 : 0
                        newcomersTalking += newcomerLearning * (spoke - newcomersTalking)
                        tracks.values[index].learned = true
                    }
                }
                if age < window {
                    let presumed = talking ? 1 : age < newcomerGrace ? newcomersTalking : 0
                    total += (track.work + presumed * talker * (window - age)) / window
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
            if demand >= talkerFloor { talkers.add(demand) }
        }
        for key in idle { tracks[key] = nil }
        ongoingUtterances = utterancesGoingOn
        ongoingPauses = pausesGoingOn
        if talkers.count > 0 { proven = talkers }
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
