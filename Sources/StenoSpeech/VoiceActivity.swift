import CPocketSphinx
import StenoCore

/// pocketsphinx's voice activity detector without the recognizer: a sphinxbase front end
/// (`fe_t`) made from a decoder's configuration, so it computes the same frames and makes the
/// same speech/silence decisions as the decoder's own front end when it is given the same
/// samples and restarted at the same places (`fe_start_stream`, `fe_start_utt`, `fe_end_utt`
/// mirror what `ps_start_stream`, `ps_start_utt` and `ps_end_utt` do to the decoder's).
///
/// It is fed a frame shift at a time, so it can tell the exact frame where the state changed,
/// which the decoder (fed whole blocks, as the CLI does) cannot. Costs a few ms per second of
/// audio (MFCC only, no acoustic model) and a few kB.
///
/// Frames are numbered on the utterance's grid: the front end drops its overlap buffer when an
/// utterance starts, so frame `k` covers samples `start + k·shift ..< start + k·shift + size`
/// of an utterance that started at sample `start`.
final class FrontEndVAD {
    private let fe: OpaquePointer
    let frameShift: Int
    let frameSize: Int
    private let rows: Int
    private let cepstra: UnsafeMutablePointer<mfcc_t>
    private let rowPointers: UnsafeMutablePointer<UnsafeMutablePointer<mfcc_t>?>

    /// Samples given since the utterance started.
    private(set) var utteranceSamples = 0
    /// The detector's state after the last sample given.
    private(set) var inSpeech = false

    init(config: OpaquePointer) throws(StenoError) {
        guard let fe = fe_init_auto_r(config) else {
            throw StenoError(.internal, "pocketsphinx front end could not be made")
        }
        var shift: Int32 = 0
        var size: Int32 = 0
        fe_get_input_size(fe, &shift, &size)
        let length = Int(fe_get_output_size(fe))
        guard shift > 0, size >= shift, length > 0 else {
            fe_free(fe)
            throw StenoError(.internal, "pocketsphinx front end has frame shift \(shift), size \(size)")
        }
        self.fe = fe
        self.frameShift = Int(shift)
        self.frameSize = Int(size)
        // Room for the pre-speech buffer flushed at once when speech starts, and more.
        self.rows = max(64, 2 * Int(max(0, cmd_ln_int_r(config, "-vad_prespeech"))) + 8)
        self.cepstra = .allocate(capacity: rows * length)
        cepstra.initialize(repeating: 0, count: rows * length)
        self.rowPointers = .allocate(capacity: rows)
        for row in 0..<rows {
            rowPointers[row] = cepstra + row * length
        }
    }

    deinit {
        // fe_free releases the configuration, whose reference count is not atomic and may be
        // shared (detectors share their engine's): under the lock that guards all of them.
        PocketSphinxDecoder.lifecycleLock.lock()
        fe_free(fe)
        PocketSphinxDecoder.lifecycleLock.unlock()
        cepstra.deallocate()
        rowPointers.deallocate()
    }

    func startStream() {
        fe_start_stream(fe)
        startUtterance()
    }

    func startUtterance() {
        fe_start_utt(fe)
        utteranceSamples = 0
        inSpeech = false
    }

    func endUtterance() {
        var frames: Int32 = 0
        fe_end_utt(fe, cepstra, &frames)
        inSpeech = fe_get_vad_state(fe) != 0
    }

    /// The last complete frame after `samples` samples of the utterance (-1 before the first).
    func lastFrame(afterSamples samples: Int) -> Int {
        samples >= frameSize ? (samples - frameSize) / frameShift : -1
    }

    /// Feeds samples a frame shift at a time; calls `changed(frame, inSpeech)` for every
    /// change of state, with the utterance-grid frame where it happened.
    func process(_ samples: UnsafePointer<Int16>, count: Int, changed: (Int, Bool) -> Void) {
        var offset = 0
        while offset < count {
            let piece = min(frameShift, count - offset)
            feed(samples + offset, count: piece)
            offset += piece
            utteranceSamples += piece
            let now = fe_get_vad_state(fe) != 0
            if now != inSpeech {
                inSpeech = now
                changed(lastFrame(afterSamples: utteranceSamples), now)
            }
        }
    }

    private func feed(_ samples: UnsafePointer<Int16>, count: Int) {
        var input: UnsafePointer<Int16>? = samples
        var remaining = count
        while remaining > 0 {
            var frames = Int32(rows)
            let before = remaining
            if fe_process_frames(fe, &input, &remaining, rowPointers, &frames, nil) < 0 { return }
            if remaining == before && frames == 0 { return }  // no progress: never spin
        }
    }
}

/// A standalone speech detector: `.speechStarted`/`.speechEnded` events from pocketsphinx's
/// voice activity detector, with the same times a `PocketSphinxRecognizer` reports for the same
/// audio (as long as the recognizer is not finalized or cut by the maximum utterance length,
/// which restart the detector). Cheap: no acoustic or language model (make it with
/// `PocketSphinxEngine.makeSpeechDetector()`).
///
/// Like a recognizer, one is used from one thread at a time; times are seconds from the first
/// sample fed, and chunking does not change the events.
public final class PocketSphinxSpeechDetector {
    public static let sampleRate = PocketSphinxRecognizer.sampleRate

    private let vad: FrontEndVAD
    private let blockSamples: Int
    private let startSpeechFrames: Int
    private let postSpeechFrames: Int
    private var pending: [Int16] = []
    private var fed = 0
    private var utteranceStart = 0
    private var utteranceHasSpeech = false
    private var speechActive = false

    init(config: OpaquePointer, blockSamples: Int) throws(StenoError) {
        self.vad = try FrontEndVAD(config: config)
        self.blockSamples = blockSamples
        self.startSpeechFrames = max(1, cmd_ln_int_r(config, "-vad_startspeech"))
        self.postSpeechFrames = max(1, cmd_ln_int_r(config, "-vad_postspeech"))
        vad.startStream()
    }

    /// Whether speech is going on (as reported so far).
    public var isSpeaking: Bool { speechActive }

    /// Seconds of audio fed so far.
    public var receivedSeconds: Double { Double(fed + pending.count) / Double(Self.sampleRate) }

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

    public func accept(_ samples: [Float]) -> [TranscriberEvent] {
        samples.withUnsafeBufferPointer { accept($0) }
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
            vad.process(base, count: block.count) { frame, inSpeech in
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
            }
        }
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
            vad.endUtterance()
            vad.startUtterance()
            utteranceStart = fed
            utteranceHasSpeech = false
        }
    }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
