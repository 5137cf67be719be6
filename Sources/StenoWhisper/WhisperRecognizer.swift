import StenoCore
import StenoSpeech
import StenoSystem

/// One session's recognizer on the Whisper worker. Whisper is not a streaming model, so the
/// session's own speech detector (pocketsphinx's voice activity detector, no model) finds
/// utterances, and only their audio goes to the worker: each utterance is heard whole for its
/// final, and, while it goes on, what there is of it for a volatile guess (one request in
/// flight at a time, so the cadence follows the worker's load). While a final is awaited the
/// recognizer waits (`isWaiting`): the session's later audio is kept, and `wake` is called
/// when the worker answers. Times are samples counted here; the worker's are relative to each
/// request's first sample.
public final class WhisperRecognizer: SpeechRecognizer {
    public let info: SpeechEngineInfo
    public var sampleRate: Int { Self.sampleRate }
    public static let sampleRate = 16_000

    /// Audio kept before the detector's onset, so no word's start is clipped.
    static let preRoll = 4_800
    /// Audio kept after the detector's end of speech.
    static let tail = 3_200
    /// Least new audio between two volatile guesses.
    static let partialEvery = 8_000
    /// An utterance is heard in pieces of at most this much (Whisper's window is 30 s).
    static let maximumUtterance = 16_000 * 25

    private let worker: WhisperWorker
    private let makeDetector: () throws(StenoError) -> PocketSphinxSpeechDetector
    private var detector: PocketSphinxSpeechDetector
    /// Where the detector's time 0 is, in samples.
    private var detectorBase = 0
    private let wake: @Sendable () -> Void
    private let partialResults: Bool

    /// Samples received (the end of the input timeline), and the audio from `bufferStart` on.
    private var received = 0
    private var buffer: [Float] = []
    private var bufferStart = 0
    private var utteranceStart: Int?
    private var speaking = false
    /// The final awaited: the utterance's first and last sample.
    private var awaited: (start: Int, end: Int)?
    /// Audio that came while waiting, to take once the final has come.
    private var kept: [Float] = []
    private var partialInFlight = false
    private var lastPartialAt = 0
    private var done = false
    private let mailbox = Locked<[(final: Bool, start: Int, result: Result<WhisperResult, StenoError>)]>([])

    init(worker: WhisperWorker, info: SpeechEngineInfo, partialResults: Bool,
         makeDetector: @escaping () throws(StenoError) -> PocketSphinxSpeechDetector,
         wake: @escaping @Sendable () -> Void) throws(StenoError) {
        self.worker = worker
        self.info = info
        self.partialResults = partialResults
        self.makeDetector = makeDetector
        self.detector = try makeDetector()
        self.wake = wake
    }

    public var receivedSeconds: Double { seconds(received + kept.count) }
    public var analyzedSeconds: Double { seconds(received) }
    public var isWaiting: Bool { awaited != nil }

    public func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
        guard !done else { throw StenoError(.internal, "the recognizer has finished") }
        if awaited != nil {
            kept.append(contentsOf: samples)
            return []
        }
        var events = try drain()
        events += try hear(Array(samples))
        return events
    }

    public func endUtterance() throws(StenoError) -> [TranscriberEvent] {
        var events = try drain()
        if awaited == nil, !kept.isEmpty { events += try hear(takeKept()) }
        if awaited == nil { close(at: received) }
        return events
    }

    public func finish() throws(StenoError) -> [TranscriberEvent] {
        var events = try endUtterance()
        if speaking {
            speaking = false
            events.append(.speechEnded(at: seconds(received)))
        }
        done = true
        return events
    }

    public func cancel() {
        done = true
        awaited = nil
        kept.removeAll()
        buffer.removeAll()
    }

    public func proceed() throws(StenoError) -> [TranscriberEvent] {
        var events = try drain()
        if awaited == nil, !kept.isEmpty { events += try hear(takeKept()) }
        return events
    }

    public func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent] {
        var events = try endUtterance()
        if speaking {
            speaking = false
            events.append(.speechEnded(at: seconds(received)))
        }
        received += max(0, samples)
        buffer.removeAll()
        bufferStart = received
        detector = try makeDetector()
        detectorBase = received
        return events
    }

    // MARK: -

    private func takeKept() -> [Float] {
        defer { kept.removeAll() }
        return kept
    }

    /// New audio through the detector; utterances opened and closed where it says.
    private func hear(_ samples: [Float]) throws(StenoError) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        buffer.append(contentsOf: samples)
        received += samples.count
        for event in detector.accept(samples) {
            switch event {
            case .speechStarted(let at):
                let onset = detectorBase + Int(at * Double(Self.sampleRate))
                if utteranceStart == nil { utteranceStart = max(bufferStart, onset - Self.preRoll) }
                speaking = true
                events.append(.speechStarted(at: seconds(max(0, onset))))
            case .speechEnded(let at):
                let end = detectorBase + Int(at * Double(Self.sampleRate))
                speaking = false
                events.append(.speechEnded(at: seconds(end)))
                close(at: min(received, end + Self.tail))
            default:
                break
            }
            if awaited != nil { break }
        }
        if let start = utteranceStart, awaited == nil, received - start >= Self.maximumUtterance {
            close(at: received)
        }
        if utteranceStart == nil, awaited == nil, buffer.count > Self.preRoll {
            // Nothing to hear: keep only the pre-roll.
            buffer.removeFirst(buffer.count - Self.preRoll)
            bufferStart = received - buffer.count
        }
        askForGuess()
        return events
    }

    /// A volatile guess of the utterance so far, when none is in flight and enough is new.
    private func askForGuess() {
        guard partialResults, !partialInFlight, awaited == nil, let start = utteranceStart,
              received - max(start, lastPartialAt) >= Self.partialEvery else { return }
        let slice = buffer[(start - bufferStart)...]
        partialInFlight = true
        lastPartialAt = received
        let accepted = worker.submit(slice, words: false, priority: 0) { [mailbox, wake] result in
            mailbox.withLock { $0.append((false, start, result)) }
            wake()
        }
        if !accepted { partialInFlight = false }  // the worker is full: no guess this time
    }

    /// Sends the utterance through `end` for its final, and waits for it.
    private func close(at end: Int) {
        guard let start = utteranceStart else { return }
        utteranceStart = nil
        let from = start - bufferStart
        let to = min(buffer.count, end - bufferStart)
        guard to > from else { return }
        awaited = (start, end)
        let slice = buffer[from..<to]
        let accepted = worker.submit(slice, words: true, priority: 1) { [mailbox, wake] result in
            mailbox.withLock { $0.append((true, start, result)) }
            wake()
        }
        if !accepted {
            mailbox.withLock { $0.append((true, start, .failure(StenoError(.internal, "the Whisper worker is full")))) }
        }
        // What follows the utterance stays, for the next one's pre-roll.
        let keepFrom = max(0, to - Self.preRoll)
        buffer.removeFirst(keepFrom)
        bufferStart += keepFrom
    }

    /// The worker's answers that have come: a final ends the wait; a guess for the utterance
    /// still going on is shown.
    private func drain() throws(StenoError) -> [TranscriberEvent] {
        let answers = mailbox.withLock { m in
            defer { m.removeAll() }
            return m
        }
        var events: [TranscriberEvent] = []
        for answer in answers {
            if !answer.final {
                partialInFlight = false
                guard case .success(let result) = answer.result, awaited == nil, answer.start == utteranceStart,
                      !result.text.isEmpty else { continue }
                let range = TimeRange(start: seconds(answer.start), end: seconds(received))
                events.append(.partial(RecognitionResult(range: range, text: result.text)))
                continue
            }
            guard let (start, end) = awaited, start == answer.start else { continue }
            awaited = nil
            let result = try answer.result.get()
            let offset = seconds(start)
            let limit = seconds(end)
            let words = result.words.map { w in
                Word(w.text, range: TimeRange(start: min(limit, offset + w.range.start), end: min(limit, offset + w.range.end)),
                     confidence: w.confidence)
            }
            guard !result.text.isEmpty else { continue }
            let range = TimeRange(start: words.first?.range.start ?? offset, end: words.last?.range.end ?? limit)
            events.append(.final(RecognitionResult(range: range, text: result.text, words: words)))
        }
        return events
    }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(Self.sampleRate) }
}

/// The Whisper engine: one supervised worker for every session, and each session's own
/// speech detector (made by the pocketsphinx engine served beside it: no model is loaded for it).
public final class WhisperEngine: SpeechEngine, Sendable {
    public let info: SpeechEngineInfo
    public let worker: WhisperWorker
    private let detectors: PocketSphinxEngine

    public init(worker: WhisperWorker, model: String = "whisper-tiny.en", detectors: PocketSphinxEngine) {
        self.worker = worker
        self.detectors = detectors
        self.info = SpeechEngineInfo(name: "whisper", version: "ctranslate2", model: model, language: "en-US",
                                     sampleRate: WhisperRecognizer.sampleRate)
    }

    public func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        let detectors = detectors
        return try WhisperRecognizer(worker: worker, info: info, partialResults: options.partialResults,
                                     makeDetector: { () throws(StenoError) in try detectors.makeSpeechDetector() }, wake: wake)
    }
}
