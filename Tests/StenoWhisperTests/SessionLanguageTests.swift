import StenoCore
import Testing
@testable import StenoWhisper

/// What a session on the multilingual model asks the worker for, and what its answers mean
/// (`SessionLanguage`), in memory.
@Suite struct SessionLanguageTests {
    static func result(language: String? = nil, probability: Double? = nil, scores: String = "") throws -> WhisperResult {
        var fields = [#""text":"x""#]
        if let language { fields.append(#""language":"\#(language)""#) }
        if let probability { fields.append(#""languageProbability":\#(probability)"#) }
        if !scores.isEmpty { fields.append(#""languageScores":{\#(scores)}"#) }
        return try WhisperResult(json: JSONParser().parse("{" + fields.joined(separator: ",") + "}"))
    }

    @Test func withoutAPlanTheSessionsLanguage() {
        let session = SessionLanguage(language: "it-IT", plan: nil)
        #expect(session.request(seconds: 5).language == "it-IT")
        #expect(session.request(seconds: 5).extra.count == 0)
    }

    @Test func autoSettlesOnAClearLanguageForShortUtterances() throws {
        var session = SessionLanguage(language: "auto", plan: LanguagePlan(auto: true))
        #expect(session.request(seconds: 1).language == nil)
        // Not clear enough to settle on.
        #expect(session.decide(try Self.result(language: "de", probability: 0.6), settling: true) == .heard)
        #expect(session.request(seconds: 1).language == nil)
        // Clear, but a volatile's: not settled either.
        _ = session.decide(try Self.result(language: "it", probability: 0.97), settling: false)
        #expect(session.settled == nil)
        _ = session.decide(try Self.result(language: "it", probability: 0.97), settling: true)
        #expect(session.settled == "it")
        // A short "OK" is heard in Italian; a long utterance is heard for its own language, Italian
        // unless another sounds clearly likelier (the worker's rule).
        #expect(session.request(seconds: 1.2).language == "it")
        #expect(session.request(seconds: 1.2).extra["settled"] == nil)
        #expect(session.request(seconds: 4).language == nil)
        #expect(session.request(seconds: 4).extra["settled"] == .string("it"))
        // A clear change of language settles the session on the new one.
        _ = session.decide(try Self.result(language: "en", probability: 0.95), settling: true)
        #expect(session.settled == "en" && session.request(seconds: 4).extra["settled"] == .string("en"))
    }

    @Test func lanesScoreEachLanguageAndRefuseWhatIsInNone() throws {
        var session = SessionLanguage(language: nil, plan: LanguagePlan(lanes: ["ru", "en"]))
        let asked = session.request(seconds: 3)
        #expect(asked.language == nil && asked.extra["candidates"] == .array([.string("ru"), .string("en")]))
        #expect(session.decide(try Self.result(language: "ru", scores: #""ru":0.91,"en":0.02"#), settling: true) == .heard)
        #expect(session.settled == "ru")
        #expect(session.decide(try Self.result(language: "en", scores: #""ru":0.01,"en":0.12"#), settling: true)
                == .unheard([LanguageScore(language: "ru", probability: 0.01), LanguageScore(language: "en", probability: 0.12)]))
        #expect(session.request(seconds: 3).extra["settled"] == .string("ru"))
        // Heard in the settled lane although another scored higher (not 5 times higher): still Russian.
        #expect(session.decide(try Self.result(language: "ru", scores: #""ru":0.17,"en":0.82"#), settling: true) == .heard)
        #expect(session.settled == "ru")
        #expect(session.decide(try Self.result(language: "en", scores: #""ru":0.02,"en":0.95"#), settling: true) == .heard)
        #expect(session.settled == "en")
        // A lane the model lacks scores 0.
        #expect(session.decide(try Self.result(scores: #""ru":0.1,"en":null"#), settling: false)
                == .unheard([LanguageScore(language: "ru", probability: 0.1), LanguageScore(language: "en", probability: 0)]))
    }

    @Test func translationAsksForWhispersTranslateTask() {
        let session = SessionLanguage(language: "it", plan: LanguagePlan(translate: "en"))
        let asked = session.request(seconds: 3)
        #expect(asked.language == "it" && asked.extra["task"] == .string("translate"))
    }
}
