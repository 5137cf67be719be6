import Testing
@testable import StenoCore

/// `start`'s "language":"auto", "languages" (lanes), "acceptConfidence", "minimumConfidence"
/// and "translate": read, checked, and the model they need.
@Suite struct LanguagePlanTests {
    static let audio = #""audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}"#

    static func start(_ fields: String) throws(StenoError) -> StartRequest {
        guard case .start(let request) = try ClientMessage.parse(#"{"type":"start",\#(audio)\#(fields)}"#) else {
            throw StenoError(.internal, "not a start")
        }
        return request
    }

    static func problem(_ fields: String) -> String? {
        do throws(StenoError) {
            _ = try start(fields)
            return nil
        } catch {
            #expect(error.code == .badMessage && !error.code.isFatal)
            return error.message
        }
    }

    @Test func plans() throws {
        #expect(try Self.start("").languagePlan == nil)
        #expect(try Self.start(#","language":"it""#).languagePlan == nil)
        #expect(try Self.start(#","language":"auto""#).languagePlan == LanguagePlan(auto: true))
        let lanes = try Self.start(#","languages":["ru-RU","en","EN-gb"],"minimumConfidence":0.1"#).languagePlan
        #expect(lanes == LanguagePlan(lanes: ["ru", "en"], minimumConfidence: 0.1))
        #expect(try Self.start(#","translate":"en""#).languagePlan == LanguagePlan(translate: "en"))
        #expect(try Self.start(#","language":"it","translate":"en-US""#).languagePlan?.translate == "en")
        // What a client writes is what the server reads.
        let text = ClientMessage.startText(try AudioFormat(encodingName: "pcm_s16le", sampleRate: 16000, channels: 1), lanes: ["ru", "en"], translate: "en")
        guard case .start(let again) = try ClientMessage.parse(text) else { return }
        #expect(again.languagePlan == LanguagePlan(lanes: ["ru", "en"], translate: "en"))
    }

    @Test func wrongValuesAreNamed() {
        #expect(Self.problem(#","languages":[]"#)?.contains("\"languages\"") == true)
        #expect(Self.problem(#","languages":["ru",5]"#)?.contains("\"languages\"") == true)
        #expect(Self.problem(#","languages":["auto"]"#)?.contains("\"languages\"") == true)
        #expect(Self.problem(#","language":"en","languages":["ru"]"#)?.contains("not both") == true)
        #expect(Self.problem(#","language":"auto","acceptConfidence":0.3"#)?.contains("\"acceptConfidence\"") == true)
        #expect(Self.problem(#","minimumConfidence":0.3"#)?.contains("goes with") == true)
        #expect(Self.problem(#","languages":["ru"],"acceptConfidence":0.6,"minimumConfidence":0.7"#)?.contains("not be above") == true)
        #expect(Self.problem(#","translate":"fr""#)?.contains("\"translate\"") == true)
    }

    @Test func theyNeedAMultilingualModel() {
        let tiny = ServedModel(engine: EngineInfo(name: "whisper", model: "whisper-tiny.en", language: "en-US", sampleRate: 16000))
        let base = ServedModel(engine: EngineInfo(name: "whisper", model: "whisper-base", language: "mul", sampleRate: 16000))
        func chosen(_ fields: String, _ models: [ServedModel]) -> String {
            guard let request = try? Self.start(fields) else { return "unparsed" }
            switch SessionMachine.model(for: request, among: models) {
            case .success(let model): return model.engine.model
            case .failure(let error): return error.message
            }
        }
        #expect(chosen(#","language":"en""#, [tiny, base]) == "whisper-tiny.en")
        #expect(chosen(#","language":"it""#, [tiny, base]) == "whisper-base")
        #expect(chosen(#","language":"auto""#, [tiny, base]) == "whisper-base")
        #expect(chosen(#","languages":["en"]"#, [tiny, base]) == "whisper-base")
        #expect(chosen(#","translate":"en""#, [tiny, base]) == "whisper-base")
        #expect(chosen(#","language":"auto""#, [tiny]).contains("needs a multilingual model; this server has none"))
        #expect(chosen(#","translate":"en","model":"whisper-tiny.en""#, [tiny, base]).contains("is not one"))
    }

    @Test func lowConfidenceIsANonFatalErrorWithItsRangeAndScores() {
        let event = ServerEvent.lowConfidence(TimeRange(start: 1.5, end: 3.25),
                                              scores: [LanguageScore(language: "ru", probability: 0.04), LanguageScore(language: "en", probability: 0.0213)])
        #expect(event.encoded(seq: 7).text == #"{"type":"error","seq":7,"code":"low_confidence","message":"speech in none of the session's languages (ru 4 %, en 2 %): no final for it","fatal":false,"start":1.5,"end":3.25,"scores":{"ru":0.04,"en":0.021}}"#)
        var transcript = TranscriptAssembler()
        _ = transcript.consume(.volatile(RecognitionResult(range: TimeRange(start: 1.5, end: 2), text: "privet")))
        let out = transcript.consume(.unheard(TimeRange(start: 1.5, end: 3.25), scores: []))
        #expect(out.map(\.kind) == [.volatile, .error], "the volatile is cleared, then the error")
    }
}
