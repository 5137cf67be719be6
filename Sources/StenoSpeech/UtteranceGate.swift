import StenoCore

/// Finds a session's utterances with a speech detector (`VoiceDetector`) for an engine that
/// hears whole utterances rather than a stream (Whisper), and keeps their audio until they are
/// cut: an utterance opens `preRoll` samples before the detector's onset (so no word's start
/// is clipped), closes `tail` samples after its end of speech, and is cut at
/// `maximumLength`, speech going on in the next one. While nobody speaks only the pre-roll is
/// kept.
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
    }

    public let sampleRate: Int
    public let preRoll: Int
    public let tail: Int
    public let maximumLength: Int

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
    /// Whether speech goes on, as the detector reported it.
    public private(set) var isSpeaking = false

    /// `makeDetector`: a fresh detector, now and after each silence the client left out.
    public init(sampleRate: Int, preRoll: Int, tail: Int, maximumLength: Int,
                makeDetector: @escaping () throws(StenoError) -> any VoiceDetector) throws(StenoError) {
        self.sampleRate = sampleRate
        self.preRoll = preRoll
        self.tail = tail
        self.maximumLength = maximumLength
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
                if utteranceStart == nil { utteranceStart = max(bufferStart, onset - preRoll) }
                isSpeaking = true
                events.append(.speechStarted(at: seconds(max(0, onset))))
            case .speechEnded(let at):
                let end = detectorBase + sample(atSeconds: at)
                isSpeaking = false
                events.append(.speechEnded(at: seconds(end)))
                if let cut = cut(at: min(received, end + tail)) { cuts.append(cut) }
            default:
                break
            }
        }
        if let start = utteranceStart, received - start >= maximumLength, let cut = cut(at: received) {
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

    /// Cuts the utterance going on at `end` (a finalize, the end of input: `received`); nil if
    /// none goes on. If speech goes on, what follows is the next utterance's, from `end`.
    public func cut(at end: Int) -> Cut? {
        guard let start = utteranceStart else { return nil }
        utteranceStart = isSpeaking ? end : nil
        let from = start - bufferStart
        let to = min(buffer.count, end - bufferStart)
        guard to > from else { return Cut(start: start, end: end, samples: []) }
        let cut = Cut(start: start, end: end, samples: buffer[from..<to])
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
        return .speechEnded(at: seconds(received))
    }

    /// `samples` of silence the client left out (end speech and cut the utterance first): the
    /// timeline moves on, nothing before it is kept, and a fresh detector hears what follows.
    public func skip(_ samples: Int) throws(StenoError) {
        received += max(0, samples)
        buffer.removeAll()
        bufferStart = received
        detector = try makeDetector()
        detectorBase = received
    }

    /// Lets go of the audio kept and of the utterance going on (the recognizer is cancelled).
    public func discard() {
        buffer.removeAll()
        utteranceStart = nil
    }

    public func seconds(_ samples: Int) -> Double { Double(samples) / Double(sampleRate) }

    /// The sample nearest to `seconds` after the detector's start.
    private func sample(atSeconds seconds: Double) -> Int { Int((seconds * Double(sampleRate)).rounded()) }
}
