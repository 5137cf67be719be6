import Testing
@testable import StenoCore

/// A result written into an event reads back as it was; what a reader takes and refuses.
@Suite struct ResultJSONTests {
    static let result = RecognitionResult(
        range: TimeRange(start: 1.25, end: 2.5), text: "try again",
        words: [Word("try", range: TimeRange(start: 1.25, end: 1.7), confidence: 0.912),
                Word("again", range: TimeRange(start: 1.7, end: 2.5), confidence: 0.5)],
        alternatives: [Alternative(text: "try again", score: 0), Alternative(text: "tri a gain", score: -3.25)])

    /// The object of an event's text.
    func object(_ text: String) throws -> JSONObject {
        guard case .object(let object) = try JSONParser().parse(text) else { throw JSONError("not an object", at: 0) }
        return object
    }

    func read(_ text: String) throws -> RecognitionResult? {
        RecognitionResult(wire: try object(text))
    }

    @Test func whatIsWrittenReadsBackTheSame() throws {
        for event in [ServerEvent.final(Self.result, includeWords: true), .volatile(Self.result, includeWords: true)] {
            #expect(try read(event.encoded(seq: 3).text) == Self.result)
        }
        // Without words, the words are none.
        var bare = Self.result
        bare.words = []
        #expect(try read(ServerEvent.final(Self.result, includeWords: false).encoded().text) == bare)
        // The language a multilingual model heard it in.
        var german = Self.result
        german.language = "de"
        #expect(try read(ServerEvent.final(german, includeWords: true).encoded().text) == german)
        #expect(ServerEvent.final(german, includeWords: false).encoded().text.contains(#""text":"try again","language":"de""#))
        #expect(!ServerEvent.final(Self.result, includeWords: false).encoded().text.contains("language"))
        // A translation's original, its words only with the result's.
        var translated = german
        translated.original = Original(text: "versuch es noch mal", words: [Word("versuch", range: TimeRange(start: 1, end: 1.4),
                                                                              confidence: 0.5)], language: "de")
        #expect(try read(ServerEvent.final(translated, includeWords: true).encoded().text) == translated)
        let noWords = ServerEvent.final(translated, includeWords: false).encoded().text
        #expect(noWords.contains(#""original":{"text":"versuch es noch mal","language":"de"}"#), "\(noWords)")
        #expect(try read(noWords)?.original == Original(text: "versuch es noch mal", language: "de"))
        #expect(try read(#"{"type":"final","start":1,"end":2,"text":"x","original":"x"}"#) == nil, "an original that is no object")
        // An empty volatile (clearing the guess) too.
        let empty = RecognitionResult(range: TimeRange(start: 3, end: 3), text: "")
        #expect(try read(ServerEvent.volatile(empty, includeWords: true).encoded().text) == empty)
    }

    @Test func whatTheWriterWouldNotHaveWrittenAsIsReadsAsWritten() throws {
        // Times to the millisecond, confidences clamped to 0…1, a score that is not finite as -1e9.
        let odd = RecognitionResult(
            range: TimeRange(start: 0.12345, end: 1), text: "x",
            words: [Word("x", range: TimeRange(start: 0.12345, end: 1), confidence: .nan)],
            alternatives: [Alternative(text: "x", score: -.infinity)])
        let back = try #require(try read(ServerEvent.final(odd, includeWords: true).encoded().text))
        #expect(back.range == TimeRange(start: 0.123, end: 1))
        #expect(back.words == [Word("x", range: TimeRange(start: 0.123, end: 1), confidence: 0)])
        #expect(back.alternatives == [Alternative(text: "x", score: -1e9)])
    }

    @Test func aResultIsTakenWholeOrNotAtAll() throws {
        // Taken: the least there can be, fields it does not know, a word without confidence.
        #expect(try read(#"{"start":1,"end":2,"text":"hi"}"#) == RecognitionResult(range: TimeRange(start: 1, end: 2), text: "hi"))
        #expect(try read(#"{"type":"final","seq":9,"start":1,"end":2,"text":"hi","later":{"x":[1]},"words":[],"alternatives":[]}"#)
            == RecognitionResult(range: TimeRange(start: 1, end: 2), text: "hi"))
        #expect(try read(#"{"start":1,"end":2,"text":"hi","words":[{"word":"hi","start":1,"end":2,"extra":true}]}"#)?.words
            == [Word("hi", range: TimeRange(start: 1, end: 2), confidence: 0)])
        // Refused: a field missing or of the wrong type, at the top or in any word or alternative.
        let refused = [
            #"{"end":2,"text":"hi"}"#, #"{"start":1,"text":"hi"}"#, #"{"start":1,"end":2}"#,
            #"{"start":"1","end":2,"text":"hi"}"#, #"{"start":1,"end":2,"text":3}"#,
            #"{"start":1,"end":2,"text":"hi","words":{}}"#, #"{"start":1,"end":2,"text":"hi","alternatives":null}"#,
            #"{"start":1,"end":2,"text":"hi","words":[1]}"#,
            #"{"start":1,"end":2,"text":"hi","words":[{"word":"hi","start":1}]}"#,
            #"{"start":1,"end":2,"text":"hi","words":[{"word":"hi","start":1,"end":2,"confidence":"high"}]}"#,
            #"{"start":1,"end":2,"text":"hi","words":[{"word":"hi","start":1,"end":2},{"start":1,"end":2}]}"#,
            #"{"start":1,"end":2,"text":"hi","alternatives":[{"text":"hi"}]}"#,
            #"{"start":1,"end":2,"text":"hi","alternatives":[{"score":0,"text":null}]}"#,
            #"{"start":1,"end":2,"text":"hi","language":1}"#, #"{"start":1,"end":2,"text":"hi","language":null}"#,
        ]
        for text in refused { #expect(try read(text) == nil, "\(text)") }
    }
}
