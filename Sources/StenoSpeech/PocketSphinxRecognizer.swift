import CPocketSphinx
import StenoCore

/// A streaming pocketsphinx recognizer for one session.
///
/// How it listens (the loop of `pocketsphinx_continuous -infile`, whose words and scores it
/// reproduces on whole files):
/// - Input is converted to 16-bit and cut into blocks of `blockSamples` (default 2048),
///   counted from the start of the current utterance, whatever sizes callers pass: results
///   cannot depend on chunking. A block goes to `ps_process_raw` in one call as soon as it is
///   complete.
/// - After each block: if pocketsphinx's voice activity detector (`ps_get_in_speech`) has
///   gone from speech to silence, the utterance ends (`ps_end_utt`) and becomes a `.final`;
///   if speech goes on, the current best path becomes a `.partial` when its text changed, and
///   an utterance longer than `maxUtteranceSeconds` is finalized. `endUtterance()` analyzes
///   the incomplete block at once and finalizes; `finish()` does the same at the end of input.
///
/// Times: pocketsphinx's detector drops silence frames, numbers an utterance's frames from
/// the first one it kept, and `ps_seg_frames` adds an offset it estimates from a global sample
/// counter (a frame or more off, and left stale when its estimate is ≤ 0). This class keeps
/// its own account instead. An utterance starts at a known sample `P`, where the front end
/// restarts its frame grid: frame `k` covers samples `P + 160k ..< P + 160k + 410`. A second
/// front end with the decoder's configuration (`FrontEndVAD`), fed the same samples 10 ms at
/// a time, tells the frame `T` where speech was detected; the frames searched then start at
/// `max(0, T - vad_prespeech)` (the pre-speech buffer holds `vad_prespeech + 1` frames and is
/// emptied when an utterance starts). Word frames are taken relative to the utterance's first
/// segment (`<s>`, which starts at its first searched frame) and placed on that grid; a word
/// spans from its first frame's start to the start of the frame after its last. Speech
/// starts at the first of the `vad_startspeech` speech frames that triggered the detector
/// and ends at the first of the `vad_postspeech` silent frames that stopped it.
///
/// (Feeding the decoder itself 10 ms at a time would give the same frames, but it changes the
/// word posteriors slightly and makes them depend on what the decoder did before: measured,
/// hence the second front end, which costs a few ms per second of audio.)
public final class PocketSphinxRecognizer: SpeechRecognizer {
    public static let sampleRate = 16000

    public let info: SpeechEngineInfo
    public var sampleRate: Int { Self.sampleRate }
    public var receivedSeconds: Double { seconds(received) }
    public var analyzedSeconds: Double { seconds(fed) }

    private var decoder: PocketSphinxDecoder?
    private let pool: DecoderPool
    private let blockSamples: Int
    private let maxUtteranceSamples: Int
    private let partialResults: Bool
    private let frameShift: Int
    private let frameSize: Int
    private let preSpeechFrames: Int
    private let startSpeechFrames: Int
    private let postSpeechFrames: Int

    /// Samples accepted so far.
    private var received = 0
    /// Samples given to pocketsphinx so far.
    private var fed = 0
    /// Samples of the current block not yet analyzed (fewer than `blockSamples`).
    private var pending: [Int16]

    // The utterance in progress.
    /// The sample where it started (`P`).
    private var utteranceStart = 0
    /// Speech was detected in this utterance (it is being searched).
    private var utteranceHasSpeech = false
    /// First searched frame on the utterance's grid.
    private var firstFrame = 0
    /// Where the detector last switched from speech to silence in this utterance.
    private var silenceFrame: Int?
    /// Text of the last `.partial` reported in this utterance.
    private var partialText = ""

    // Voice activity as reported (`.speechStarted`/`.speechEnded`).
    private var speechActive = false
    /// Where an utterance was cut while speech went on (max length, `endUtterance`): the
    /// detector restarts there, and speech counts as ended at this sample unless it is
    /// detected again within `vad_postspeech` frames.
    private var cutWhileSpeaking: Int?

    private var failure: StenoError?

    /// Blocks after which the shadow detector and the decoder's disagreed on speech (should
    /// stay 0; the decoder's decision is the one used).
    private(set) var detectorDisagreements = 0

    init(decoder: PocketSphinxDecoder, pool: DecoderPool, info: SpeechEngineInfo,
         blockSamples: Int, maxUtteranceSeconds: Double, partialResults: Bool) throws(StenoError) {
        self.decoder = decoder
        self.pool = pool
        self.info = info
        self.blockSamples = blockSamples
        self.maxUtteranceSamples = max(1, Int(min(maxUtteranceSeconds, 86_400) * Double(Self.sampleRate)))
        self.partialResults = partialResults
        self.frameShift = decoder.frameShift
        self.frameSize = decoder.frameSize
        self.preSpeechFrames = decoder.preSpeechFrames
        self.startSpeechFrames = decoder.startSpeechFrames
        self.postSpeechFrames = decoder.postSpeechFrames
        self.pending = []
        pending.reserveCapacity(blockSamples)
        do {
            try decoder.startStream()
        } catch {
            self.decoder = nil
            throw error
        }
    }

    deinit {
        if let decoder {
            pool.giveBack(decoder)
        }
    }

    // MARK: - SpeechRecognizer

    public func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
        let decoder = try usableDecoder()
        var events: [TranscriberEvent] = []
        var index = samples.startIndex
        while index < samples.endIndex {
            let take = min(blockSamples - pending.count, samples.endIndex - index)
            for offset in 0..<take {
                pending.append(Self.pcm16(samples[index + offset]))
            }
            index += take
            received += take
            if pending.count == blockSamples {
                try guarded { () throws(StenoError) in
                    try analyzeBlock(decoder, into: &events)
                }
            }
        }
        return events
    }

    public func endUtterance() throws(StenoError) -> [TranscriberEvent] {
        let decoder = try usableDecoder()
        var events: [TranscriberEvent] = []
        try guarded { () throws(StenoError) in
            try analyzePartialBlock(decoder, into: &events)
            try closeUtterance(decoder, cut: true, into: &events)
        }
        return events
    }

    public func finish() throws(StenoError) -> [TranscriberEvent] {
        let decoder = try usableDecoder()
        var events: [TranscriberEvent] = []
        try guarded { () throws(StenoError) in
            try analyzePartialBlock(decoder, into: &events)
            try closeUtterance(decoder, cut: true, into: &events)
        }
        if speechActive {
            speechActive = false
            events.append(.speechEnded(at: seconds(cutWhileSpeaking ?? fed)))
            cutWhileSpeaking = nil
        }
        release()
        return events
    }

    public func cancel() {
        release()
    }

    // MARK: - Analysis

    private func usableDecoder() throws(StenoError) -> PocketSphinxDecoder {
        if let failure { throw failure }
        guard let decoder else {
            throw StenoError(.internal, "the recognizer was already finished or cancelled")
        }
        return decoder
    }

    /// Runs `body`; an error from pocketsphinx leaves the recognizer failed (and releases the
    /// decoder, which is not reused) so that later calls report it again.
    private func guarded(_ body: () throws(StenoError) -> Void) throws(StenoError) {
        do {
            try body()
        } catch {
            failure = error
            decoder = nil
            throw error
        }
    }

    private func release() {
        pending.removeAll()
        if let decoder {
            self.decoder = nil
            pool.giveBack(decoder)
        }
    }

    /// Analyzes the full block in `pending`, then decides: end of utterance, partial, or cut.
    private func analyzeBlock(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) throws(StenoError) {
        try feedPending(decoder, into: &events)
        if utteranceHasSpeech && !decoder.inSpeech {
            try closeUtterance(decoder, cut: false, into: &events)
        } else if utteranceHasSpeech {
            if fed - frameStart(firstFrame) >= maxUtteranceSamples {
                try closeUtterance(decoder, cut: true, into: &events)
            } else if partialResults {
                reportPartial(decoder, into: &events)
            }
        }
        if let cut = cutWhileSpeaking, !utteranceHasSpeech, fed - cut >= postSpeechFrames * frameShift {
            cutWhileSpeaking = nil
            speechActive = false
            events.append(.speechEnded(at: seconds(cut)))
        }
    }

    /// Analyzes what is pending of an incomplete block (for `endUtterance` and `finish`).
    private func analyzePartialBlock(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) throws(StenoError) {
        if !pending.isEmpty {
            try feedPending(decoder, into: &events)
        }
    }

    /// Gives `pending` to pocketsphinx in one call (as the CLI gives its blocks), and to the
    /// shadow voice activity detector a frame shift at a time, which notes where speech
    /// starts and stops.
    private func feedPending(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) throws(StenoError) {
        var failure: StenoError?
        pending.withUnsafeBufferPointer { block in
            guard let base = block.baseAddress else { return }
            decoder.vad.process(base, count: block.count) { frame, inSpeech in
                if inSpeech {
                    if !utteranceHasSpeech { speechDetected(atFrame: frame, into: &events) }
                } else {
                    silenceFrame = frame
                }
            }
            do throws(StenoError) {
                try decoder.process(base, count: block.count)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        fed += pending.count
        pending.removeAll(keepingCapacity: true)
        if decoder.vad.inSpeech != decoder.inSpeech {
            detectorDisagreements += 1
        }
    }

    /// The detector has switched to speech at `triggerFrame` (utterance grid).
    private func speechDetected(atFrame triggerFrame: Int, into events: inout [TranscriberEvent]) {
        firstFrame = max(0, triggerFrame - preSpeechFrames)
        utteranceHasSpeech = true
        cutWhileSpeaking = nil
        if !speechActive {
            speechActive = true
            // Speech began with the first of the `vad_startspeech` speech frames in a row.
            let onset = max(0, triggerFrame - startSpeechFrames + 1)
            events.append(.speechStarted(at: seconds(frameStart(onset))))
        }
    }

    /// Ends the utterance in progress (`ps_end_utt`), reports its final, and starts the next.
    /// `cut`: ended by max length, `endUtterance` or `finish` rather than by the detector.
    private func closeUtterance(_ decoder: PocketSphinxDecoder, cut: Bool, into events: inout [TranscriberEvent]) throws(StenoError) {
        let stillSpeaking = decoder.inSpeech
        try decoder.endUtterance()
        if utteranceHasSpeech {
            let words = self.words(decoder, final: true)
            if let result = Self.result(words) {
                events.append(.final(result))
            } else if !partialText.isEmpty {
                events.append(.partial(RecognitionResult(range: TimeRange(start: seconds(fed), end: seconds(fed)), text: "")))
            }
            if speechActive {
                if stillSpeaking && cut {
                    cutWhileSpeaking = fed
                } else if !stillSpeaking {
                    // The detector switched to silence at `silenceFrame`, after
                    // `vad_postspeech` silent frames in a row: silence began with the first.
                    let switched = silenceFrame ?? decoder.vad.lastFrame(afterSamples: fed - utteranceStart)
                    let quiet = max(firstFrame, switched - postSpeechFrames + 1)
                    speechActive = false
                    cutWhileSpeaking = nil
                    events.append(.speechEnded(at: seconds(min(fed, frameStart(quiet)))))
                }
            }
        }
        utteranceStart = fed
        utteranceHasSpeech = false
        silenceFrame = nil
        firstFrame = 0
        partialText = ""
        try decoder.startUtterance()
    }

    private func reportPartial(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) {
        let words = self.words(decoder, final: false)
        let text = words.map(\.text).joined(separator: " ")
        guard text != partialText else { return }
        partialText = text
        let result = Self.result(words)
            ?? RecognitionResult(range: TimeRange(start: seconds(fed), end: seconds(fed)), text: "")
        events.append(.partial(result))
    }

    /// The words of the current best path (`ps_seg_iter`), fillers left out, on the timeline.
    /// Finals carry the word posterior from `ps_seg_prob` as confidence; partials have no
    /// posteriors yet (pocketsphinx computes them with the final lattice) and report 0.
    private func words(_ decoder: PocketSphinxDecoder, final: Bool) -> [Word] {
        var words: [Word] = []
        var origin: Int32?
        let earliest = seconds(utteranceStart)
        let latest = seconds(fed)
        var segment = ps_seg_iter(decoder.ps)
        while let current = segment {
            var startFrame: Int32 = 0
            var endFrame: Int32 = 0
            ps_seg_frames(current, &startFrame, &endFrame)
            let base = origin ?? startFrame
            origin = base
            if let raw = ps_seg_word(current), let text = Self.spokenWord(String(cString: raw)) {
                let first = firstFrame + Int(startFrame) - Int(base)
                let last = firstFrame + Int(endFrame) - Int(base)
                let start = min(latest, max(earliest, seconds(frameStart(first))))
                let end = min(latest, max(start, seconds(frameStart(last + 1))))
                let confidence = final ? decoder.probability(ps_seg_prob(current, nil, nil, nil)) : 0
                words.append(Word(text, range: TimeRange(start: start, end: end), confidence: confidence))
            }
            segment = ps_seg_next(current)  // frees the iterator at the end
        }
        return words
    }

    private static func result(_ words: [Word]) -> RecognitionResult? {
        guard let first = words.first, let last = words.last else { return nil }
        return RecognitionResult(
            range: TimeRange(start: first.range.start, end: last.range.end),
            text: words.map(\.text).joined(separator: " "),
            words: words)
    }

    // MARK: - Helpers

    /// A segment's word as spoken: nil for fillers (`<s>`, `</s>`, `<sil>`, `[NOISE]`,
    /// `++GARBAGE++` …), and without the alternate-pronunciation mark (`read(2)` → `read`).
    static func spokenWord(_ raw: String) -> String? {
        if raw.isEmpty { return nil }
        if let first = raw.first, let last = raw.last {
            if (first == "<" && last == ">") || (first == "[" && last == "]") { return nil }
            if raw.hasPrefix("++") && raw.hasSuffix("++") { return nil }
        }
        var word = Substring(raw)
        if word.last == ")", let open = word.lastIndex(of: "("),
           word[word.index(after: open)..<word.index(before: word.endIndex)].allSatisfy(\.isNumber),
           open > word.startIndex {
            word = word[..<open]
        }
        return word.isEmpty ? nil : String(word)
    }

    /// A sample in -1...1 as 16-bit PCM: ×32768 so that 16-bit input converted with /32768
    /// comes back exactly; clipped; NaN is 0.
    @inline(__always)
    static func pcm16(_ sample: Float) -> Int16 {
        guard !sample.isNaN else { return 0 }
        let scaled = sample * 32768
        if scaled >= 32767 { return 32767 }
        if scaled <= -32768 { return -32768 }
        return Int16(scaled.rounded())
    }

    private func frameStart(_ frame: Int) -> Int { utteranceStart + frame * frameShift }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
