import StenoAudio
import StenoCore
import StenoSpeech

/// One session's audio path, shared by the server and `steno transcribe`: the bytes of each
/// binary message → `AudioIngest` (PCM conversion or Opus decoding, resampling to the
/// recognizer's rate) → the recognizer. Every time it reports is seconds on the session
/// timeline (the declared input's samples), whatever the resampler and chunking did.
///
/// `finalize(through:)` ends the utterance in progress at a time on the timeline. When that
/// time is the end of the audio received (the usual case, and what a plain `finalize` asks),
/// the resampler is flushed so that every sample received is analyzed, and the recognizer's
/// utterance ends. When it is earlier, the recognizer has already heard past it: the utterance
/// ends, the words before the time become the final, and the audio after it is fed again
/// from a short history (`historySeconds`) into a new utterance, so that it is recognized
/// afresh and stays volatile.
///
/// When the recognizer waits for a shared decoder (`isWaiting`), what it was given is kept and
/// `proceed()` goes on once it is woken; a `finalize`, `gap` or `finish` then completes in a
/// later call (their events come from `proceed()`). So do they when it owes results from
/// elsewhere (`owesResults`), though it goes on taking audio meanwhile.
///
/// Not `Sendable`: one session owns it and calls it from one worker lane at a time.
public final class TranscriptionPipeline {
    /// What one message produced.
    public struct Output: Sendable, Hashable {
        /// Recognizer events, with times on the session timeline.
        public var events: [TranscriberEvent]
        /// A non-fatal problem to tell the client about (an undecodable Opus packet, concealed).
        public var warning: StenoError?
    }

    /// Seconds of recent audio kept (at the recognizer's rate) to re-recognize what follows an
    /// earlier `finalize(through:)`; longer than the longest utterance a recognizer keeps open.
    public static let historySeconds = 30

    /// The declared input format.
    public var format: AudioFormat { ingest.format }

    private let ingest: AudioIngest
    private let recognizer: any SpeechRecognizer
    private var scratch: [Float] = []

    /// Where recognizer samples come from: each entry says that recognizer sample
    /// `recognizerStart` is output sample `outputStart` of the ingest (a new entry after each
    /// re-feed). Without an early finalize there is one entry and the two counts are equal.
    private var mapping: [(recognizerStart: Int, outputStart: Int)] = [(0, 0)]
    private var recognizerSamples = 0
    /// Silence or gaps the recognizer counted without audio: where in its samples, how many,
    /// and the session time they start at.
    private var holes: [(start: Int, length: Int, time: Double)] = []
    /// The latest ingest output, `history[0]` being output sample `historyStart`.
    private var history: [Float] = []
    private var historyStart = 0
    private let historyLimit: Int
    /// The volatile result showing (session time), to know where the utterance in progress began.
    private var showing: RecognitionResult?
    private var finished = false
    /// A `finalize(through:)` before the end of the audio whose final has not come yet (the
    /// recognizer waits for a decoder): the time and output sample of its cut.
    private var pendingCut: (time: Double, sample: Int)?

    /// A pipeline for one session's declared format, feeding `recognizer`.
    public init(format: AudioFormat, recognizer: any SpeechRecognizer) throws(StenoError) {
        self.ingest = try AudioIngest(format: format, outputRate: recognizer.sampleRate)
        self.recognizer = recognizer
        self.historyLimit = Self.historySeconds * recognizer.sampleRate
    }

    /// Seconds of audio received (the end of the session timeline so far).
    public var receivedSeconds: Double { ingest.inputSeconds }

    /// Seconds of audio the recognizer has analyzed, on the session timeline.
    public var analyzedSeconds: Double {
        min(receivedSeconds, sessionTime(recognizerSeconds: recognizer.analyzedSeconds))
    }

    /// Whether `finish()` was called: no more audio is taken.
    public var isFinished: Bool { finished }

    /// Whether the recognizer waits for a shared decoder: call `proceed()` once it is woken.
    /// Also while a `finalize(through:)` before the end of the audio waits for its final from
    /// an engine that owes it: the audio after the cut is heard again once it has come, so no
    /// more is fed meanwhile.
    public var isWaiting: Bool { recognizer.isWaiting || (pendingCut != nil && recognizer.owesResults) }

    /// Whether results the recognizer asked for elsewhere are still to come (`SpeechRecognizer.owesResults`):
    /// a finalize or `end` is done only once they have.
    public var owesResults: Bool { recognizer.owesResults }

    /// Goes on after the recognizer was woken; returns what it produced.
    public func proceed() throws(StenoError) -> [TranscriberEvent] {
        try completeCut(map(try recognizer.proceed()))
    }

    /// How the last utterance the recognizer closed went, its times on the session timeline
    /// (see `UtteranceTiming`).
    public var lastUtteranceTiming: UtteranceTiming? {
        guard var timing = recognizer.lastUtteranceTiming else { return nil }
        timing.detectorDecidedAt = timing.detectorDecidedAt.map { sessionTime(recognizerSeconds: $0) }
        timing.closedAt = sessionTime(recognizerSeconds: timing.closedAt)
        return timing
    }

    /// Where on the session timeline the input will complete the recognizer's next analysis
    /// block (nil: it does not say, or it cannot analyze now): the block's samples plus the
    /// ingest's own delay (the resampler's filter: a sample comes out of it that much after its
    /// input went in), rounded up to a whole input sample. A whole sample, so that it is exactly
    /// the time the machine gives the chunk that completes it (`AudioChunk.end`).
    public var nextBlockAt: Double? {
        guard !finished, let samples = recognizer.samplesToNextBlock else { return nil }
        let clock = ingest.clock
        let perOutput = Double(clock.inputRate) / Double(clock.outputRate)
        let delay = max(0, receivedSeconds - clock.seconds(atOutputSample: clock.outputSamples)) * Double(clock.inputRate)
        // Less a millionth of a sample: a block that ends on a sample is not put one later by rounding.
        let through = clock.inputSamples + Int((Double(samples) * perOutput + delay - 1e-6).rounded(.up))
        return clock.seconds(atInputSample: through)
    }

    /// CPU seconds the recognizer's engine spent for it elsewhere (its worker process).
    public var engineSeconds: Double { recognizer.engineSeconds }

    /// Opus packets that could not be decoded and were concealed.
    public var concealedPackets: Int { ingest.concealedPackets }

    /// Decodes one binary message and feeds it to the recognizer.
    /// Throws `bad_audio` for PCM that is not whole sample frames (nothing is consumed), and
    /// `internal` if the recognizer failed.
    public func append(_ message: UnsafeRawBufferPointer) throws(StenoError) -> Output {
        // The decoded samples straight from the ingest's buffer to the recognizer, uncopied.
        let (events, report) = try ingest.ingest(message) { samples, report in
            (Result { () throws(StenoError) in try feed(samples) }, report)
        }
        return Output(events: try events.get(), warning: report.concealment)
    }

    /// `append` for a byte array.
    public func append(_ message: [UInt8]) throws(StenoError) -> Output {
        var result: Result<Output, StenoError> = .success(Output(events: []))
        message.withUnsafeBytes { raw in
            do throws(StenoError) { result = .success(try append(raw)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    /// Ends the utterance in progress at `through` (seconds on the session timeline, as the
    /// session machine received it; the end of the audio if nil or later). Returns the final it
    /// produced, if any, and the events of re-recognizing what follows `through`.
    public func finalize(through: Double? = nil) throws(StenoError) -> [TranscriberEvent] {
        var events = try flushIngest()
        let end = ingest.outputSamples
        let cutTime = through ?? receivedSeconds
        // The whole input (what is not before its end, and a frame of slack for the rounding of
        // `through`): end the utterance.
        guard cutTime < receivedSeconds, case let cut = ingest.clock.outputSample(atSeconds: cutTime), cut < end - 1 else {
            events += map(try recognizer.endUtterance())
            return events
        }
        // Nothing heard before the cut in this utterance: nothing to finalize. A recognizer
        // waiting for a decoder shows nothing yet of what it holds: audio before the cut that it
        // has not analyzed may be speech, so the cut waits with it (`completeCut`).
        let unanalyzed = recognizer.owesResults && analyzedSeconds < cutTime
        guard unanalyzed || showing.map({ $0.range.start < cutTime && !$0.text.isEmpty }) == true else { return events }
        pendingCut = (cutTime, cut)
        events += try completeCut(map(try recognizer.endUtterance()))
        return events
    }

    /// The cut of a `finalize(through:)`, once the recognizer has made the final of the
    /// utterance it ended: the words before the cut stay final, and the audio after it is heard
    /// again in a new utterance. Until then (the recognizer waits) events pass as they are: the
    /// finals among them end before the cut.
    private func completeCut(_ produced: [TranscriberEvent]) throws(StenoError) -> [TranscriberEvent] {
        guard let (cutTime, cut) = pendingCut, !recognizer.owesResults else { return produced }
        pendingCut = nil
        var events: [TranscriberEvent] = []
        var refeedFrom = cut
        for event in produced {
            guard case .final(let result) = event else {
                events.append(event)
                continue
            }
            let kept = result.words.filter { ($0.range.start + $0.range.end) / 2 < cutTime }
            guard let last = kept.last else { continue }
            let finalEnd = max(cutTime, last.range.end)
            // Cut short, it no longer is what its alternatives read: they are left out. A
            // translation's original keeps its words before the cut alike.
            let original = result.original.map { o in
                let before = o.words.filter { ($0.range.start + $0.range.end) / 2 < cutTime }
                return Original(text: before.map(\.text).joined(separator: " "), words: before, language: o.language)
            }
            events.append(.final(RecognitionResult(
                range: TimeRange(start: result.range.start, end: finalEnd),
                text: kept.map(\.text).joined(separator: " "),
                words: kept, written: result.written, language: result.language, original: original)))
            refeedFrom = max(refeedFrom, ingest.clock.outputSample(atSeconds: finalEnd))
        }
        // Hear the rest again, in a new utterance.
        let end = ingest.outputSamples
        refeedFrom = min(max(refeedFrom, historyStart), end)
        let again = Array(history[(refeedFrom - historyStart)...])
        mapping.append((recognizerSamples, refeedFrom))
        events += try feed(again, record: false)
        return events
    }

    /// A hole of `seconds` in the timeline (audio the client lost): what was heard before it
    /// becomes final, and later audio is placed after the hole.
    public func gap(seconds: Double) throws(StenoError) -> [TranscriberEvent] {
        try silence(seconds: seconds)
    }

    /// `seconds` of silence the client left out: the timeline moves on as if it had been sent
    /// (the recognizer ends the utterance in progress and puts what follows on the grid the
    /// whole input would have had), and nothing is reported.
    public func silence(seconds: Double) throws(StenoError) -> [TranscriberEvent] {
        guard !finished else { return [] }
        scratch.removeAll(keepingCapacity: true)
        let start = receivedSeconds
        _ = ingest.skip(seconds: seconds, flushingInto: &scratch)
        var events = try feed(scratch)
        let samples = Int((max(0, seconds) * Double(recognizer.sampleRate)).rounded())
        holes.append((recognizerSamples, samples, start))
        recognizerSamples += samples
        mapping.append((recognizerSamples, ingest.outputSamples))
        events += map(try recognizer.skipSilence(samples))
        return events
    }

    /// End of input: flushes the resampler and finalizes everything. The recognizer is done.
    public func finish() throws(StenoError) -> [TranscriberEvent] {
        guard !finished else { return [] }
        let events = try flushIngest()
        finished = true
        return events + map(try recognizer.finish())
    }

    /// Discards what is not final and releases the recognizer.
    public func cancel() {
        finished = true
        recognizer.cancel()
    }

    // MARK: -

    private func flushIngest() throws(StenoError) -> [TranscriberEvent] {
        scratch.removeAll(keepingCapacity: true)
        _ = ingest.flush(appendingTo: &scratch)
        return try feed(scratch)
    }

    private func feed(_ samples: [Float], record: Bool = true) throws(StenoError) -> [TranscriberEvent] {
        var result: Result<[TranscriberEvent], StenoError> = .success([])
        samples.withUnsafeBufferPointer { buffer in
            result = Result { () throws(StenoError) in try feed(buffer, record: record) }
        }
        return try result.get()
    }

    /// Feeds samples to the recognizer; `record` keeps them in the history (new audio only).
    private func feed(_ samples: UnsafeBufferPointer<Float>, record: Bool = true) throws(StenoError) -> [TranscriberEvent] {
        guard !samples.isEmpty, !finished else { return [] }
        if record { remember(samples) }
        recognizerSamples += samples.count
        return map(try recognizer.accept(samples))
    }

    private func remember(_ samples: UnsafeBufferPointer<Float>) {
        history.append(contentsOf: samples)
        if history.count > 2 * historyLimit {
            let drop = history.count - historyLimit
            history.removeFirst(drop)
            historyStart += drop
        }
    }

    /// Session time of a time on the recognizer's own input timeline.
    private func sessionTime(recognizerSeconds t: Double) -> Double {
        let rate = Double(recognizer.sampleRate)
        let k = t.isFinite ? Int((t * rate).rounded()) : 0
        // Inside a hole (or at its edges) there is no audio to map through: time runs on.
        if let hole = holes.last(where: { $0.start <= k && k <= $0.start + $0.length }) {
            return hole.time + Double(k - hole.start) / rate
        }
        let entry = mapping.last { $0.recognizerStart <= k } ?? mapping[0]
        return ingest.clock.seconds(atOutputSample: entry.outputStart + (k - entry.recognizerStart))
    }

    private func map(_ events: [TranscriberEvent]) -> [TranscriberEvent] {
        events.map { event in
            switch event {
            case .speechStarted(let at): return .speechStarted(at: sessionTime(recognizerSeconds: at))
            case .speechEnded(let at): return .speechEnded(at: sessionTime(recognizerSeconds: at))
            case .volatile(let result):
                let mapped = map(result)
                showing = mapped.text.isEmpty ? nil : mapped
                return .volatile(mapped)
            case .final(let result):
                showing = nil
                return .final(map(result))
            case .unheard(let range, let scores):
                showing = nil
                return .unheard(map(range), scores: scores)
            }
        }
    }

    private func map(_ result: RecognitionResult) -> RecognitionResult {
        RecognitionResult(
            range: map(result.range),
            text: result.text,
            words: result.words.map { Word($0.text, range: map($0.range), confidence: $0.confidence) },
            alternatives: result.alternatives,
            written: result.written,
            language: result.language,
            original: result.original.map { o in
                Original(text: o.text, words: o.words.map { Word($0.text, range: map($0.range), confidence: $0.confidence) },
                         language: o.language)
            })
    }

    private func map(_ range: TimeRange) -> TimeRange {
        TimeRange(start: sessionTime(recognizerSeconds: range.start), end: sessionTime(recognizerSeconds: range.end))
    }
}
