/// Turns a recognizer's `TranscriberEvent`s into protocol events, enforcing docs/protocol.md's
/// invariants whatever the recognizer does, and keeps the finals so far.
///
/// Guarantees on what it emits:
/// - All times are on the millisecond grid (what the wire shows is what is compared), ≥ 0.
/// - Finals: `start ≤ end`; each final starts at or after the previous final's end (a final
///   reaching back is clamped: its start moves to the previous final's end, its end to at
///   least its start). Ranges therefore increase and never overlap.
/// - A final whose text and words are all blank is dropped (no event, not kept). A final with
///   blank text but words gets the words joined by spaces as its text. Text is trimmed.
/// - Every word lies inside its result's range (clamped), with `start ≤ end`; blank words are
///   dropped; confidences are clamped to 0...1.
/// - Volatile results start at or after the last final's end, are sent only when their text
///   differs from the one showing, and never when `volatile` is off.
/// - Clearing (what a client needs to know): a final *supersedes* the showing volatile when
///   the volatile ends at or before the final's end — clients drop it then, and nothing more
///   is sent. Otherwise (the volatile reaches past the final, or the final was dropped) an
///   empty volatile follows, so a client never shows stale text. Client rule: on `final`,
///   discard the volatile if its `end` ≤ the final's `end`; on `volatile`, replace it.
/// - `words` arrays are written only when `words` is on; finals kept here always keep their
///   words (captions use word times to split cues).
public struct TranscriptAssembler: Sendable {
    public struct Options: Sendable, Hashable {
        /// Send volatile results.
        public var volatile: Bool
        /// Include words in results.
        public var words: Bool
        /// How text is written (`ReadableText` for `.readable`). Raw unless asked: the protocol's
        /// default (readable) is `StartRequest`'s.
        public var format: TextFormat
        /// What profane words become (`ProfanityFilter`), after the text is written. Kept unless
        /// asked: the server's default (mask) is `SessionConfiguration`'s.
        public var profanity: ProfanityMode

        public init(volatile: Bool = true, words: Bool = true, format: TextFormat = .raw, profanity: ProfanityMode = .keep) {
            self.volatile = volatile
            self.words = words
            self.format = format
            self.profanity = profanity
        }
    }

    public let options: Options
    /// Every final emitted so far, in order, with words: the session's transcript, for as long
    /// as the session lasts (`steno transcribe`'s captions, the finals a session publishes on
    /// a channel it could claim only later, the log).
    ///
    /// A channel's broadcast keeps a list of its own (StenoServer's `ChannelHub`), a different
    /// fact: what its viewers were sent, from when the session claimed the channel until it let
    /// it go (a prefix of this list, or all of it). It outlives the session (caption files,
    /// past broadcasts, viewers who join after the end), another instance's broadcast has no
    /// session here at all (its finals come through Redis), and it is read under the hub's
    /// lock, which never waits for a session's. So the hub keeps each final as its event
    /// carries it (`EncodedEvent.result`), never reading this list; the two hold the same
    /// values, whose text and words are shared, not copied.
    public private(set) var finals: [RecognitionResult] = []
    /// The volatile result the client is showing (non-empty text), or nil.
    public private(set) var showingVolatile: RecognitionResult?
    /// End of the last final emitted (0 before the first).
    public var lastFinalEnd: Double { finals.last?.range.end ?? 0 }
    /// Whether the next words begin a sentence (readable text): at first, and after a final
    /// that ended one.
    public private(set) var atSentenceStart = true
    /// Since when speech has been going on (the last `speechStarted` with no `speechEnded` yet).
    private var speechSince: Double?
    /// The start of the first non-empty volatile since the last final: the utterance in progress.
    private var utteranceSince: Double?

    public init(options: Options = Options()) {
        self.options = options
    }

    /// Consumes one recognizer event; returns the protocol events to send, in order. A final
    /// consumed alone is not known to end a sentence: give events as the recognizer reported
    /// them together (`consume(_ events:)`), so that a final followed by the end of speech is.
    public mutating func consume(_ event: TranscriberEvent) -> [ServerEvent] {
        consume(event, endsSentence: false)
    }

    /// Consumes the events a recognizer reported together, in order. A final that the end of
    /// speech follows at once (the speaker paused: the detector, not a length limit or a
    /// finalize, ended the utterance) ends a sentence.
    public mutating func consume(_ events: [TranscriberEvent]) -> [ServerEvent] {
        var out: [ServerEvent] = []
        for (index, event) in events.enumerated() {
            var endsSentence = false
            if case .final = event, index + 1 < events.count, case .speechEnded = events[index + 1] { endsSentence = true }
            out += consume(event, endsSentence: endsSentence)
        }
        return out
    }

    /// The earliest time the next final can start, given how far analysis has got: the start
    /// of the utterance in progress (speech going on, or a partial showing), else `analyzed`,
    /// less `margin` (what a recognizer's detector may keep from before it heard speech), and
    /// never before the last final's end. Live captions are settled up to here.
    public func nextFinalStart(analyzed: Double, margin: Double = 0.5) -> Double {
        var earliest = analyzed
        if let speechSince { earliest = min(earliest, speechSince) }
        if let utteranceSince { earliest = min(earliest, utteranceSince) }
        return max(lastFinalEnd, earliest - margin)
    }

    private mutating func consume(_ event: TranscriberEvent, endsSentence: Bool) -> [ServerEvent] {
        switch event {
        case .speechStarted(let at) where speechSince == nil:
            speechSince = at.isFinite ? at : lastFinalEnd
        case .speechEnded:
            speechSince = nil
        case .volatile(let result) where utteranceSince == nil && !Self.trimmed(result.text).isEmpty:
            utteranceSince = result.range.start.isFinite ? result.range.start : lastFinalEnd
        case .final, .unheard:
            utteranceSince = nil
        default:
            break
        }
        switch event {
        case .speechStarted(let at):
            return [.speech(.started, at: Self.quantize(at, otherwise: lastFinalEnd))]
        case .speechEnded(let at):
            return [.speech(.ended, at: Self.quantize(at, otherwise: lastFinalEnd))]
        case .volatile(let result):
            return consumePartial(result)
        case .final(let result):
            return consumeFinal(result, endsSentence: endsSentence)
        case .unheard(let range, let scores):
            return clearVolatile() + [.lowConfidence(range, scores: scores)]
        }
    }

    /// Clears a showing volatile that starts before `time` (everything before it is final now):
    /// returns an empty volatile to send, or nothing. Used when a finalize or end completes.
    public mutating func clearVolatile(before time: Double = .infinity) -> [ServerEvent] {
        guard let showing = showingVolatile, showing.range.start < time else { return [] }
        showingVolatile = nil
        return [emptyVolatile(at: max(lastFinalEnd, showing.range.start))]
    }

    /// Forgets the showing volatile without telling the client (cancel: nothing more is sent).
    public mutating func discardVolatile() {
        showingVolatile = nil
    }

    // MARK: -

    private mutating func consumePartial(_ raw: RecognitionResult) -> [ServerEvent] {
        guard options.volatile else { return [] }
        var result = clean(raw, notBefore: lastFinalEnd)
        if result.text.isEmpty {
            return clearVolatile()
        }
        result = written(result, endsSentence: false)
        if result.text.isEmpty { return clearVolatile() }  // all of it removed as profanity
        if let showing = showingVolatile, showing.text == result.text { return [] }
        showingVolatile = result
        return [.volatile(result, includeWords: options.words)]
    }

    private mutating func consumeFinal(_ raw: RecognitionResult, endsSentence: Bool) -> [ServerEvent] {
        var result = clean(raw, notBefore: lastFinalEnd)
        guard !result.text.isEmpty else {
            // Dropped: nothing supersedes a showing volatile, so clear it.
            return clearVolatile()
        }
        result = written(result, endsSentence: endsSentence)
        if result.text.isEmpty { return clearVolatile() }  // all of it removed as profanity
        if options.format == .readable {
            atSentenceStart = result.written ? ReadableText.endsSentence(result.text) : endsSentence
        }
        finals.append(result)
        var events: [ServerEvent] = [.final(result, includeWords: options.words)]
        if let showing = showingVolatile {
            showingVolatile = nil
            if showing.range.end > result.range.end {
                events.append(emptyVolatile(at: result.range.end))
            }
        }
        return events
    }

    /// The result in the session's format: a recognizer's lowercase words made readable, or an
    /// engine's written text lowered for raw; the rest as it is.
    private func written(_ result: RecognitionResult, endsSentence: Bool) -> RecognitionResult {
        let formatted = switch (options.format, result.written) {
        case (.readable, false): ReadableText.format(result, startsSentence: atSentenceStart, endsSentence: endsSentence)
        case (.raw, true): ReadableText.lowered(result)
        default: result
        }
        var out = ProfanityFilter.apply(formatted, options.profanity)
        if let original = result.originalResult {  // written by Whisper as the translation is
            let written = ProfanityFilter.apply(options.format == .raw ? ReadableText.lowered(original) : original, options.profanity)
            out.original = Original(text: written.text, words: written.words, language: original.language)
        }
        return out
    }

    private func emptyVolatile(at time: Double) -> ServerEvent {
        .volatile(RecognitionResult(range: TimeRange(start: time, end: time), text: ""),
                  includeWords: options.words)
    }

    /// Sanitizes a result: quantized, non-negative, ordered times starting at or after `floor`;
    /// trimmed text (or the words' text); words clamped into the range.
    private func clean(_ raw: RecognitionResult, notBefore floor: Double) -> RecognitionResult {
        let start = max(Self.quantize(raw.range.start, otherwise: floor), floor)
        let end = max(Self.quantize(raw.range.end, otherwise: start), start)
        var words: [Word] = []
        words.reserveCapacity(raw.words.count)
        for word in raw.words {
            let text = Self.trimmed(word.text)
            guard !text.isEmpty else { continue }
            let wordStart = min(max(Self.quantize(word.range.start, otherwise: start), start), end)
            let wordEnd = min(max(Self.quantize(word.range.end, otherwise: wordStart), wordStart), end)
            words.append(Word(text, range: TimeRange(start: wordStart, end: wordEnd), confidence: word.validConfidence))
        }
        var text = Self.trimmed(raw.text)
        if text.isEmpty && !words.isEmpty {
            text = words.map(\.text).joined(separator: " ")
        }
        var alternatives = raw.alternatives.filter { !Self.trimmed($0.text).isEmpty }
        if !alternatives.isEmpty {
            // The first is the final's own text, whatever the recognizer made of it.
            alternatives[0].text = text
            for index in alternatives.indices { alternatives[index].text = Self.trimmed(alternatives[index].text) }
        }
        let language = raw.language.map(Self.trimmed).flatMap { $0.isEmpty ? nil : $0 }
        // A translation's original, cleaned alike.
        let original = raw.original.map { o in
            clean(RecognitionResult(range: raw.range, text: o.text, words: o.words, written: raw.written, language: o.language),
                  notBefore: floor)
        }
        return RecognitionResult(range: TimeRange(start: start, end: end), text: text, words: words,
                                 alternatives: alternatives, written: raw.written, language: language,
                                 original: original.map { Original(text: $0.text, words: $0.words, language: $0.language) })
    }

    /// A time on the millisecond grid, ≥ 0; `otherwise` when the time is not finite.
    static func quantize(_ time: Double, otherwise fallback: Double) -> Double {
        guard time.isFinite else { return fallback }
        let clamped = min(max(time, 0), 1e12)
        return Double(CoreMath.nearest(clamped * 1000) ?? 0) / 1000
    }

    static func trimmed(_ text: String) -> String {
        var slice = Substring(text)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}
