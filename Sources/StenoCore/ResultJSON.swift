// A recognition result on the wire, both ways: how a `final` or `volatile` event writes its
// result (`start`, `end`, `text`, `language`, `alternatives`, `original`, `words`: docs/protocol.md) and how a reader
// takes it back (a server reading another instance's events from Redis, the `steno` client
// reading the server's).

extension RecognitionResult {
    /// Writes the result's fields into the event object being written: times with millisecond
    /// precision, scores and confidences with at most 3 decimals (a score that is not finite
    /// as -1e9, a confidence as `Word.validConfidence`); `words` only when `includeWords`.
    func write(into w: inout JSONWriter, includeWords: Bool) {
        w.field("start", seconds: range.start)
        w.field("end", seconds: range.end)
        w.field("text", text)
        if let language { w.field("language", language) }
        if !alternatives.isEmpty {
            w.key("alternatives")
            w.beginArray()
            for alternative in alternatives {
                w.beginObject()
                w.field("text", alternative.text)
                w.key("score")
                w.decimal(alternative.score.isFinite ? alternative.score : -1e9, places: 3)
                w.endObject()
            }
            w.endArray()
        }
        if let original {
            w.key("original")
            w.beginObject()
            w.field("text", original.text)
            if let language = original.language { w.field("language", language) }
            if includeWords { Self.write(original.words, into: &w) }
            w.endObject()
        }
        if includeWords { Self.write(words, into: &w) }
    }

    private static func write(_ words: [Word], into w: inout JSONWriter) {
        w.key("words")
        w.beginArray()
        for word in words {
            w.beginObject()
            w.field("word", word.text)
            w.field("start", seconds: word.range.start)
            w.field("end", seconds: word.range.end)
            w.key("confidence")
            w.decimal(word.validConfidence, places: 3)
            w.endObject()
        }
        w.endArray()
    }

    /// The result a `final` or `volatile` event object carries, as `write(into:includeWords:)`
    /// wrote it; nil when it is not one.
    ///
    /// The rule, for every reader: a result is taken whole or not at all. `start` and `end`
    /// (numbers) and `text` (a string) must be there; `language`, if there, is a string; `original`, if
    /// there, an object with `text` (a string) and `language` and `words` as the result's. `words`
    /// and `alternatives` may be missing (none), but when there they are arrays of objects: each word with `word` (a
    /// string), `start` and `end` (numbers) and, if there, `confidence` (a number; missing
    /// reads 0), each alternative with `text` (a string) and `score` (a number). Anything else
    /// of the wrong type refuses the result, rather than leaving out a word or an alternative
    /// unnoticed. Fields it does not know are ignored (the event's `type` and `seq`, what a
    /// later protocol adds). The event does not say how it was written, so `written` is false.
    public init?(wire object: JSONObject) {
        guard let start = Self.number(object["start"]), let end = Self.number(object["end"]),
              case .string(let text)? = object["text"],
              let words = Self.items(object["words"], Self.word),
              let alternatives = Self.items(object["alternatives"], Self.alternative) else { return nil }
        var language: String?
        if let value = object["language"] {
            guard case .string(let tag) = value else { return nil }
            language = tag
        }
        var original: Original?
        if let value = object["original"] {
            guard case .object(let o) = value, case .string(let text)? = o["text"], let words = Self.items(o["words"], Self.word)
            else { return nil }
            var language: String?
            if let value = o["language"] {
                guard case .string(let tag) = value else { return nil }
                language = tag
            }
            original = Original(text: text, words: words, language: language)
        }
        self.init(range: TimeRange(start: start, end: end), text: text, words: words, alternatives: alternatives,
                  language: language, original: original)
    }

    private static func word(_ object: JSONObject) -> Word? {
        guard case .string(let text)? = object["word"], let start = number(object["start"]),
              let end = number(object["end"]) else { return nil }
        var confidence = 0.0
        if let value = object["confidence"] {
            guard let number = number(value) else { return nil }
            confidence = number
        }
        return Word(text, range: TimeRange(start: start, end: end), confidence: confidence)
    }

    private static func alternative(_ object: JSONObject) -> Alternative? {
        guard case .string(let text)? = object["text"], let score = number(object["score"]) else { return nil }
        return Alternative(text: text, score: score)
    }

    /// The items of an array of objects, each read by `read`: none for a missing field, nil
    /// when it is not such an array or one item does not read.
    private static func items<T>(_ value: JSONValue?, _ read: (JSONObject) -> T?) -> [T]? {
        guard let value else { return [] }
        guard case .array(let elements) = value else { return nil }
        var out: [T] = []
        out.reserveCapacity(elements.count)
        for element in elements {
            guard case .object(let object) = element, let item = read(object) else { return nil }
            out.append(item)
        }
        return out
    }

    private static func number(_ value: JSONValue?) -> Double? {
        if case .number(let n)? = value { return n }
        return nil
    }
}
