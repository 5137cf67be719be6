/// How results' text is written: `start`'s `"format"`.
public enum TextFormat: String, Sendable, Hashable, CaseIterable {
    /// Sentences as people write them: a capital at the start of a sentence, "I", "I'm" …, a
    /// full stop where a sentence ends, numbers above ten as digits (`ReadableText`).
    case readable
    /// The recognizer's words as they are (lowercase, no punctuation).
    case raw

    /// What a command-line flag choosing one says of them.
    public static let flagHelp = "readable: capitals, I, full stops, numbers as digits; raw: the recognizer's lowercase words"
}

/// Makes a recognizer's lowercase words readable, word by word, so that each word keeps its
/// time range and confidence:
///
/// - the first word of a sentence gets a capital (`startsSentence`);
/// - "i", "i'm", "i'll", "i've", "i'd" are written with a capital I;
/// - a result that ends a sentence (`endsSentence`: the speaker paused) ends with a full stop
///   on its last word, unless it already ends with `.`, `?` or `!`;
/// - a run of number words that reads as one whole number above ten becomes digits
///   ("twenty three" → "23", "one hundred and five" → "105", "two thousand twenty" → "2020",
///   thousands grouped from 10,000 on); one to ten stay words, as caption style guides have
///   it, and so do runs that are not one number ("three twenty", "nineteen ninety"), runs
///   followed by an ordinal ("twenty third") or with nothing to count ("hundred"). The digits
///   are one word, timed from the first word's start to the last one's end, with the lowest
///   confidence of the words it replaces.
///
/// Words are never dropped, reordered or lowercased.
public enum ReadableText {
    /// `result` written readably. Its text is rebuilt from its words when they are its text's
    /// words (as a recognizer gives them); otherwise text and words are each rewritten. Its
    /// alternatives are rewritten too, the first being the new text.
    public static func format(_ result: RecognitionResult, startsSentence: Bool, endsSentence: Bool) -> RecognitionResult {
        let textWords = result.text.split(whereSeparator: \.isWhitespace).map(String.init)
        guard !textWords.isEmpty else { return result }
        var out = result
        if !result.words.isEmpty && result.words.map(\.text) == textWords {
            out.words = rewrite(result.words, startsSentence: startsSentence, endsSentence: endsSentence)
            out.text = out.words.map(\.text).joined(separator: " ")
        } else {
            let timeless = textWords.map { Word($0, range: result.range, confidence: 1) }
            out.text = rewrite(timeless, startsSentence: startsSentence, endsSentence: endsSentence)
                .map(\.text).joined(separator: " ")
            if !result.words.isEmpty {
                out.words = rewrite(result.words, startsSentence: startsSentence, endsSentence: endsSentence)
            }
        }
        // A final's alternatives are written the same way; the first is its own text.
        for index in out.alternatives.indices {
            if index == 0 {
                out.alternatives[index].text = out.text
                continue
            }
            let words = out.alternatives[index].text.split(whereSeparator: \.isWhitespace)
                .map { Word(String($0), range: result.range, confidence: 1) }
            out.alternatives[index].text = rewrite(words, startsSentence: startsSentence, endsSentence: endsSentence)
                .map(\.text).joined(separator: " ")
        }
        return out
    }

    /// The words rewritten (see the type's rules).
    static func rewrite(_ words: [Word], startsSentence: Bool, endsSentence: Bool) -> [Word] {
        var out: [Word] = []
        out.reserveCapacity(words.count)
        var index = 0
        while index < words.count {
            if let (length, number) = numberRun(at: index, in: words) {
                let run = words[index..<(index + length)]
                guard let value = number else {
                    // Not one number: every word of the run as it is (not a part of it as digits).
                    out += run
                    index += length
                    continue
                }
                let confidence = run.map(\.validConfidence).min() ?? 0
                out.append(Word(digits(value), range: TimeRange(start: run.first!.range.start, end: run.last!.range.end),
                                confidence: confidence))
                index += length
            } else {
                var word = words[index]
                if pronounI.contains(word.text.lowercased()) { word.text = capitalized(word.text) }
                out.append(word)
                index += 1
            }
        }
        if startsSentence, !out.isEmpty { out[0].text = capitalized(out[0].text) }
        if endsSentence, let last = out.last, let character = last.text.last, !".?!".contains(character) {
            out[out.count - 1].text += "."
        }
        return out
    }

    // MARK: Numbers

    private static let units: [String: Int] = [
        "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    ]
    private static let teens: [String: Int] = [
        "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
        "seventeen": 17, "eighteen": 18, "nineteen": 19,
    ]
    private static let tens: [String: Int] = [
        "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    ]
    private static let ordinals: Set<String> = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
        "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
        "eighteenth", "nineteenth", "twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth",
        "seventieth", "eightieth", "ninetieth", "hundredth", "thousandth",
    ]
    private static let pronounI: Set<String> = ["i", "i'm", "i'll", "i've", "i'd"]

    private static func isNumberWord(_ word: String) -> Bool {
        units[word] != nil || teens[word] != nil || tens[word] != nil || word == "hundred" || word == "thousand"
    }

    /// The run of number words starting at `index`, if one does: its length in words, and its
    /// value if it reads as one number above ten.
    private static func numberRun(at index: Int, in words: [Word]) -> (Int, Int?)? {
        let first = words[index].text.lowercased()
        guard units[first] != nil || teens[first] != nil || tens[first] != nil else { return nil }
        // The maximal run: number words, and "and" between two of them after "hundred" or "thousand".
        var run: [String] = []
        var end = index
        while end < words.count {
            let word = words[end].text.lowercased()
            if isNumberWord(word) {
                run.append(word)
            } else if word == "and", let previous = run.last, previous == "hundred" || previous == "thousand",
                      end + 1 < words.count, isNumberWord(words[end + 1].text.lowercased()) {
                run.append(word)
            } else {
                break
            }
            end += 1
        }
        if end < words.count, ordinals.contains(words[end].text.lowercased()) { return (run.count, nil) }
        guard let value = parse(run), value > 10 else { return (run.count, nil) }
        return (run.count, value)
    }

    /// The value of `run` read as one cardinal below a million, or nil.
    private static func parse(_ run: [String]) -> Int? {
        var rest = run[...]
        guard let high = parseHundreds(&rest) else { return nil }
        if rest.isEmpty { return high }
        guard rest.first == "thousand" else { return nil }
        rest = rest.dropFirst()
        if rest.isEmpty { return high * 1000 }
        if rest.first == "and" { rest = rest.dropFirst() }
        guard let low = parseHundreds(&rest), rest.isEmpty else { return nil }
        return high * 1000 + low
    }

    /// 1...999 from the front of `rest`: `small`, or a unit, "hundred", and an optional
    /// ("and") `small`.
    private static func parseHundreds(_ rest: inout ArraySlice<String>) -> Int? {
        guard let word = rest.first else { return nil }
        if let unit = units[word], rest.dropFirst().first == "hundred" {
            rest = rest.dropFirst(2)
            var value = unit * 100
            var after = rest
            if after.first == "and" { after = after.dropFirst() }
            if let small = parseSmall(&after) {
                value += small
                rest = after
            }
            return value
        }
        return parseSmall(&rest)
    }

    /// 1...99 from the front of `rest`: a unit, a teen, a ten, or a ten and a unit.
    private static func parseSmall(_ rest: inout ArraySlice<String>) -> Int? {
        guard let word = rest.first else { return nil }
        if let unit = units[word] {
            rest = rest.dropFirst()
            return unit
        }
        if let teen = teens[word] {
            rest = rest.dropFirst()
            return teen
        }
        if let ten = tens[word] {
            rest = rest.dropFirst()
            if let next = rest.first, let unit = units[next] {
                rest = rest.dropFirst()
                return ten + unit
            }
            return ten
        }
        return nil
    }

    /// Digits, with thousands separated by commas from 10,000 on.
    private static func digits(_ value: Int) -> String {
        let plain = String(value)
        guard value >= 10_000 else { return plain }
        var out = ""
        for (index, character) in plain.enumerated() {
            if index > 0 && (plain.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return out
    }

    private static func capitalized(_ word: String) -> String {
        guard let first = word.first else { return word }
        return first.uppercased() + word.dropFirst()
    }
}

extension ReadableText {
    /// An engine's written result (`RecognitionResult.written`) in the raw format, as a
    /// recognizer of lowercase words would give it: each word lowercased, without the
    /// punctuation around it (an apostrophe or hyphen inside a word stays); words that were
    /// only punctuation go. Times and confidences stay with their words.
    public static func lowered(_ result: RecognitionResult) -> RecognitionResult {
        var out = result
        out.words = result.words.compactMap { word in
            let text = lowered(word: word.text)
            return text.isEmpty ? nil : Word(text, range: word.range, confidence: word.confidence)
        }
        out.text = lowered(text: result.text)
        for index in out.alternatives.indices {
            out.alternatives[index].text = lowered(text: out.alternatives[index].text)
        }
        return out
    }

    /// Whether written text ends a sentence (its last character, quotes aside, is `.`, `?` or `!`).
    public static func endsSentence(_ text: String) -> Bool {
        guard let last = text.last(where: { !$0.isWhitespace && $0 != "\"" && $0 != "'" && $0 != "”" && $0 != "’" })
        else { return false }
        return last == "." || last == "?" || last == "!" || last == "…"
    }

    private static func lowered(text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).map { lowered(word: String($0)) }.filter { !$0.isEmpty }
            .joined(separator: " ")
    }

    /// One written word in the raw format (empty: it was only punctuation).
    public static func lowered(word: String) -> String {
        let keeps: (Character) -> Bool = { $0.isLetter || $0.isNumber }
        guard let first = word.firstIndex(where: keeps), let last = word.lastIndex(where: keeps) else { return "" }
        let inner = word[first...last].filter { keeps($0) || $0 == "'" || $0 == "’" || $0 == "-" }
        return String(inner.map { $0 == "’" ? "'" : $0 }).lowercased()
    }
}
