import StenoCore

/// What a `WhisperRecognizer` tells the worker of what came before an utterance: the tail of the
/// finals as the prompt's text, and, on a multilingual model, the audio of the last final
/// (`HeardBefore`).
extension WhisperRecognizer {
    /// The audio of the last final, heard before the next utterance's own so that Whisper hears
    /// the voice and the language before it (the worker keeps only the utterance's words). On
    /// base, six languages' readings made 40 errors of 250 instead of 53; on tiny.en, LibriVox 4 of
    /// 71 instead of 2, so English-only models hear each utterance alone (bench/README.md, "Every
    /// language": `bench/audio_context.py`).
    struct HeardBefore {
        /// At most this much of the last final's audio (samples at 16 kHz).
        static let limit = 6 * 16_000
        /// An utterance that starts longer than this after the last final's end is heard alone.
        static let within = 10 * 16_000
        /// The audio of each final asked for, by its first sample (`finalRequest` lets go of those
        /// done).
        var asked: [Int: ArraySlice<Float>] = [:]
        /// The last final reported: its audio (the tail, `limit`), where it ended, its text.
        var last: (audio: ArraySlice<Float>, end: Int, text: String)?

        /// A final was reported: the next utterance may be heard after it.
        mutating func reported(start: Int, end: Int, text: String) {
            last = asked[start].map { ($0.suffix(Self.limit), end, text) }
        }

        /// Committed words were reported (LocalAgreement): their audio is the same utterance's,
        /// so the rest is heard alone.
        mutating func forget() {
            last = nil
        }
    }

    /// The request of a final for `samples` (from sample `start`): with the last final's audio
    /// before it where `HeardBefore` says so, and then without its text in the prompt (the
    /// audio says it).
    func finalRequest(_ samples: ArraySlice<Float>, start: Int)
        -> (samples: ArraySlice<Float>, language: String?, extra: JSONObject, prompt: String?) {
        var (language, extra) = languages.request(seconds: Double(samples.count) / Double(Self.sampleRate))
        // Kept until reported; those before the oldest final awaited are done (reported or heard as nothing).
        let done = min(awaited.first?.start ?? start, start)
        heardBefore.asked = heardBefore.asked.filter { $0.key >= done }
        heardBefore.asked[start] = samples
        // A translation's final brings its original (a broadcast's second rendition).
        if languages.plan?.translate != nil { extra["original"] = .bool(true) }
        // Not for other readings (they would hold its words) or a translation (its words' times are
        // rough). A language to be found is found in the utterance's own audio (the worker's rule).
        guard info.language == LanguageTag.multilingual, alternatives == 0, extra["task"] == nil,
              let last = heardBefore.last,
              start >= last.end, start - last.end <= HeardBefore.within,
              last.audio.count + samples.count <= 30 * Self.sampleRate else {  // Whisper's window
            return (samples, language, unsure(extra, finals: context), prompt)
        }
        extra["context"] = .number(Double(last.audio.count))
        let before = context.hasSuffix(last.text) ? String(context.dropLast(last.text.count)) : ""
        return (ArraySlice(last.audio + samples), language, unsure(extra, finals: before), prompt(finals: before))
    }

    /// A final whose prompt holds earlier finals is heard again with the phrases alone if it comes out
    /// unsure (the worker's `"unsurePrompt"`): in loud noise those finals can lead Whisper to stop
    /// after a few words (four sets over babble at 5 dB: 91.7 % WER → 80.6 %; bench/README.md, "Noisy speech").
    private func unsure(_ extra: JSONObject, finals: String) -> JSONObject {
        guard !finals.isEmpty else { return extra }
        var extra = extra
        extra["unsurePrompt"] = phrases.map { .string($0) } ?? .null
        return extra
    }

    /// The prompt of a request: the phrases, then the tail of the finals so far.
    var prompt: String? { prompt(finals: context) }

    /// The prompt with `finals` as its text of the finals.
    func prompt(finals: String) -> String? {
        var finals = Substring(finals)
        while finals.last == " " { finals.removeLast() }
        switch (phrases, finals.isEmpty) {
        case (nil, true): return nil
        case (nil, false): return String(finals)
        case (let phrases?, true): return phrases
        case (let phrases?, false): return phrases + " " + finals
        }
    }

    /// Keeps the tail of the finals (`contextCharacters`, from a word's start) for the prompt.
    func remember(_ text: String) {
        context = context.isEmpty ? text : context + " " + text
        guard context.count > Self.contextCharacters else { return }
        let tail = context.suffix(Self.contextCharacters)
        context = String(tail.drop { $0 != " " }.dropFirst())
    }
}
