import StenoCore
import StenoSpeech

/// The rules a `WhisperRecognizer` applies to prompts and to the worker's text, apart from its
/// state so that tests can hold them to their examples. Every rule of volatiles (when, how
/// often, how cheaply) is here: the worker only hears what it is asked.
extension WhisperRecognizer {
    /// Least new audio between two volatile results, and before the first (counted from the
    /// utterance's start, pre-roll included), as whisper_streaming's shortest chunk: volatiles are
    /// most of a talker's cost (measured 2026-12-05; the table is in bench/README.md's git history).
    static let volatileEvery = 16_000
    /// Unanswered requests in the worker past which no volatile is asked for.
    static let volatileBacklog = 16
    /// The least window (encoder frames of 10 ms) a volatile is heard in: 5 s where a final's is
    /// the worker's 10 s; shorter windows cost less and loop more (bench/README.md, "Whisper's
    /// window"), and the final hears it again.
    static let volatileWindow = 500

    /// New audio (samples) a volatile waits for: `volatileEvery`, or a quarter of the utterance so
    /// far when that is more, and `volatileEvery` twice more for each request the worker has not
    /// answered yet (other sessions'). Volatiles are most of the worker's work, and a final that
    /// comes while one is heard waits for it: under load they thin out and finals stay prompt
    /// (bench/README.md, "Finals at six and seven talkers, rounds pooled").
    static func volatileSpacing(utterance: Int, pending: Int) -> Int {
        max(volatileEvery * (1 + 2 * max(0, pending)), utterance / 4)
    }

    /// The phrases as a prompt ("Steno, Hummingbird, CTranslate2."), and what the session is told
    /// of what Whisper cannot take (pronunciations: it spells what it hears).
    static func prompt(_ vocabulary: Vocabulary?) -> (String?, [StenoError]) {
        guard let vocabulary, !vocabulary.isEmpty else { return (nil, []) }
        let phrases = vocabulary.phrases.map { $0.joined(separator: " ") }
        var notices: [StenoError] = []
        if !vocabulary.pronunciations.isEmpty {
            notices.append(StenoError(.badMessage, "pronunciations are not used by the whisper engine (it spells what it hears)"))
        }
        // Whisper's prompt is at most half its 448-token context: keep the phrases within ≈ 800 characters.
        var prompt = ""
        for phrase in phrases where prompt.count + phrase.count + 2 <= 800 {
            prompt += prompt.isEmpty ? phrase : ", " + phrase
        }
        return (prompt.isEmpty ? nil : prompt + ".", notices)
    }

    /// A final cut where speech went on (the maximum length, a finalize mid-speech): Whisper
    /// ends a sentence at the end of what it hears ("period." or "rather..."), but the speaker
    /// did not; its closing full stop or dots go (from the final and from the next prompt, so the
    /// next final goes on the sentence). A question's or an exclamation's mark stays. So too
    /// for a translation's original.
    static func unclosed(_ result: WhisperResult) -> WhisperResult {
        var unclosed = result
        (unclosed.text, unclosed.words) = Self.unclosed(result.text, result.words)
        if var original = result.original {
            (original.text, original.words) = Self.unclosed(original.text, original.words)
            unclosed.original = original
        }
        return unclosed
    }

    private static func unclosed(_ text: String, _ words: [Word]) -> (String, [Word]) {
        func open(_ text: String) -> String {
            var text = text
            while let last = text.last, last == "." || last == "…" { text.removeLast() }
            return text
        }
        guard let last = words.last, open(text) != text, !open(text).isEmpty else { return (text, words) }
        var words = words
        words[words.count - 1] = Word(open(last.text), range: last.range, confidence: last.confidence)
        return (open(text), words)
    }

    /// Whisper's language codes are BCP 47 primary subtags but one: Javanese's "jw" is "jv".
    static func languageTag(whisperCode code: String) -> String? {
        let tag = code == "jw" ? "jv" : code
        return LanguageTag.isWellFormed(tag) ? tag : nil
    }

    /// How many leading words two volatiles agree on (their letters, case and punctuation aside),
    /// all ending before `limit` seconds, and none aligned over more than `longestWord`: such a
    /// word marks speech Whisper skipped (it does, now and then, even twice alike), and nothing
    /// from there is committed.
    static func agreed(_ previous: [Word], _ current: [Word], before limit: Double) -> Int {
        var count = 0
        while count < min(previous.count, current.count), key(previous[count]) == key(current[count]),
              current[count].range.end <= limit, current[count].range.end - current[count].range.start <= longestWord {
            count += 1
        }
        return count
    }

    /// A word as agreement and repetition compare it: its letters and digits, lowercase.
    static func key(_ word: Word) -> String { word.text.lowercased().filter { $0.isLetter || $0.isNumber } }

    /// What Whisper heard after committed words, without the committed words it heard again at
    /// its start (up to `repeatable` of them: a word's alignment can end early, and the prompt
    /// ends with them), as whisper_streaming drops them. Empty text when nothing else is left.
    static func withoutRepeat(of committed: [String], _ result: WhisperResult) -> WhisperResult {
        let most = min(repeatable, committed.count, result.words.count)
        guard let count = (1...max(1, most)).reversed().first(where: { n in
            n <= most && result.words.prefix(n).map(key) == Array(committed.suffix(n))
        }) else { return result }
        var rest = result
        rest.words.removeFirst(count)
        rest.text = rest.words.map(\.text).joined(separator: " ")
        return rest
    }

    /// Places in the worker's queue, highest first: a live session's finals, its volatiles, then
    /// an upload's finals (`RecognizerOptions.background`), so that files wait behind live speech.
    static let priorities = (final: 2, volatile: 1, background: 0)

    /// The most committed words looked for again at the start of what follows them.
    static let repeatable = 5

    /// The longest a committed word may be aligned over: slow speech takes ≈ 1 s a word; five
    /// words over ten seconds of speech is a skip.
    static let longestWord = 2.0

    /// One answer of the worker: for which utterance (its first sample), through which sample.
    struct Answer: Sendable {
        /// The recognizer's token of the request.
        var token = 0
        var final: Bool
        /// A final asked for early, in a pause (`WhisperRecognizer.pauseAfter`).
        var early: Bool
        var start: Int
        var end: Int
        var result: Result<WhisperResult, StenoError>
    }
}
