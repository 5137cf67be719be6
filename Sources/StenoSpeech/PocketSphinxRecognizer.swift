// The recognizer's state and its face to the session: what `PocketSphinxRecognizer` keeps
// between calls (input, holes, the utterance in progress, voice activity, the decoder it
// holds), the `SpeechRecognizer` calls, and its release. How it analyzes blocks is in
// PocketSphinxRecognizer+Analysis.swift, how an utterance ends in
// PocketSphinxRecognizer+Utterances.swift, and the words it reports in
// PocketSphinxRecognizer+Results.swift.

import StenoCore

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
///   becomes a `.final`; if speech goes on, the current best path becomes a `.volatile` when its
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
    public var analyzedSeconds: Double { seconds(fed) }
    public var isWaiting: Bool { suspended != nil || yielded }
    public internal(set) var lastUtteranceTiming: UtteranceTiming?

    public var samplesToNextBlock: Int? {
        guard !released, failure == nil, suspended == nil, !yielded, holes.isEmpty else { return nil }
        return max(1, blockLength + dropSamples - (input.count - inputHead))
    }

    let pool: DecoderPool
    let waiter: DecoderWaiter
    let frontEnd: SpeechFrontEnd
    let shape: DecoderShape
    let blockSamples: Int
    let maxUtteranceSamples: Int
    let volatileResults: Bool
    /// When an utterance ends besides the detector's switch (Endpointing.swift).
    let endpointing: Endpointing
    /// Where an early end (`endpointing`) decided the utterance was over, as a stream sample.
    var earlyEndSample: Int?
    /// The utterance in progress goes on from an early end, through the detector's wait (see
    /// `endEarly`); speech starts again only with a word heard in it.
    var continuesEarlyEnd = false
    /// Cepstral frames given to the decoder in its utterance in progress.
    var searchedFrames = 0

    /// The session's feature state (cepstral mean, feature context), between its utterances.
    var mean: FeatureState
    /// The next block is the utterance's first; and whether that first block brought no
    /// frames (see `FeatureState`).
    var awaitingFirstBlock = true
    var startedInSilence = false
    /// The decoder searching the utterance in progress (only while it has speech).
    var decoder: PocketSphinxDecoder?
    /// With `keepsDecoder`: the decoder kept between utterances.
    var kept: PocketSphinxDecoder?
    let keepsDecoder: Bool
    /// The session's own vocabulary, put into each decoder it borrows; nil: none.
    let vocabulary: SessionVocabulary?
    /// Alternatives per final (n-best); 0: none.
    let alternativesLimit: Int
    public let notices: [StenoError]

    /// Samples analyzed so far (front end and search).
    var fed = 0
    /// Samples accepted and not yet given to the front end; `input[inputHead...]`. Sample
    /// `input[i]` is sample `inputBase + i` of the stream.
    var input: [Int16] = []
    var inputHead = 0
    var inputBase = 0
    /// Silence left out by the client (`skipSilence`): before which accepted sample (counted
    /// like `inputBase`), and how long.
    var holes: [(position: Int, length: Int)] = []
    /// Samples to drop from what comes after a hole, so that frames stay on the grid the
    /// whole input would have put them on.
    var dropSamples = 0
    /// Where the block grid of the utterance started, and how long the next block is (a
    /// block is shorter only after a hole, to end where the whole input's would).
    var blockOrigin = 0
    var blockLength: Int
    /// A block the front end has analyzed whose cepstra wait for a decoder.
    var suspended: Block?
    /// The decoder was given up at an early end for sessions in line (`endSearch`): the rest
    /// of the utterance goes on once one is granted, before anything more is analyzed.
    var yielded = false
    /// An end asked for (`endUtterance`, `finish`), done once the input before it is analyzed.
    var pendingEnd: End?
    private(set) var released = false
    var failure: StenoError?

    struct Block {
        var frames: CepstralFrames
        var samples: Int
        /// The block is the incomplete one an end analyzes.
        var end: End?
    }

    enum End {
        case utterance, finish
        /// The utterance ends where the client left silence out (as the detector would have
        /// ended it in that silence).
        case silence
    }

    // The utterance in progress.
    /// The sample where it started (`P`).
    var utteranceStart = 0
    /// Speech was detected in this utterance (it is being searched).
    var utteranceHasSpeech = false
    /// First searched frame on the utterance's grid.
    var firstFrame = 0
    /// The search of the utterance ended before the end of its block (`endSearchEarly`); the
    /// grid restarts at the block's end.
    var closedEarly = false
    /// Where the detector last switched from speech to silence in this utterance, and after
    /// which sample of the stream it did.
    var silenceFrame: Int?
    var silenceSample: Int?
    /// Text of the last `.volatile` reported in this utterance.
    var volatileText = ""

    // Voice activity as reported (`.speechStarted`/`.speechEnded`).
    var speechActive = false
    /// Where an utterance was cut while speech went on (max length, `endUtterance`): the
    /// detector restarts there, and speech counts as ended at this sample unless it is
    /// detected again within `vad_postspeech` frames.
    var cutWhileSpeaking: Int?

    init(pool: DecoderPool, shape: DecoderShape, frontEnd: SpeechFrontEnd, info: SpeechEngineInfo,
         blockSamples: Int, maxUtteranceSeconds: Double, volatileResults: Bool, keepsDecoder: Bool = false,
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
        self.volatileResults = volatileResults
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
        return try run()
    }

    public func cancel() {
        release()
    }

    // MARK: - Life cycle

    private func usable() throws(StenoError) {
        if let failure { throw failure }
        guard !released else { throw StenoError(.internal, "the recognizer was already finished or cancelled") }
    }

    func release() {
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

    // MARK: - Helpers

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

    func frameStart(_ frame: Int) -> Int { utteranceStart + frame * shape.frameShift }

    func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}
