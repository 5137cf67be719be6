import Testing
@testable import StenoCore

/// `start`'s "phrases", "boost", "pronunciations", "alternatives" and "model", and how the
/// session machine chooses a model and checks pronunciations.
@Suite struct VocabularyTests {
    static let audio = #""audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}"#

    func start(_ extra: String) throws(StenoError) -> StartRequest {
        guard case .start(let request) = try ClientMessage.parse(#"{"type":"start",\#(Self.audio),\#(extra)}"#) else {
            throw StenoError(.internal, "not a start")
        }
        return request
    }

    func error(_ extra: String) -> String? {
        do throws(StenoError) {
            _ = try start(extra)
            return nil
        } catch {
            #expect(error.code == .badMessage && !error.code.isFatal)
            return error.message
        }
    }

    @Test func parsesPhrasesBoostPronunciationsAlternativesAndModel() throws {
        let request = try start(#""phrases":["John Dashwood,", "ill-disposed", " epoch of  incredulity "],"boost":2,"pronunciations":{"Steno":"s t eh n ow"},"alternatives":3,"model":"legal""#)
        let vocabulary = try #require(request.vocabulary)
        #expect(vocabulary.phrases == [["John", "Dashwood"], ["ill-disposed"], ["epoch", "of", "incredulity"]])
        #expect(vocabulary.boost == 2)
        #expect(vocabulary.pronunciations == ["steno": ["S", "T", "EH", "N", "OW"]])
        #expect(vocabulary.spellings["dashwood"] == "Dashwood")
        #expect(request.alternatives == 3)
        #expect(request.model == "legal")
        let plain = try start(#""language":"en""#)
        #expect(plain.vocabulary == nil && plain.alternatives == 0 && plain.model == nil)
    }

    @Test func phrasesOverTheBoundsGetAClearNonFatalError() {
        let many = "[" + (0...1000).map { "\"w\($0)\"" }.joined(separator: ",") + "]"
        #expect(error(#""phrases":\#(many)"#) == #"field "phrases" holds 1001 phrases; at most 1000 are allowed"#)
        #expect(error(#""phrases":["one two three four five six seven eight nine ten eleven"]"#)
                == #"field "phrases[0]" has 11 words; a phrase has at most 10"#)
        let long = String(repeating: "a", count: 41)
        #expect(error(#""phrases":["ok", "\#(long)"]"#)?.hasPrefix(#"field "phrases[1]": the word "#) == true)
        #expect(error(#""phrases":["   "]"#) == #"field "phrases[0]" has no words"#)
        #expect(error(#""phrases":"John""#) == #"field "phrases" must be an array of strings"#)
        #expect(error(#""phrases":[7]"#) == #"field "phrases[0]" must be a string"#)
        #expect(error(#""phrases":["a<b>c"]"#)?.contains("is not a word") == true)
        #expect(error(#""phrases":["x"],"boost":0"#) == #"field "boost" must be a number from 0.01 to 10 (default 1)"#)
        #expect(error(#""phrases":["x"],"boost":"high""#) == #"field "boost" must be a number from 0.01 to 10 (default 1)"#)
        #expect(error(#""pronunciations":{"two words":"T UW"}"#) == #"field "pronunciations.two words": a pronunciation is for one word"#)
        #expect(error(#""pronunciations":{"Steno":""}"#)?.contains("must be 1 to 40 phones") == true)
        #expect(error(#""pronunciations":{"Steno":"S T-EH"}"#)?.contains("is not a phone name") == true)
        #expect(error(#""pronunciations":["S"]"#) == #"field "pronunciations" must be an object of word: "PHONES""#)
        #expect(error(#""alternatives":11"#) == #"field "alternatives" must be a whole number from 0 to 10"#)
        #expect(error(#""alternatives":1.5"#) == #"field "alternatives" must be a whole number from 0 to 10"#)
        #expect(error(#""model":"""#)?.contains("model name") == true)
    }

    static let english = EngineInfo(name: "pocketsphinx", model: "en-us", language: "en-US", sampleRate: 16000)
    static let legal = EngineInfo(name: "pocketsphinx", model: "legal", language: "en-US", sampleRate: 16000)
    static let german = EngineInfo(name: "pocketsphinx", model: "de", language: "de-DE", sampleRate: 16000)

    func machine() -> SessionMachine {
        var configuration = SessionConfiguration(engine: Self.english)
        configuration.models = [ServedModel(engine: Self.english, phones: ["S", "T", "EH", "N", "OW"]),
                                ServedModel(engine: Self.legal), ServedModel(engine: Self.german)]
        return SessionMachine(id: "s", configuration: configuration, now: 0)
    }

    func sent(_ machine: inout SessionMachine, _ extra: String) -> [String] {
        let text = #"{"type":"start",\#(Self.audio)\#(extra)}"#
        return machine.handle(.text(text, now: 1, wallClock: UTCTime(millisecondsSince1970: 0))).compactMap { action in
            if case .send(let event) = action { return event.numbered(1).text }
            return nil
        }
    }

    @Test func startChoosesTheModelByNameThenLanguage() {
        var byName = machine()
        #expect(sent(&byName, #","model":"legal""#).first?.contains(#""model":"legal""#) == true)
        #expect(byName.request?.model == "legal")
        var byLanguage = machine()
        #expect(sent(&byLanguage, #","language":"de""#).first?.contains(#""model":"de""#) == true)
        var byDefault = machine()
        #expect(sent(&byDefault, "").first?.contains(#""model":"en-us""#) == true)
        #expect(byDefault.request?.model == "en-us")
    }

    @Test func anUnknownModelOrPhoneIsANonFatalErrorAndNoSession() {
        var unknown = machine()
        let events = sent(&unknown, #","model":"medical""#)
        #expect(events == [ServerEvent.error(StenoError(.badMessage,
            "model \"medical\" is not available; this server has en-us, legal, de (see /v1/models)")).encoded(seq: 1).text])
        #expect(unknown.phase == .awaitingStart)
        var mismatch = machine()
        #expect(sent(&mismatch, #","model":"de","language":"en""#).first?.contains(#"model \"de\" recognizes de-DE"#) == true)
        var phone = machine()
        let phoneEvents = sent(&phone, #","pronunciations":{"Steno":"S T EH N QQ"}"#)
        #expect(phoneEvents.first?.contains(#"\"QQ\" is not a phone of this model; its phones are EH N OW S T"#) == true, "\(phoneEvents)")
        #expect(phone.phase == .awaitingStart)
        #expect(sent(&phone, #","pronunciations":{"Steno":"S T EH N OW"}"#).first?.contains(#""type":"ready""#) == true)
    }
}
