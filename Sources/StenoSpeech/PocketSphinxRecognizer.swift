import CPocketSphinx
import StenoCore
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// A streaming pocketsphinx recognizer for one session, on decoders it borrows.
///
/// What the session keeps of its own: a front end (`SpeechFrontEnd`: noise estimates, voice
/// activity, MFCC) and its cepstral mean. A decoder (the models and the search, ≈95 MB) is
/// borrowed from the engine's `DecoderPool` when speech starts — the front end's pre-speech
/// frames come with it, so no word onset is clipped — and given back when the utterance is
/// final, after the session's mean was taken out of it. A session's finals are therefore those
/// of a decoder of its own, whichever decoders served it (tested by interleaving sessions).
/// When no decoder is free the recognizer keeps the audio and waits (`isWaiting`); the pool
/// wakes it when one is granted, and `proceed()` goes on where it stopped.
///
/// How it listens (the loop of `pocketsphinx_continuous -infile`, whose words it reproduces):
/// - Input is converted to 16-bit and cut into blocks of `blockSamples` (default 2048),
///   counted from the start of the current utterance, whatever sizes callers pass: results
///   cannot depend on chunking. The front end takes a block a frame shift at a time (to tell
///   the exact frame of every change of voice activity); the block's cepstra go to the decoder
///   in the batches `ps_process_raw` would have made of it (`PocketSphinxDecoder.searchBlock`).
/// - After each block: if the detector has gone from speech to silence, the utterance ends and
///   becomes a `.final`; if speech goes on, the current best path becomes a `.partial` when its
///   text changed, and an utterance longer than `maxUtteranceSeconds` is finalized.
///   `endUtterance()` analyzes the incomplete block at once and finalizes; `finish()` does the
///   same at the end of input.
///
/// Times: an utterance starts at a known sample `P`, where the front end restarts its frame
/// grid: frame `k` covers samples `P + 160k ..< P + 160k + 410`. The front end tells the frame
/// `T` where speech was detected; the frames searched then start at `max(0, T - vad_prespeech)`.
/// Word frames are taken relative to the utterance's first segment (`<s>`, which starts at its
/// first searched frame) and placed on that grid; a word spans from its first frame's start to
/// the start of the frame after its last. Speech starts at the first of the `vad_startspeech`
/// speech frames that triggered the detector and ends at the first of the `vad_postspeech`
/// silent frames that stopped it.
public final class PocketSphinxRecognizer: SpeechRecognizer {
    public static let sampleRate = 16000

    public let info: SpeechEngineInfo
    public var sampleRate: Int { Self.sampleRate }
    public var receivedSeconds: Double { seconds(received) }
    public var analyzedSeconds: Double { seconds(fed) }
    public var isWaiting: Bool { suspended != nil || yielded }
    public private(set) var lastUtteranceTiming: UtteranceTiming?

    public var samplesToNextBlock: Int? {
        guard !released, failure == nil, suspended == nil, !yielded, holes.isEmpty else { return nil }
        return max(1, blockLength + dropSamples - (input.count - inputHead))
    }

    private let pool: DecoderPool
    private let waiter: DecoderWaiter
    private let frontEnd: SpeechFrontEnd
    private let shape: DecoderShape
    private let blockSamples: Int
    private let maxUtteranceSamples: Int
    private let partialResults: Bool
    /// When an utterance ends besides the detector's switch (Endpointing.swift).
    private let endpointing: Endpointing
    /// Where an early end (`endpointing`) decided the utterance was over, as a stream sample.
    private var earlyEndSample: Int?
    /// The utterance in progress goes on from an early end, through the detector's wait (see
    /// `endEarly`); speech starts again only with a word heard in it.
    private var continuesEarlyEnd = false
    /// Cepstral frames given to the decoder in its utterance in progress.
    private var searchedFrames = 0

    /// The session's feature state (cepstral mean, feature context), between its utterances.
    private var mean: FeatureState
    /// The next block is the utterance's first; and whether that first block brought no
    /// frames (see `FeatureState`).
    private var awaitingFirstBlock = true
    private var startedInSilence = false
    /// The decoder searching the utterance in progress (only while it has speech).
    private var decoder: PocketSphinxDecoder?
    /// With `keepsDecoder`: the decoder kept between utterances.
    private var kept: PocketSphinxDecoder?
    private let keepsDecoder: Bool
    /// The session's own vocabulary, put into each decoder it borrows; nil: none.
    private let vocabulary: SessionVocabulary?
    /// Alternatives per final (n-best); 0: none.
    private let alternativesLimit: Int
    public let notices: [StenoError]

    /// Samples accepted so far.
    private var received = 0
    /// Samples analyzed so far (front end and search).
    private var fed = 0
    /// Samples accepted and not yet given to the front end; `input[inputHead...]`. Sample
    /// `input[i]` is sample `inputBase + i` of the stream.
    private var input: [Int16] = []
    private var inputHead = 0
    private var inputBase = 0
    /// Silence left out by the client (`skipSilence`): before which accepted sample (counted
    /// like `inputBase`), and how long.
    private var holes: [(position: Int, length: Int)] = []
    /// Samples to drop from what comes after a hole, so that frames stay on the grid the
    /// whole input would have put them on.
    private var dropSamples = 0
    /// Where the block grid of the utterance started, and how long the next block is (a
    /// block is shorter only after a hole, to end where the whole input's would).
    private var blockOrigin = 0
    private var blockLength: Int
    /// A block the front end has analyzed whose cepstra wait for a decoder.
    private var suspended: Block?
    /// The decoder was given up at an early end for sessions in line (`endSearch`): the rest
    /// of the utterance goes on once one is granted, before anything more is analyzed.
    private var yielded = false
    /// An end asked for (`endUtterance`, `finish`), done once the input before it is analyzed.
    private var pendingEnd: End?
    private var released = false
    private var failure: StenoError?

    private struct Block {
        var frames: CepstralFrames
        var samples: Int
        /// The block is the incomplete one an end analyzes.
        var end: End?
    }

    private enum End {
        case utterance, finish
        /// The utterance ends where the client left silence out (as the detector would have
        /// ended it in that silence).
        case silence
    }

    // The utterance in progress.
    /// The sample where it started (`P`).
    private var utteranceStart = 0
    /// Speech was detected in this utterance (it is being searched).
    private var utteranceHasSpeech = false
    /// First searched frame on the utterance's grid.
    private var firstFrame = 0
    /// The search of the utterance ended before the end of its block (`endSearchEarly`); the
    /// grid restarts at the block's end.
    private var closedEarly = false
    /// Where the detector last switched from speech to silence in this utterance, and after
    /// which sample of the stream it did.
    private var silenceFrame: Int?
    private var silenceSample: Int?
    /// Text of the last `.partial` reported in this utterance.
    private var partialText = ""

    // Voice activity as reported (`.speechStarted`/`.speechEnded`).
    private var speechActive = false
    /// Where an utterance was cut while speech went on (max length, `endUtterance`): the
    /// detector restarts there, and speech counts as ended at this sample unless it is
    /// detected again within `vad_postspeech` frames.
    private var cutWhileSpeaking: Int?

    init(pool: DecoderPool, shape: DecoderShape, frontEnd: SpeechFrontEnd, info: SpeechEngineInfo,
         blockSamples: Int, maxUtteranceSeconds: Double, partialResults: Bool, keepsDecoder: Bool = false,
         vocabulary: SessionVocabulary? = nil, notices: [StenoError] = [], alternatives: Int = 0,
         endpointing: Endpointing = .detector, wake: @escaping @Sendable () -> Void) {
        self.endpointing = endpointing
        self.notices = notices
        self.keepsDecoder = keepsDecoder
        self.vocabulary = vocabulary
        self.alternativesLimit = alternatives
        self.pool = pool
        self.shape = shape
        self.frontEnd = frontEnd
        self.info = info
        self.blockSamples = blockSamples
        self.maxUtteranceSamples = max(1, Int(min(maxUtteranceSeconds, 86_400) * Double(Self.sampleRate)))
        self.partialResults = partialResults
        self.mean = shape.freshMean
        self.blockLength = blockSamples
        self.waiter = DecoderWaiter(wake: wake)
        input.reserveCapacity(blockSamples)
        frontEnd.startStream()
    }

    deinit {
        release()
    }

    // MARK: - SpeechRecognizer

    public func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
        try usable()
        input.reserveCapacity(input.count + samples.count)
        for sample in samples { input.append(Self.pcm16(sample)) }
        received += samples.count
        return try run()
    }

    public func endUtterance() throws(StenoError) -> [TranscriberEvent] {
        try usable()
        guard pendingEnd == nil else { return [] }
        pendingEnd = .utterance
        return try run()
    }

    public func finish() throws(StenoError) -> [TranscriberEvent] {
        try usable()
        pendingEnd = .finish
        return try run()
    }

    public func proceed() throws(StenoError) -> [TranscriberEvent] {
        try usable()
        return try run()
    }

    /// `samples` of silence the client left out, after what was accepted so far. The utterance
    /// in progress ends there, as the detector would have ended it in the silence; the timeline
    /// moves on; and the audio after it is put on the frame and block grid the whole input
    /// would have had (a few of its first samples are dropped for that), so that the words
    /// after a long pause come out as they would have without the pause left out.
    public func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent] {
        try usable()
        guard samples > 0 else { return [] }
        // Where the hole falls among the samples accepted (holes are not in `input`).
        holes.append((inputBase + input.count, samples))
        received += samples
        return try run()
    }

    public func cancel() {
        release()
    }

    // MARK: - Analysis

    private func usable() throws(StenoError) {
        if let failure { throw failure }
        guard !released else { throw StenoError(.internal, "the recognizer was already finished or cancelled") }
    }

    /// Analyzes what it can: a block waiting for a decoder, then every complete block, then an
    /// end asked for. Stops when it must wait for a decoder.
    private func run() throws(StenoError) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        do {
            if let block = suspended {
                guard try attach() else { return events }
                suspended = nil
                try search(block, into: &events)
            }
            while suspended == nil && !released {
                if yielded {
                    guard try attach() else { break }
                    yielded = false
                }
                let available = input.count - inputHead
                let head = inputBase + inputHead
                let untilHole = holes.first.map { $0.position - head } ?? Int.max
                if dropSamples > 0 && available > 0 && untilHole > 0 {
                    let drop = min(dropSamples, available, untilHole)
                    inputHead += drop
                    fed += drop
                    dropSamples -= drop
                } else if let hole = holes.first, untilHole <= available, untilHole < blockLength {
                    // Everything before the hole is here, and less than a block.
                    if untilHole > 0 && utteranceHasSpeech {
                        try analyze(samples: untilHole, end: .silence, into: &events)
                    } else {
                        inputHead += untilHole
                        fed += untilHole
                        holes.removeFirst()
                        skip(hole.length, into: &events)
                    }
                } else if available >= blockLength && untilHole >= blockLength {
                    try analyze(samples: blockLength, end: nil, into: &events)
                } else if let end = pendingEnd, holes.isEmpty {
                    try analyze(samples: available, end: end, into: &events)
                } else {
                    break
                }
            }
        } catch {
            // pocketsphinx failed: the decoder is not reused, and later calls report it again.
            failure = error
            if let decoder {
                self.decoder = nil
                pool.discard(decoder)
            }
            pool.withdraw(waiter)
            throw error
        }
        compactInput()
        return events
    }

    /// The front end's part of a block of `samples` (complete, or the last one of an `end`);
    /// then the search's, if it has speech and a decoder can be had.
    ///
    /// When the detector switches to silence in the middle of the block, the utterance's search
    /// ends there and its final is made at once (`endSearchEarly`), rather than at the end of
    /// the block where `ps_process_raw`'s loop looks: the CLI's decoder is given no frame after
    /// the switch either (the detector puts out none in silence), so the final is the same. The
    /// rest of the block goes through the front end as before, and the utterance grid restarts
    /// at the block's end, as the CLI's does, so the next utterance is the CLI's too. Only if
    /// speech is detected again before the block ends (`vad_startspeech` frames in what is
    /// left of it) does this differ: the CLI goes on with one utterance, here a new one starts.
    private func analyze(samples count: Int, end: End?, into events: inout [TranscriberEvent]) throws(StenoError) {
        var frames = CepstralFrames(length: frontEnd.cepstrumLength)
        let endsEarly = end == nil && utteranceHasSpeech && decoder != nil
        var stopped = false
        let used = input.withUnsafeBufferPointer { buffer -> Int in
            guard count > 0, let base = buffer.baseAddress else { return 0 }
            return frontEnd.process(base + inputHead, count: count, into: &frames) { frame, inSpeech in
                if inSpeech {
                    if !utteranceHasSpeech { speechDetected(atFrame: frame, into: &events) }
                    return false
                }
                silenceFrame = frame
                silenceSample = utteranceStart + frontEnd.utteranceSamples
                stopped = endsEarly
                return stopped
            }
        }
        inputHead += used
        if stopped, let decoder {
            if !frames.isEmpty { try decoder.searchBlock(&frames) }
            searchedFrames += frames.count
            fed += used
            try endSearchEarly(into: &events)
            try analyzeRest(samples: count - used, end: end, into: &events)
        } else {
            try finishAnalysis(frames: frames, samples: count, end: end, into: &events)
        }
    }

    /// What is left of a block after an early end (see `analyze`): the front end goes on with
    /// it, and speech detected again starts a new utterance on the same grid.
    private func analyzeRest(samples count: Int, end: End?, into events: inout [TranscriberEvent]) throws(StenoError) {
        var frames = CepstralFrames(length: frontEnd.cepstrumLength)
        input.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            frontEnd.process(base + inputHead, count: count, into: &frames) { frame, inSpeech in
                if inSpeech {
                    if !utteranceHasSpeech { speechDetected(atFrame: frame, into: &events) }
                } else {
                    silenceFrame = frame
                    silenceSample = utteranceStart + frontEnd.utteranceSamples
                }
                return false
            }
        }
        inputHead += count
        try finishAnalysis(frames: frames, samples: count, end: end, into: &events)
    }

    /// The rest of `analyze`: the block's frames to the search (with a decoder, if they need one).
    private func finishAnalysis(frames: CepstralFrames, samples count: Int, end: End?,
                                into events: inout [TranscriberEvent]) throws(StenoError) {
        blockLength = blockSamples
        if awaitingFirstBlock {
            awaitingFirstBlock = false
            startedInSilence = frames.isEmpty
        }
        let block = Block(frames: frames, samples: count, end: end)
        if !frames.isEmpty || (end != nil && utteranceHasSpeech) {
            guard try attach() else {
                suspended = block
                return
            }
        }
        try search(block, into: &events)
    }

    /// The search's part of a block, and what follows it: the end of the utterance, a
    /// partial result, or a cut at the maximum length.
    private func search(_ block: Block, into events: inout [TranscriberEvent]) throws(StenoError) {
        var frames = block.frames
        if let decoder, !frames.isEmpty {
            try decoder.searchBlock(&frames)
            searchedFrames += frames.count
        }
        fed += block.samples
        if closedEarly && !utteranceHasSpeech {
            // The block whose detector ended the utterance early is over: as at the end of
            // any utterance, the front end ends (in silence it makes no frame) and restarts.
            var none = CepstralFrames(length: frontEnd.cepstrumLength)
            frontEnd.endUtterance(into: &none)
            restartUtterance()
        }
        closedEarly = false
        if block.end == .silence {
            try closeUtterance(cut: false, into: &events)
            if speechActive {
                // Speech ended where the client's silence began.
                speechActive = false
                cutWhileSpeaking = nil
                events.append(.speechEnded(at: seconds(fed)))
            }
            return
        }
        if let end = block.end {
            try closeUtterance(cut: true, into: &events)
            pendingEnd = nil
            if end == .finish { finishSpeech(into: &events) }
            return
        }
        if utteranceHasSpeech && !frontEnd.inSpeech {
            try closeUtterance(cut: false, into: &events)
        } else if utteranceHasSpeech {
            if fed - frameStart(firstFrame) >= maxUtteranceSamples {
                try closeUtterance(cut: true, into: &events)
            } else if let decoder, endpointing.endsNow(decoder) {
                try endEarly(decoder, into: &events)
            } else if let decoder {
                if continuesEarlyEnd && !speechActive { resumeSpeech(decoder, into: &events) }
                if partialResults { reportPartial(decoder, into: &events) }
            }
        }
        if let cut = cutWhileSpeaking, !utteranceHasSpeech, fed - cut >= shape.postSpeechFrames * shape.frameShift {
            cutWhileSpeaking = nil
            speechActive = false
            events.append(.speechEnded(at: seconds(cut)))
        }
    }

    /// A decoder for the utterance: the one it has, one granted while it waited, or an idle
    /// one. False when none is free (the recognizer is then in the pool's line).
    private func attach() throws(StenoError) -> Bool {
        if decoder != nil { return true }
        let got: PocketSphinxDecoder
        if let kept {
            got = kept
            self.kept = nil
        } else if let granted = waiter.take() {
            got = try granted.get()
        } else if let idle = pool.take(for: waiter, vocabulary: vocabulary) {
            got = idle
        } else {
            return false
        }
        decoder = got
        try got.use(vocabulary)
        try got.startUtterance(mean, startedInSilence: startedInSilence)
        searchedFrames = 0
        return true
    }

    /// The detector has switched to speech at `triggerFrame` (utterance grid).
    private func speechDetected(atFrame triggerFrame: Int, into events: inout [TranscriberEvent]) {
        firstFrame = max(0, triggerFrame - shape.preSpeechFrames)
        utteranceHasSpeech = true
        cutWhileSpeaking = nil
        if !speechActive {
            speechActive = true
            // Speech began with the first of the `vad_startspeech` speech frames in a row.
            let onset = max(0, triggerFrame - shape.startSpeechFrames + 1)
            events.append(.speechStarted(at: seconds(frameStart(onset))))
        }
    }

    /// Ends the utterance in progress, reports its final, gives the decoder back, and starts
    /// the next. `cut`: ended by max length, `endUtterance` or `finish` rather than by the
    /// detector.
    private func closeUtterance(cut: Bool, into events: inout [TranscriberEvent]) throws(StenoError) {
        let stillSpeaking = frontEnd.inSpeech
        var last = CepstralFrames(length: frontEnd.cepstrumLength)
        frontEnd.endUtterance(into: &last)
        try endSearch(last: &last, cut: cut, stillSpeaking: stillSpeaking, into: &events)
        restartUtterance()
    }

    /// The detector switched to silence in the middle of a block (see `analyze`): the search
    /// ends and the final is made now; the front end and the utterance grid go on to the end of
    /// the block (`closedEarly`), where `search` restarts them as `closeUtterance` would have.
    /// No last frame: in silence the front end's `fe_end_utt` puts out none.
    private func endSearchEarly(into events: inout [TranscriberEvent]) throws(StenoError) {
        var none = CepstralFrames(length: frontEnd.cepstrumLength)
        try endSearch(last: &none, cut: false, stillSpeaking: false, into: &events)
        closedEarly = true
        // Speech detected again before the block ends starts a decoder's utterance with no
        // block of its own before it.
        startedInSilence = true
    }

    /// The search's end of an utterance: its final (and what voice activity says), the
    /// decoder given back with the session's feature state taken out. `last`: the front end's
    /// last frame, if it made one.
    private func endSearch(last: inout CepstralFrames, cut: Bool, stillSpeaking: Bool,
                           into events: inout [TranscriberEvent]) throws(StenoError) {
        let began = SystemClock.now()
        let cpuBegan = threadCPUSeconds()
        if utteranceHasSpeech, let decoder {
            mean = try decoder.endUtterance(last: &last)
            let searched = SystemClock.now()
            let words = self.words(decoder, final: true)
            let read = SystemClock.now()
            var result = Self.result(words)
            if let text = result?.text, alternativesLimit > 0 {
                result?.alternatives = alternatives(decoder, finalText: text)
            }
            // A wordless rest of an early-ended utterance leaves the early end's timing.
            if result != nil || !continuesEarlyEnd {
                lastUtteranceTiming = UtteranceTiming(
                    detectorDecidedAt: (cut ? earlyEndSample : silenceSample).map(seconds), closedAt: seconds(fed),
                    closeBegan: began, endSearchSeconds: searched - began, wordsSeconds: read - searched,
                    alternativesSeconds: SystemClock.now() - read, cpuSeconds: threadCPUSeconds() - cpuBegan)
            }
            if earlyEndSample != nil && !keepsDecoder && pool.hasLine {
                // The detector's wait goes on (`endEarly`), but others wait for a decoder: a
                // reader whose pauses are shorter than the detector's would keep it from them
                // utterance after utterance. It goes back, and the rest of the utterance
                // waits in line as a new one would, to go on as it would have here.
                self.decoder = nil
                pool.giveBack(decoder)
                startedInSilence = false
                yielded = true
            } else if earlyEndSample != nil {
                // It goes on searching the detector's wait (`endEarly`).
                try decoder.startUtterance(mean, startedInSilence: false)
                searchedFrames = 0
            } else {
                self.decoder = nil
                if keepsDecoder { kept = decoder } else { pool.giveBack(decoder) }
            }
            if let result {
                events.append(.final(result))
            } else if !partialText.isEmpty {
                events.append(.partial(RecognitionResult(range: TimeRange(start: seconds(fed), end: seconds(fed)), text: "")))
            }
            if speechActive {
                if earlyEndSample != nil {
                    // The search ended it in a pause (Endpointing.swift): speech ended with
                    // its words, and starts again with the next word heard (`resumeSpeech`).
                    speechActive = false
                    cutWhileSpeaking = nil
                    events.append(.speechEnded(at: result?.range.end ?? seconds(fed)))
                } else if stillSpeaking && cut {
                    cutWhileSpeaking = fed
                } else if !stillSpeaking {
                    // The detector switched to silence at `silenceFrame`, after
                    // `vad_postspeech` silent frames in a row: silence began with the first.
                    let switched = silenceFrame ?? frontEnd.lastFrame(afterSamples: fed - utteranceStart)
                    let quiet = max(firstFrame, switched - shape.postSpeechFrames + 1)
                    speechActive = false
                    cutWhileSpeaking = nil
                    events.append(.speechEnded(at: seconds(min(fed, frameStart(quiet)))))
                }
            }
        }
        utteranceHasSpeech = false
        silenceFrame = nil
        silenceSample = nil
        earlyEndSample = nil
        continuesEarlyEnd = false
        partialText = ""
    }

    // MARK: - The search's early end (Endpointing.swift)

    /// The best path has been quiet long enough after its words (`endpointing`): they become
    /// final now, without waiting for the detector. The decoder, the front end and the
    /// utterance grid go on as they were, the decoder with a new utterance of its own, and the
    /// detector's wait is searched as before: so the session's cepstral mean takes in the same
    /// frames as when the detector ends the utterance (measured: a mean that skipped them
    /// changed later utterances' words), and speech heard again within the wait goes on in it.
    /// If the wait ends in silence, that utterance has no words and makes no final.
    private func endEarly(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) throws(StenoError) {
        earlyEndSample = fed
        let searched = searchedFrames
        var none = CepstralFrames(length: frontEnd.cepstrumLength)
        try endSearch(last: &none, cut: true, stillSpeaking: true, into: &events)
        // The rest of the utterance, on the same grid, from the next frame the front end makes.
        utteranceHasSpeech = true
        continuesEarlyEnd = true
        firstFrame += searched
    }

    /// A word heard in the detector's wait after an early end: speech has started again, with it.
    private func resumeSpeech(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) {
        guard let first = words(decoder, final: false).first else { return }
        speechActive = true
        events.append(.speechStarted(at: first.range.start))
    }

    /// A new utterance on a new grid from here (`fed`): the front end restarts.
    private func restartUtterance() {
        closedEarly = false
        utteranceStart = fed
        firstFrame = 0
        awaitingFirstBlock = true
        startedInSilence = false
        blockOrigin = fed
        blockLength = blockSamples
        frontEnd.startUtterance()
    }

    /// Moves past a hole of `length` samples (the client's silence; nothing of the utterance
    /// before it has speech): the front end starts again after it on the frame grid of the
    /// utterance's block grid (dropping the first samples after the hole up to that grid), and
    /// the next block ends where the whole input's would have.
    private func skip(_ length: Int, into events: inout [TranscriberEvent]) {
        fed += length
        if speechActive {
            speechActive = false
            cutWhileSpeaking = nil
            events.append(.speechEnded(at: seconds(fed - length)))
        }
        let shift = shape.frameShift
        let restart = blockOrigin + (fed - blockOrigin + shift - 1) / shift * shift
        dropSamples = restart - fed
        var blockEnd = blockOrigin + (restart - blockOrigin + blockSamples - 1) / blockSamples * blockSamples
        if blockEnd == restart { blockEnd += blockSamples }
        blockLength = blockEnd - restart
        utteranceStart = restart
        silenceFrame = nil
        silenceSample = nil
        firstFrame = 0
        frontEnd.startUtterance()
    }

    /// End of input: speech still going on ends, and nothing more is taken.
    private func finishSpeech(into events: inout [TranscriberEvent]) {
        if speechActive {
            speechActive = false
            events.append(.speechEnded(at: seconds(cutWhileSpeaking ?? fed)))
            cutWhileSpeaking = nil
        }
        release()
    }

    private func release() {
        guard !released else { return }
        released = true
        input = []
        inputBase += inputHead
        inputHead = 0
        holes = []
        suspended = nil
        yielded = false
        if let decoder {
            self.decoder = nil
            // Back to the pool between utterances, or not at all.
            do {
                try decoder.abandonUtterance()
                pool.giveBack(decoder)
            } catch {
                pool.discard(decoder)
            }
        }
        if let kept {
            self.kept = nil
            pool.giveBack(kept)
        }
        pool.withdraw(waiter)
    }

    private func compactInput() {
        if inputHead > 0 && inputHead * 2 >= input.count {
            input.removeFirst(inputHead)
            inputBase += inputHead
            inputHead = 0
        }
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

    /// The words of the current best path (`PocketSphinxDecoder.bestPath`), fillers left
    /// out, on the timeline. Finals carry the word posterior from `ps_seg_prob` as confidence;
    /// partials have no posteriors yet (pocketsphinx computes them with the final lattice) and
    /// report 0, as does a final whose utterance made no lattice (see `bestPath`).
    private func words(_ decoder: PocketSphinxDecoder, final: Bool) -> [Word] {
        var words: [Word] = []
        var origin: Int32?
        let earliest = seconds(utteranceStart)
        let latest = seconds(fed)
        let (first, posteriors) = decoder.bestPath(final: final)
        var segment = first
        while let current = segment {
            var startFrame: Int32 = 0
            var endFrame: Int32 = 0
            ps_seg_frames(current, &startFrame, &endFrame)
            let base = origin ?? startFrame
            origin = base
            if let raw = ps_seg_word(current), let text = display(String(cString: raw)) {
                let first = firstFrame + Int(startFrame) - Int(base)
                let last = firstFrame + Int(endFrame) - Int(base)
                let start = min(latest, max(earliest, seconds(frameStart(first))))
                let end = min(latest, max(start, seconds(frameStart(last + 1))))
                let confidence = posteriors ? decoder.probability(ps_seg_prob(current, nil, nil, nil)) : 0
                words.append(Word(text, range: TimeRange(start: start, end: end), confidence: confidence))
            }
            segment = ps_seg_next(current)  // frees the iterator at the end
        }
        return words
    }

    /// A decoder's word as the session's results name it: fillers left out, entries of the
    /// session's own by the client's spelling.
    private func display(_ raw: String) -> String? {
        if let vocabulary, let spelled = vocabulary.spelling[raw] { return spelled }
        return Self.spokenWord(raw)
    }

    /// The final's own text first (score 0), then the other n-best readings, most likely
    /// first, with their scores relative to the final's.
    private func alternatives(_ decoder: PocketSphinxDecoder, finalText: String) -> [Alternative] {
        let readings = decoder.alternatives(limit: alternativesLimit + 1).compactMap { reading -> (String, Double)? in
            let text = reading.words.compactMap { display($0) }.joined(separator: " ")
            return text.isEmpty ? nil : (text, reading.score)
        }
        let reference = readings.first(where: { $0.0 == finalText })?.1 ?? readings.first?.1 ?? 0
        var result = [Alternative(text: finalText, score: 0)]
        var seen: Set<String> = [finalText]
        for (text, score) in readings where result.count < alternativesLimit && seen.insert(text).inserted {
            result.append(Alternative(text: text, score: min(0, score - reference)))
        }
        return result
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

    private func frameStart(_ frame: Int) -> Int { utteranceStart + frame * shape.frameShift }

    /// CPU seconds of the calling thread (what ending an utterance costs, whatever the load).
    private func threadCPUSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
