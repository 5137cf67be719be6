import CPocketSphinx
import Glibc
import StenoCore

/// A standalone speech detector: `.speechStarted`/`.speechEnded` events from pocketsphinx's
/// voice activity detector, with the same times a `PocketSphinxRecognizer` reports for the same
/// audio when its detector alone ends utterances (`Endpointing.detector`), as long as the
/// recognizer is not finalized or cut by the maximum utterance length, which restart the
/// detector. (With the search's early end, the default, a recognizer reports the end of speech
/// with the last word instead, sooner than this detector's switch; Endpointing.swift.) Cheap:
/// no acoustic or language model (make it with `PocketSphinxEngine.makeSpeechDetector()`). It
/// is a `VoiceDetector`: Whisper's recognizer finds its utterances with one (`UtteranceGate`).
///
/// Like a recognizer, one is used from one thread at a time; times are seconds from the first
/// sample fed, and chunking does not change the events.
public final class PocketSphinxSpeechDetector {
    public static let sampleRate = PocketSphinxRecognizer.sampleRate

    private let vad: SpeechFrontEnd
    private var discarded: CepstralFrames
    private let blockSamples: Int
    private let startSpeechFrames: Int
    private let postSpeechFrames: Int
    private var pending: [Int16] = []
    private var fed = 0
    private var utteranceStart = 0
    private var utteranceHasSpeech = false
    private var speechActive = false
    /// Samples heard first only to settle the noise estimate (`settling`), then heard again.
    private let settleSamples: Int
    private var settling: Bool
    /// Blocks whose RMS (Int16 units) is below this, while no speech is open, are not
    /// analyzed (`quietBelow`); 0: every block is.
    private let quietLevel: Float

    init(frontEnd: SpeechFrontEnd, shape: DecoderShape, blockSamples: Int, settleSamples: Int = 0, quietBelow: Double? = nil,
         postSpeechFrames: Int? = nil) {
        self.settleSamples = settleSamples
        self.settling = settleSamples > 0
        self.quietLevel = quietBelow.map { Float(pow(10, $0 / 20) * 32768) } ?? 0
        self.vad = frontEnd
        self.discarded = CepstralFrames(length: frontEnd.cepstrumLength)
        self.blockSamples = blockSamples
        self.startSpeechFrames = shape.startSpeechFrames
        self.postSpeechFrames = postSpeechFrames ?? shape.postSpeechFrames
        vad.startStream()
    }

    /// Feeds mono samples in -1...1 (clipped; NaN is 0).
    public func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        // A block (or the settling span) at a time, converted in one go: sample by sample, the
        // checks of each access to this object's state cost more than the conversion (a
        // quiet crowd's intake is mostly this detector).
        var index = samples.startIndex
        while index < samples.endIndex {
            let goal = settling ? settleSamples : blockSamples
            let count = min(samples.endIndex - index, max(1, goal - pending.count))
            pending.append(contentsOf: samples[index..<(index + count)].lazy.map(PocketSphinxRecognizer.pcm16))
            index += count
            if settling {
                if pending.count >= settleSamples { settle(into: &events) }
            } else if pending.count >= blockSamples {
                analyzePending(into: &events)
            }
        }
        return events
    }

    /// The front end's noise estimate starts from the first frame and follows the lowest power
    /// down at once but up only slowly, so any steady sound at the start of a stream (a quiet
    /// room's hiss, at any level) looks like speech for its first half second or so
    /// (measured: -70 to -40 dBFS of noise all did). Settling hears the first `settleSamples`
    /// once for the estimate alone, then again from the start, for real: a quiet room then
    /// starts quiet, and speech that starts at once is heard as it comes (its onset found as
    /// the estimate falls in its first pause).
    private func settle(into events: inout [TranscriberEvent]) {
        settling = false
        let heard = pending
        pending.removeAll(keepingCapacity: true)
        heard.withUnsafeBufferPointer { block in
            guard let base = block.baseAddress else { return }
            vad.process(base, count: block.count, into: &discarded) { _, _ in false }
        }
        vad.endUtterance(into: &discarded)
        discarded.removeAll()
        vad.startUtterance()
        for sample in heard {
            pending.append(sample)
            if pending.count == blockSamples { analyzePending(into: &events) }
        }
    }

    /// End of input: analyzes what is pending and closes a speech segment still open.
    public func finish() -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        if settling && !pending.isEmpty { settle(into: &events) }
        analyzePending(into: &events)
        if speechActive {
            speechActive = false
            events.append(.speechEnded(at: seconds(fed)))
        }
        return events
    }

    private func analyzePending(into events: inout [TranscriberEvent]) {
        guard !pending.isEmpty else { return }
        if quietLevel > 0 && !speechActive && !utteranceHasSpeech && !vad.inSpeech && Self.rms(pending) < quietLevel {
            skipQuietBlock()
            return
        }
        var switchedOff: Int?
        pending.withUnsafeBufferPointer { block in
            guard let base = block.baseAddress else { return }
            vad.process(base, count: block.count, into: &discarded) { frame, inSpeech in
                if inSpeech {
                    utteranceHasSpeech = true
                    if !speechActive {
                        speechActive = true
                        let onset = max(0, frame - startSpeechFrames + 1)
                        events.append(.speechStarted(at: seconds(utteranceStart + onset * vad.frameShift)))
                    }
                } else {
                    switchedOff = frame
                }
                return false
            }
        }
        discarded.removeAll()  // only the detector's decisions are wanted
        fed += pending.count
        pending.removeAll(keepingCapacity: true)
        // The recognizer ends its utterance here (ps_end_utt, ps_start_utt): do the same to
        // the front end so that both keep making the same decisions.
        if utteranceHasSpeech && !vad.inSpeech {
            if speechActive {
                speechActive = false
                let frame = max(0, (switchedOff ?? vad.lastFrame(afterSamples: vad.utteranceSamples)) - postSpeechFrames + 1)
                events.append(.speechEnded(at: seconds(min(fed, utteranceStart + frame * vad.frameShift))))
            }
            vad.endUtterance(into: &discarded)
            discarded.removeAll()
            vad.startUtterance()
            utteranceStart = fed
            utteranceHasSpeech = false
        }
    }

    /// A block far below any speech, heard while none is open, is passed over: the front end
    /// (most of a quiet session's cost) does not compute its spectrum, and its noise estimate
    /// keeps what it had. Its frames count from the next block heard, so its utterance starts
    /// again there.
    private func skipQuietBlock() {
        fed += pending.count
        pending.removeAll(keepingCapacity: true)
        if vad.utteranceSamples > 0 {
            vad.endUtterance(into: &discarded)
            discarded.removeAll()
            vad.startUtterance()
        }
        utteranceStart = fed
    }

    private static func rms(_ samples: [Int16]) -> Float {
        var sum: Float = 0
        for sample in samples {
            let value = Float(sample)
            sum += value * value
        }
        return (sum / Float(max(1, samples.count))).squareRoot()
    }

    /// While it settles, all it has heard: it decides on none of it until it has heard the
    /// whole span (0.64 s), and the onset of speech that starts with the stream is then in the
    /// past by that much. Afterwards 0: its decisions come a block late at most, which the
    /// pre-roll of whoever gates on it was chosen with (keeping more lets noise bursts open
    /// longer utterances, in which Whisper invents "Thank you.": measured).
    public var undecidedSamples: Int { settling ? pending.count : 0 }

    /// Samples whose voice activity it has decided (analyzed, or passed over as quiet).
    public var decidedSamples: Int { fed }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
