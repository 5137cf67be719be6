/// How a session's language is found, from `start`: `"language":"auto"` (found for each
/// utterance), lanes (`"languages":["ru","en"]` with `acceptConfidence` and
/// `minimumConfidence`) and `"translate":"en"` (English captions of any language). Each needs
/// a multilingual model (`LanguageTag.multilingual`).
public struct LanguagePlan: Sendable, Hashable {
    /// The language is found for each utterance (`"language":"auto"`).
    public var auto: Bool
    /// The languages an utterance may be in, in order; empty: any (`auto`) or the session's one.
    public var lanes: [String]
    /// A language heard with at least this probability is the one the session settles on:
    /// its short utterances (under `settleBelow` seconds) are heard in it, without flapping.
    public var acceptConfidence: Double
    /// Below this, for every lane, an utterance gives no final but a non-fatal
    /// `low_confidence` error with its time range and the lanes' scores.
    public var minimumConfidence: Double
    /// The language captions are written in whatever is spoken ("en", Whisper's translation);
    /// nil: the language spoken.
    public var translate: String?

    public static let defaultAcceptConfidence = 0.8
    public static let defaultMinimumConfidence = 0.3
    /// Utterances shorter than this (seconds) are heard in the settled language: a short "OK"
    /// says too little of its language.
    public static let settleBelow = 2.0
    /// The most lanes a session may have.
    public static let maxLanes = 8

    public init(auto: Bool = false, lanes: [String] = [], acceptConfidence: Double = LanguagePlan.defaultAcceptConfidence,
                minimumConfidence: Double = LanguagePlan.defaultMinimumConfidence, translate: String? = nil) {
        self.auto = auto
        self.lanes = lanes
        self.acceptConfidence = acceptConfidence
        self.minimumConfidence = minimumConfidence
        self.translate = translate
    }

    /// Whether a session needs a multilingual model for it.
    public var needsMultilingual: Bool { auto || !lanes.isEmpty || translate != nil }

    /// `start`'s fields: nil when it asks for none of these; a `bad_message` naming the field
    /// that is wrong.
    static func parse(language: String?, object: JSONObject) throws(StenoError) -> LanguagePlan? {
        var plan = LanguagePlan(auto: language == LanguageTag.auto)
        if let value = object["languages"] {
            guard case .array(let items) = value, (1...maxLanes).contains(items.count) else {
                throw StenoError(.badMessage, "field \"languages\" must be a list of 1 to \(maxLanes) language tags, such as [\"ru\",\"en\"]")
            }
            for item in items {
                guard case .string(let tag) = item, LanguageTag.isWellFormed(tag), tag != LanguageTag.auto else {
                    throw StenoError(.badMessage, "field \"languages\" must hold language tags such as \"ru\" or \"en-US\"")
                }
                let primary = LanguageTag.primary(tag)
                if !plan.lanes.contains(primary) { plan.lanes.append(primary) }
            }
            if language != nil {
                throw StenoError(.badMessage, "give \"language\" or \"languages\", not both")
            }
        }
        for (key, range) in [("acceptConfidence", 0.5...1.0), ("minimumConfidence", 0.0...1.0)] {
            guard let value = object[key] else { continue }
            guard case .number(let number) = value, range.contains(number) else {
                throw StenoError(.badMessage, "field \"\(key)\" must be a number from \(range.lowerBound) to \(range.upperBound)")
            }
            guard plan.auto || !plan.lanes.isEmpty else {
                throw StenoError(.badMessage, "field \"\(key)\" goes with \"languages\" or \"language\":\"auto\"")
            }
            if key == "acceptConfidence" { plan.acceptConfidence = number } else { plan.minimumConfidence = number }
        }
        if plan.minimumConfidence > plan.acceptConfidence {
            throw StenoError(.badMessage, "field \"minimumConfidence\" must not be above \"acceptConfidence\"")
        }
        if let value = object["translate"] {
            guard case .string(let target) = value, LanguageTag.primary(target) == "en", LanguageTag.isWellFormed(target) else {
                throw StenoError(.badMessage, "field \"translate\" must be \"en\" (Whisper translates into English only)")
            }
            plan.translate = "en"
        }
        return plan.needsMultilingual ? plan : nil
    }
}

/// How likely an utterance is in a language, as the engine heard it.
public struct LanguageScore: Sendable, Hashable {
    /// A BCP 47 primary subtag.
    public var language: String
    /// 0...1.
    public var probability: Double

    public init(language: String, probability: Double) {
        self.language = language
        self.probability = probability
    }
}
