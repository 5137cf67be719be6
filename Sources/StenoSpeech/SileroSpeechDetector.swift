import StenoCore

#if canImport(Glibc)
import Glibc
#endif

/// A session's speech detector on Silero VAD (`SileroVAD`): each 32 ms window's speech
/// probability, with hysteresis. Speech starts when `onsetWindows` windows in a row reach
/// `threshold` (at the first of them); it ends when the probability stays below
/// `negativeThreshold` for `postSpeech` seconds (at the start of that run), Silero's own
/// streaming rule. A window in between goes on with what was going on.
///
/// Other people talking (babble, a panel, a room) is speech to Silero: it would never hear the
/// talker pause. So once speech has gone on for `foregroundAfter` seconds without a pause, the
/// talker's level is followed too (`foreground`: the 90th percentile of the last 3 s of speech
/// windows' levels, each smoothed over 0.26 s), and a window more than `foregroundDrop` dB below
/// it is not the talker's speech, whatever Silero says: the talker's pauses show (in babble at
/// 10 dB SNR, finals p95 13 s after their last word became 1.4 s in its first measure;
/// bench/README.md, "Noisy speech"). Before that, Silero's own ends stand: the level would end soft last syllables.
///
/// A cheap first gate keeps quiet sessions off the model: while no speech is open and no model
/// handle is held, a window whose level is below `quietBelow` (dBFS RMS) is not speech, without
/// the model. The first louder window borrows a handle (given the last 0.25 s to settle on) and
/// keeps it until the session has been below the gate for `releaseAfter` seconds.
///
/// It decides a window once it has all of it, and a change once its run is long enough:
/// `decidedSamples` stops at a run that may still become one. Chunking does not change the
/// events. One thread at a time, like the recognizer that owns it.
public final class SileroSpeechDetector: VoiceDetector {
    public struct Settings: Sendable {
        public var threshold: Float = 0.5
        public var negativeThreshold: Float = 0.35
        public var onsetWindows = 2
        public var postSpeech = 0.2
        public var quietBelow = -50.0
        public var releaseAfter = 2.0
        public var foregroundDrop: Float = 10
        /// Seconds of speech without a pause before the talker's level is looked at: Silero's
        /// own ends are better where it hears pauses (the level would end soft last syllables).
        public var foregroundAfter = 4.0

        public init(postSpeech: Double = 0.2, quietBelow: Double = -50) {
            self.postSpeech = postSpeech
            self.quietBelow = quietBelow
        }
    }

    private let vad: SileroVAD
    private let settings: Settings
    private let window = SileroVAD.window
    private let quietLevel: Float
    private let postSpeechWindows: Int
    private let releaseWindows: Int
    private var handle: SileroVAD.Handle?
    /// The window being filled.
    private var pending: [Float] = []
    /// The last windows heard without the model, to settle a fresh handle on.
    private var recent: [[Float]] = []
    /// Windows decided so far.
    private var windows = 0
    private var speaking = false
    /// The run that may change what goes on: its first window and its length.
    private var runStart = 0
    private var runLength = 0
    /// Windows in a row below the gate.
    private var quietWindows = 0
    private var fed = 0
    /// The last 8 windows' mean squares (a 0.26 s level), and the smoothed levels (dB) of the
    /// last 3 s of speech windows, for the talker's level.
    private var recentPower: [Float] = []
    private var speechLevels: [Float] = []
    /// The window the speech going on started at.
    private var speechSince = 0

    public init(vad: SileroVAD, settings: Settings) {
        self.vad = vad
        self.settings = settings
        quietLevel = Float(pow(10, settings.quietBelow / 20))
        postSpeechWindows = max(1, Int((settings.postSpeech * Double(SileroVAD.sampleRate) / Double(SileroVAD.window)).rounded(.up)))
        releaseWindows = Int(settings.releaseAfter * Double(SileroVAD.sampleRate) / Double(SileroVAD.window))
        pending.reserveCapacity(window)
    }

    public var decidedSamples: Int { (runLength > 0 ? runStart : windows) * window }
    public var undecidedSamples: Int { fed - decidedSamples }
    /// Whether it holds a model handle now (tests: a quiet session holds none).
    public var holdsModel: Bool { handle != nil }

    public func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        fed += samples.count
        var index = samples.startIndex
        while index < samples.endIndex {
            let count = min(samples.endIndex - index, window - pending.count)
            for i in index..<(index + count) {
                let x = samples[i]
                pending.append(x.isNaN ? 0 : min(1, max(-1, x)))
            }
            index += count
            if pending.count == window {
                decide(&events)
                pending.removeAll(keepingCapacity: true)
            }
        }
        return events
    }

    /// The talker's level (dB): the 90th percentile of the speech windows' smoothed levels, once
    /// there is a second of them.
    private var foreground: Float? {
        guard speechLevels.count >= 31 else { return nil }
        return speechLevels.sorted()[speechLevels.count * 9 / 10]
    }

    private func decide(_ events: inout [TranscriberEvent]) {
        var sum: Float = 0
        for x in pending { sum += x * x }
        let quiet = (sum / Float(window)).squareRoot() < quietLevel
        recentPower.append(sum / Float(window))
        if recentPower.count > 8 { recentPower.removeFirst() }
        let level = 10 * log10(recentPower.reduce(0, +) / Float(recentPower.count) + 1e-12)
        quietWindows = quiet ? quietWindows + 1 : 0
        var probability: Float = 0
        if handle == nil, !speaking, quiet {
            recent.append(pending)
            if recent.count > 8 { recent.removeFirst() }
        } else {
            if handle == nil, let fresh = try? vad.borrow() {
                for var earlier in recent { _ = earlier.withUnsafeMutableBufferPointer { fresh.probability($0.baseAddress!) } }
                recent.removeAll()
                handle = fresh
            }
            if let handle { probability = pending.withUnsafeMutableBufferPointer { handle.probability($0.baseAddress!) } }
        }
        let at = windows
        windows += 1
        let long = speaking && Double((at - speechSince) * window) >= settings.foregroundAfter * Double(SileroVAD.sampleRate)
        let background = long && (foreground.map { level < $0 - settings.foregroundDrop } ?? false)
        if probability >= settings.threshold {
            speechLevels.append(level)
            if speechLevels.count > 94 { speechLevels.removeFirst() }
        }
        if !speaking {
            if probability >= settings.threshold {
                if runLength == 0 { runStart = at }
                runLength += 1
                if runLength >= settings.onsetWindows {
                    speaking = true
                    speechSince = runStart
                    runLength = 0
                    events.append(.speechStarted(at: seconds(runStart)))
                }
            } else {
                runLength = 0
            }
        } else if probability < settings.negativeThreshold || background {
            if runLength == 0 { runStart = at }
            runLength += 1
            if runLength >= postSpeechWindows {
                speaking = false
                runLength = 0
                events.append(.speechEnded(at: seconds(runStart)))
            }
        } else {
            runLength = 0
        }
        if handle != nil, !speaking, runLength == 0, quietWindows >= releaseWindows { handle = nil }
    }

    private func seconds(_ windowIndex: Int) -> Double {
        Double(windowIndex * window) / Double(SileroVAD.sampleRate)
    }
}
