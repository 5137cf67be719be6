/// A span of the session's audio timeline, in seconds (0 = first sample of the first audio message).
public struct TimeRange: Sendable, Hashable, CustomStringConvertible {
    public var start: Double
    public var end: Double

    public init(start: Double, end: Double) {
        self.start = start
        self.end = end
    }

    public var duration: Double { end - start }

    public func contains(_ other: TimeRange) -> Bool { other.start >= start && other.end <= end }

    public var description: String { "[\(start) → \(end)]" }
}

/// One recognized word with its time range and a confidence in 0...1.
public struct Word: Sendable, Hashable {
    public var text: String
    public var range: TimeRange
    public var confidence: Double

    public init(_ text: String, range: TimeRange, confidence: Double) {
        self.text = text
        self.range = range
        self.confidence = confidence
    }

    /// The confidence as the protocol carries it: 0…1, and 0 for NaN or infinity.
    public var validConfidence: Double { confidence.isFinite ? min(max(confidence, 0), 1) : 0 }
}

/// Another reading of a final's audio (n-best), with its score: the recognizer's log
/// probability of that reading relative to the final's own text (0 for it; lower is less likely).
public struct Alternative: Sendable, Hashable {
    public var text: String
    public var score: Double

    public init(text: String, score: Double) {
        self.text = text
        self.score = score
    }
}

/// A recognition result over a time range: the text and, when asked for, its words.
/// The same shape serves volatile and final results.
public struct RecognitionResult: Sendable, Hashable {
    public var range: TimeRange
    public var text: String
    public var words: [Word]
    /// Finals of a session that asked for them: the final's own text first, then other
    /// readings, most likely first.
    public var alternatives: [Alternative]
    /// The engine wrote it as people write (Whisper: capitals, punctuation, digits): the
    /// readable format keeps it as it is, and the raw one lowers it (`ReadableText.lowered`).
    public var written: Bool
    /// The language it was heard in (BCP 47, "de"), when the engine found or was told it:
    /// a multilingual Whisper model's finals. nil when the model has one language.
    public var language: String?
    /// A translation's original: what was said, in the language spoken (a translated session's
    /// finals, `LanguagePlan.translate`). A broadcast's original rendition is made of them.
    public var original: Original?

    public init(range: TimeRange, text: String, words: [Word] = [], alternatives: [Alternative] = [],
                written: Bool = false, language: String? = nil, original: Original? = nil) {
        self.range = range
        self.text = text
        self.words = words
        self.alternatives = alternatives
        self.written = written
        self.language = language
        self.original = original
    }

    /// The original as a result of its own, on the same audio (its words' span, else the
    /// translation's range); nil when there is none or it heard no words.
    public var originalResult: RecognitionResult? {
        guard let original, !original.text.isEmpty else { return nil }
        let range = original.words.isEmpty ? self.range
            : TimeRange(start: original.words[0].range.start, end: original.words[original.words.count - 1].range.end)
        return RecognitionResult(range: range, text: original.text, words: original.words, written: written,
                                 language: original.language)
    }
}

/// What a translated final translates: the same audio transcribed in the language spoken.
public struct Original: Sendable, Hashable {
    public var text: String
    public var words: [Word]
    /// The language spoken (BCP 47).
    public var language: String?

    public init(text: String, words: [Word] = [], language: String? = nil) {
        self.text = text
        self.words = words
        self.language = language
    }
}

/// What a transcriber reports as it listens, in seconds on its own input timeline.
/// Produced by StenoSpeech recognizers, turned into wire events by StenoCore.
public enum TranscriberEvent: Sendable, Hashable {
    /// Voice activity began at this time.
    case speechStarted(at: Double)
    /// Voice activity ended at this time.
    case speechEnded(at: Double)
    /// The current reading of the utterance in progress; replaces the previous volatile.
    case volatile(RecognitionResult)
    /// A finished utterance; never revised.
    case final(RecognitionResult)
    /// An utterance heard in none of the session's languages well enough (`LanguagePlan`'s
    /// lanes): no final; the engine's scores of each lane.
    case unheard(TimeRange, scores: [LanguageScore])
}
