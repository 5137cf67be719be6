import StenoCore

/// A session's language on a multilingual model (`LanguagePlan`): what each request asks the
/// worker for, and what an answer's language means. A value, tested in memory.
///
/// - No plan: the session's language as `start` said it (nil: detected).
/// - `auto`: detected for each utterance; a language heard with at least `acceptConfidence`
///   settles the session on it, and utterances shorter than `LanguagePlan.settleBelow` are
///   then heard in it (a short "OK" says too little of its language to switch on); longer ones
///   too, unless Whisper hears another language clearly likelier (the worker's `"settled"`).
/// - Lanes: the worker scores each lane (Whisper's own language probabilities) and hears the
///   utterance in the likeliest; below `minimumConfidence` for every lane, a final is
///   `unheard` (no final, a `low_confidence` error), and a volatile not shown; settling as for auto.
/// - `translate`: Whisper's translate task, English text of the language heard.
struct SessionLanguage: Sendable {
    /// `start`'s language (nil for "auto" or none).
    let language: String?
    let plan: LanguagePlan?
    /// The language the session settled on (a BCP 47 primary subtag).
    private(set) var settled: String?

    init(language: String?, plan: LanguagePlan?) {
        self.language = language == LanguageTag.auto ? nil : language
        self.plan = plan
    }

    /// The request's language and its other language fields (`candidates`, `task`), for an
    /// utterance of `seconds`.
    func request(seconds: Double) -> (language: String?, extra: JSONObject) {
        var extra = JSONObject()
        guard let plan else { return (language, extra) }
        if plan.translate != nil { extra["task"] = .string("translate") }
        if let settled {
            if seconds < LanguagePlan.settleBelow { return (settled, extra) }
            extra["settled"] = .string(settled)
        }
        if !plan.lanes.isEmpty {
            extra["candidates"] = .array(plan.lanes.map { .string($0) })
            return (nil, extra)
        }
        return (plan.auto ? nil : language, extra)
    }

    enum Decision: Equatable {
        case heard
        /// In none of the lanes: their scores, in the lanes' order.
        case unheard([LanguageScore])
    }

    /// What an answer means: heard, or in none of the lanes. A final (`settling`) that heard
    /// its language clearly settles the session on it (the lane it was heard in: the worker
    /// keeps a settled lane unless another is clearly likelier).
    mutating func decide(_ result: WhisperResult, settling: Bool) -> Decision {
        guard let plan, plan.auto || !plan.lanes.isEmpty else { return .heard }
        if !plan.lanes.isEmpty, !result.languageScores.isEmpty {
            let scores = plan.lanes.map { LanguageScore(language: $0, probability: (result.languageScores[$0] ?? nil) ?? 0) }
            guard let best = scores.max(by: { $0.probability < $1.probability }), best.probability >= plan.minimumConfidence else {
                return .unheard(scores)
            }
            // The lane of the language heard (the best where Whisper spells it otherwise: "no" for "nb").
            let heard = result.language.flatMap(WhisperRecognizer.languageTag(whisperCode:)).map(LanguageTag.primary)
            let lane = scores.first { LanguageTag.primary($0.language) == heard } ?? best
            if settling, lane.probability >= plan.acceptConfidence { settled = lane.language }
            return .heard
        }
        if settling, plan.auto, let code = result.language, let p = result.languageProbability, p >= plan.acceptConfidence,
           let tag = WhisperRecognizer.languageTag(whisperCode: code) {
            settled = LanguageTag.primary(tag)
        }
        return .heard
    }
}

extension WhisperRecognizer {
    /// The language a final was heard in, as a BCP 47 tag, on a multilingual model (an English
    /// one hears English whatever it is told: nil, as for pocketsphinx).
    func heardIn(_ result: WhisperResult) -> String? {
        guard info.language == LanguageTag.multilingual, let code = result.language else { return nil }
        return Self.languageTag(whisperCode: code)
    }
}
