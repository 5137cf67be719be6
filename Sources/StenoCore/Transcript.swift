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

        public init(volatile: Bool = true, words: Bool = true) {
            self.volatile = volatile
            self.words = words
        }
    }

    public let options: Options
    /// Every final emitted so far, in order, with words (for broadcast backfill and captions).
    public private(set) var finals: [RecognitionResult] = []
    /// The volatile result the client is showing (non-empty text), or nil.
    public private(set) var showingVolatile: RecognitionResult?
    /// End of the last final emitted (0 before the first).
    public var lastFinalEnd: Double { finals.last?.range.end ?? 0 }

    public init(options: Options = Options()) {
        self.options = options
    }

    /// Consumes one recognizer event; returns the protocol events to send, in order.
    public mutating func consume(_ event: TranscriberEvent) -> [ServerEvent] {
        switch event {
        case .speechStarted(let at):
            return [.speech(.started, at: Self.quantize(at, otherwise: lastFinalEnd))]
        case .speechEnded(let at):
            return [.speech(.ended, at: Self.quantize(at, otherwise: lastFinalEnd))]
        case .partial(let result):
            return consumePartial(result)
        case .final(let result):
            return consumeFinal(result)
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
        let result = clean(raw, notBefore: lastFinalEnd)
        if result.text.isEmpty {
            return clearVolatile()
        }
        if let showing = showingVolatile, showing.text == result.text { return [] }
        showingVolatile = result
        return [.volatile(result, includeWords: options.words)]
    }

    private mutating func consumeFinal(_ raw: RecognitionResult) -> [ServerEvent] {
        let result = clean(raw, notBefore: lastFinalEnd)
        guard !result.text.isEmpty else {
            // Dropped: nothing supersedes a showing volatile, so clear it.
            return clearVolatile()
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
        return RecognitionResult(range: TimeRange(start: start, end: end), text: text, words: words)
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
