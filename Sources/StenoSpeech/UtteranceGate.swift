import Glibc
import StenoCore

/// Finds a session's utterances with a speech detector (`VoiceDetector`) for an engine that
/// hears whole utterances rather than a stream (Whisper), and keeps their audio until they are
/// cut: an utterance opens `preRoll` samples before the detector's onset (so no word's start
/// is clipped), closes `tail` samples after its end of speech, and is cut at
/// `maximumLength`, speech going on in the next one. While nobody speaks only the pre-roll is
/// kept.
///
/// With a `hangover`, the detector's end of speech opens a pause instead (`pauseStart`, where
/// it says speech ended), and the utterance closes only once the detector has decided
/// `hangover` samples past that start with no speech: speech that comes back sooner goes on in
/// the same utterance. A detector made to decide sooner (a shorter silence ends its speech)
/// with the slower one's silence as the hangover cuts utterances as the slower one alone would,
/// and tells of every pause early: an engine can start on the utterance's final as the pause
/// begins (`pauseCut`).
///
/// It counts the session's timeline in samples: 0 is the first sample heard, and it moves on
/// with every sample heard and every sample of silence the client left out (`skip`). The
/// detector's times (from its own first sample) are put on it; the speech events it reports
/// are on it.
///
/// Used from one thread at a time, like the recognizer that owns it.
public final class UtteranceGate {
    /// An utterance (or a piece of one) cut: its first sample and the sample it ends before,
    /// on the timeline, and its audio (empty when nothing of it was kept).
    public struct Cut {
        public let start: Int
        public let end: Int
        public let samples: ArraySlice<Float>
        /// Speech went on through the cut (the maximum length, a finalize while speaking): the
        /// speaker did not pause there.
        public var speechGoesOn = false
    }

    public let sampleRate: Int
    public let preRoll: Int
    public let tail: Int
    public let maximumLength: Int
    public let hangover: Int
    /// From this length on an utterance has no hangover: the next pause the detector hears ends
    /// it, however short (speech without pauses, such as a talker over babble, is cut at the
    /// talker's breaths rather than at the maximum length).
    public let longAfter: Int

    private let makeDetector: () throws(StenoError) -> any VoiceDetector
    private var detector: any VoiceDetector
    /// Where the detector's time 0 is, in samples.
    private var detectorBase = 0

    /// Samples on the timeline so far: heard, and left out by the client.
    public private(set) var received = 0
    /// The audio from `bufferStart` on.
    private var buffer: [Float] = []
    private var bufferStart = 0
    /// The first sample of the utterance going on (nil: none).
    public private(set) var utteranceStart: Int?
    /// Whether speech goes on, as the detector reported it (a pause included).
    public private(set) var isSpeaking = false
    /// Where the pause going on began (the detector's end of speech), while the hangover has
    /// not passed.
    public private(set) var pauseStart: Int?
    /// Where the last utterance cut ended.
    private var lastCutEnd = 0

    /// `makeDetector`: a fresh detector, now and after each silence the client left out.
    public init(sampleRate: Int, preRoll: Int, tail: Int, maximumLength: Int, hangover: Int = 0, longAfter: Int = .max,
                makeDetector: @escaping () throws(StenoError) -> any VoiceDetector) throws(StenoError) {
        self.longAfter = longAfter
        self.sampleRate = sampleRate
        self.preRoll = preRoll
        self.tail = tail
        self.maximumLength = maximumLength
        self.hangover = max(0, hangover)
        self.makeDetector = makeDetector
        self.detector = try makeDetector()
    }

    /// New audio through the detector: the speech events it decided, on the timeline, and the
    /// utterances it closed (at the end of speech plus the tail, or the maximum length), in
    /// order.
    public func hear(_ samples: UnsafeBufferPointer<Float>) -> (events: [TranscriberEvent], cuts: [Cut]) {
        var events: [TranscriberEvent] = []
        var cuts: [Cut] = []
        buffer.append(contentsOf: samples)
        received += samples.count
        for event in detector.accept(samples) {
            switch event {
            case .speechStarted(let at):
                let onset = detectorBase + sample(atSeconds: at)
                if let pause = pauseStart {
                    pauseStart = nil
                    if onset < pause + hangover { continue }  // speech came back: the utterance goes on
                    endPause(pause, events: &events, cuts: &cuts)
                }
                // The pre-roll does not reach back into the utterance cut before (its audio is heard there).
                if utteranceStart == nil { utteranceStart = max(bufferStart, onset - preRoll, lastCutEnd) }
                isSpeaking = true
                events.append(.speechStarted(at: seconds(max(0, onset))))
            case .speechEnded(let at):
                let end = detectorBase + sample(atSeconds: at)
                if hangover > 0, end - (utteranceStart ?? end) < longAfter {
                    pauseStart = end
                } else {
                    endPause(end, events: &events, cuts: &cuts)
                }
            default:
                break
            }
        }
        if let pause = pauseStart, detectorBase + detector.decidedSamples >= pause + hangover {
            pauseStart = nil
            endPause(pause, events: &events, cuts: &cuts)
        }
        if let start = utteranceStart, received - start >= maximumLength, let cut = cut(at: quietestPoint(), speechGoesOn: true) {
            cuts.append(cut)
        }
        let keep = preRoll + detector.undecidedSamples
        if utteranceStart == nil, buffer.count > keep {
            // Nothing to hear: keep only the pre-roll of an onset the detector may still report
            // (its report comes some time after the onset: a block, or the span it settles on).
            buffer.removeFirst(buffer.count - keep)
            bufferStart = received - buffer.count
        }
        return (events, cuts)
    }

    /// Speech ended at `end`: the utterance closes after the tail.
    private func endPause(_ end: Int, events: inout [TranscriberEvent], cuts: inout [Cut]) {
        isSpeaking = false
        events.append(.speechEnded(at: seconds(end)))
        // A cut made during the pause (the maximum length, a finalize) may have started the
        // utterance after the tail: then the piece cut here is empty.
        if let cut = cut(at: max(utteranceStart ?? 0, min(received, end + tail))) { cuts.append(cut) }
    }

    /// The utterance going on as it will be cut if the pause going on ends it (its audio
    /// through the tail after the pause's start); nil when there is no pause.
    public func pauseCut() -> Cut? {
        guard let pause = pauseStart, let start = utteranceStart else { return nil }
        let end = min(received, pause + tail)
        return Cut(start: start, end: end, samples: kept(from: start, to: end))
    }

    /// The audio kept from `start` to `end` (timeline samples), empty if none of it is.
    private func kept(from start: Int, to end: Int) -> ArraySlice<Float> {
        let from = start - bufferStart
        let to = min(buffer.count, end - bufferStart)
        return to > from ? buffer[from..<to] : []
    }

    /// Whether the audio from `sample` to the last heard is quiet against the utterance before
    /// it: no 50 ms in it comes within `decibels` of the utterance's loudest 50 ms.
    public func isQuiet(from sample: Int, decibels: Double = 20) -> Bool {
        guard let start = utteranceStart, sample >= start, sample >= bufferStart else { return false }
        func loudest(_ from: Int, _ to: Int) -> Float {
            var most: Float = 0
            var at = from
            while at < to {
                let end = min(to, at + 800)
                var sum: Float = 0
                for i in at..<end { sum += buffer[i] * buffer[i] }
                most = max(most, sum / Float(end - at))
                at = end
            }
            return most
        }
        let split = min(buffer.count, sample - bufferStart)
        let before = loudest(max(0, start - bufferStart), split)
        return loudest(split, buffer.count) < before * Float(pow(10, -decibels / 10))
    }

    /// Where an utterance at its maximum length is cut: the quietest 0.1 s of its last 1.5 s
    /// (a breath, a word's edge), not the middle of the word going on.
    private func quietestPoint() -> Int {
        let span = 1_600
        var best = received
        var least = Float.infinity
        var at = max((utteranceStart ?? received) + maximumLength / 2, received - sampleRate * 3 / 2, bufferStart)
        while at + span <= received - sampleRate / 10 {
            var sum: Float = 0
            for i in (at - bufferStart)..<(at - bufferStart + span) { sum += buffer[i] * buffer[i] }
            if sum <= least {  // the latest of equals: steady sound is cut as late as it can be
                least = sum
                best = at + span / 2
            }
            at += 320
        }
        return best
    }

    /// Cuts the utterance going on at `end` (a finalize, the end of input: `received`); nil if
    /// none goes on. If speech goes on, what follows is the next utterance's, from `end`.
    /// `speechGoesOn`: whether the speaker went on through the cut (by default: speech going on
    /// and not in a pause, cut at the last sample heard).
    public func cut(at end: Int, speechGoesOn: Bool? = nil) -> Cut? {
        guard let start = utteranceStart else { return nil }
        utteranceStart = isSpeaking ? end : nil
        lastCutEnd = max(lastCutEnd, end)
        let cut = Cut(start: start, end: end, samples: kept(from: start, to: end),
                      speechGoesOn: speechGoesOn ?? (isSpeaking && pauseStart == nil && end >= received))
        guard !cut.samples.isEmpty else { return cut }
        let to = min(buffer.count, end - bufferStart)
        // What follows the utterance stays, for the next one's pre-roll.
        let keepFrom = max(0, min(to - preRoll - detector.undecidedSamples, (utteranceStart ?? Int.max) - bufferStart))
        buffer.removeFirst(keepFrom)
        bufferStart += keepFrom
        return cut
    }

    /// The audio kept from `start` (at or after the utterance's start) to what was heard last.
    public func audio(from start: Int) -> ArraySlice<Float> {
        buffer[(start - bufferStart)...]
    }

    /// What the utterance going on said through `sample` is done with (its words were made
    /// final): it goes on from there, and the audio before it is let go.
    public func continueUtterance(from sample: Int) {
        utteranceStart = sample
        let keepFrom = max(0, min(buffer.count, sample - bufferStart))
        buffer.removeFirst(keepFrom)
        bufferStart += keepFrom
    }

    /// Speech going on ends here, with the input (at the end, or where the client left
    /// silence out): its `.speechEnded`, or nil if none went on. Cut the utterance first.
    public func endSpeech() -> TranscriberEvent? {
        guard isSpeaking else { return nil }
        isSpeaking = false
        utteranceStart = nil
        defer { pauseStart = nil }
        return .speechEnded(at: seconds(pauseStart ?? received))
    }

    /// `samples` of silence the client left out (end speech and cut the utterance first): the
    /// timeline moves on, nothing before it is kept, and a fresh detector hears what follows.
    public func skip(_ samples: Int) throws(StenoError) {
        received += max(0, samples)
        pauseStart = nil
        buffer.removeAll()
        bufferStart = received
        detector = try makeDetector()
        detectorBase = received
    }

    /// Lets go of the audio kept and of the utterance going on (the recognizer is cancelled).
    public func discard() {
        buffer.removeAll()
        utteranceStart = nil
        pauseStart = nil
    }

    public func seconds(_ samples: Int) -> Double { Double(samples) / Double(sampleRate) }

    /// The sample nearest to `seconds` after the detector's start.
    private func sample(atSeconds seconds: Double) -> Int { Int((seconds * Double(sampleRate)).rounded()) }
}
