// The profanity filter (docs/protocol.md, `start`'s "profanity"): over every engine's text,
// volatile and final, after the text is written in the session's format.

/// What a session's results do with profanity.
public enum ProfanityMode: String, Sendable, Hashable, CaseIterable {
    /// Words as heard.
    case keep
    /// The first letter kept, the other letters as `*` ("f***"); times and confidences stay.
    case mask
    /// The word left out, with its time.
    case remove

    /// The server's default when neither `start` nor `steno serve --profanity` says.
    public static let serverDefault = ProfanityMode.mask
}

/// Finds profane words by their letters, lowercased (punctuation around them and a
/// possessive "'s" aside) in `ProfanityWords.list`, and masks or removes them in a result's
/// text, words and alternatives.
public enum ProfanityFilter {
    public static func apply(_ result: RecognitionResult, _ mode: ProfanityMode) -> RecognitionResult {
        guard mode != .keep else { return result }
        var out = result
        let textWords = result.text.split(whereSeparator: \.isWhitespace).map(String.init)
        out.words = result.words.compactMap { word in
            filtered(word.text, mode).map { Word($0, range: word.range, confidence: word.confidence) }
        }
        if !result.words.isEmpty && result.words.map(\.text) == textWords {
            out.text = out.words.map(\.text).joined(separator: " ")
        } else {
            out.text = filtered(text: result.text, mode)
        }
        for index in out.alternatives.indices {
            out.alternatives[index].text = index == 0 ? out.text : filtered(text: out.alternatives[index].text, mode)
        }
        return out
    }

    /// Whether a word, as written in a result, is profane.
    public static func isProfane(_ word: String) -> Bool {
        var letters = String(word.lowercased().filter { $0.isLetter || $0 == "'" || $0 == "’" })
        while letters.first == "'" || letters.first == "’" { letters.removeFirst() }
        while letters.last == "'" || letters.last == "’" { letters.removeLast() }
        if letters.hasSuffix("'s") || letters.hasSuffix("’s") { letters.removeLast(2) }
        return ProfanityWords.list.contains(letters)
    }

    private static func filtered(text: String, _ mode: ProfanityMode) -> String {
        text.split(whereSeparator: \.isWhitespace).compactMap { filtered(String($0), mode) }.joined(separator: " ")
    }

    /// The word masked, nil when removed, or as it is.
    private static func filtered(_ word: String, _ mode: ProfanityMode) -> String? {
        guard isProfane(word) else { return word }
        switch mode {
        case .keep: return word
        case .remove: return nil
        case .mask:
            var seenLetter = false
            return String(word.map { c -> Character in
                guard c.isLetter else { return c }
                defer { seenLetter = true }
                return seenLetter ? "*" : c
            })
        }
    }
}
