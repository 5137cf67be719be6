import CPocketSphinx
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

    init(frontEnd: SpeechFrontEnd, shape: DecoderShape, blockSamples: Int) {
        self.vad = frontEnd
        self.discarded = CepstralFrames(length: frontEnd.cepstrumLength)
        self.blockSamples = blockSamples
        self.startSpeechFrames = shape.startSpeechFrames
        self.postSpeechFrames = shape.postSpeechFrames
        vad.startStream()
    }

    /// Feeds mono samples in -1...1 (clipped; NaN is 0).
    public func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        for sample in samples {
            pending.append(PocketSphinxRecognizer.pcm16(sample))
            if pending.count == blockSamples {
                analyzePending(into: &events)
            }
        }
        return events
    }

    /// End of input: analyzes what is pending and closes a speech segment still open.
    public func finish() -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        analyzePending(into: &events)
        if speechActive {
            speechActive = false
            events.append(.speechEnded(at: seconds(fed)))
        }
        return events
    }

    private func analyzePending(into events: inout [TranscriberEvent]) {
        guard !pending.isEmpty else { return }
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

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
