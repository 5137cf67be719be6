import Testing
@testable import StenoCore

@Suite struct ProfanityTests {
    static func timed(_ text: String, written: Bool = false) -> RecognitionResult {
        let words = text.split(separator: " ").enumerated().map { index, word in
            Word(String(word), range: TimeRange(start: Double(index) * 0.5, end: Double(index + 1) * 0.5), confidence: 0.9)
        }
        return RecognitionResult(range: TimeRange(start: 0, end: Double(words.count) * 0.5), text: text, words: words,
                                 written: written)
    }

    @Test func maskKeepsTheFirstLetterPunctuationAndTimes() {
        let r = ProfanityFilter.apply(Self.timed("good or for fucking evil, shit!"), .mask)
        #expect(r.text == "good or for f****** evil, s***!")
        #expect(r.words.map(\.text) == ["good", "or", "for", "f******", "evil,", "s***!"])
        #expect(r.words[3].range == TimeRange(start: 1.5, end: 2))
    }

    @Test func removeLeavesTheWordOutWithItsTime() {
        let r = ProfanityFilter.apply(Self.timed("what the fuck was that"), .remove)
        #expect(r.text == "what the was that")
        #expect(r.words.map(\.text) == ["what", "the", "was", "that"])
        #expect(r.words[2].range.start == 1.5)
    }

    @Test func keepAndInnocentWordsAreUntouched() {
        let text = "Hell, the cock crowed at Dick's farm; damn the bloody ass"
        #expect(ProfanityFilter.apply(Self.timed(text), .mask).text == text)
        #expect(ProfanityFilter.apply(Self.timed("fuck"), .keep).text == "fuck")
    }

    @Test func casesPossessivesAndAlternativesToo() {
        #expect(ProfanityFilter.isProfane("Bullshit."))
        #expect(ProfanityFilter.isProfane("bastard's"))
        #expect(!ProfanityFilter.isProfane("shitake") && !ProfanityFilter.isProfane("Scunthorpe"))
        var result = Self.timed("oh shit")
        result.alternatives = [Alternative(text: "oh shit", score: 0), Alternative(text: "oh fuck it", score: -1)]
        let r = ProfanityFilter.apply(result, .mask)
        #expect(r.alternatives.map(\.text) == ["oh s***", "oh f*** it"])
    }

    @Test func theWordListIsLowercaseLetters() {
        for word in ProfanityWords.list { #expect(word.allSatisfy { $0.isLowercase && $0.isLetter }, "\(word)") }
    }

    @Test func theAssemblerFiltersVolatilesAndFinalsAfterFormatting() {
        var t = TranscriptAssembler(options: .init(format: .readable, profanity: .mask))
        let v = t.consume([.volatile(Self.timed("fuck this"))])
        if case .volatile(let r, _)? = v.first { #expect(r.text == "F*** this") } else { Issue.record("no volatile") }
        _ = t.consume([.final(Self.timed("Good ol' fucking evil.", written: true)), .speechEnded(at: 3)])
        #expect(t.finals.last?.text == "Good ol' f****** evil.")
        // A final that was nothing but profanity, removed, is no final at all.
        var removing = TranscriptAssembler(options: .init(format: .raw, profanity: .remove))
        _ = removing.consume([.final(Self.timed("shit")), .speechEnded(at: 1)])
        #expect(removing.finals.isEmpty)
    }

    @Test func startChoosesItAndTheServerDefaultIsMask() throws {
        let base = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}"#
        guard case .start(let plain) = try ClientMessage.parse(base + "}") else { Issue.record("not a start"); return }
        #expect(plain.profanity == nil)
        guard case .start(let keep) = try ClientMessage.parse(base + #","profanity":"keep"}"#) else { Issue.record("not a start"); return }
        #expect(keep.profanity == .keep)
        #expect(throws: StenoError.self) { try ClientMessage.parse(base + #","profanity":"bleep"}"#) }
        #expect(SessionConfiguration(engine: EngineInfo(name: "x", model: "m", language: "en-US", sampleRate: 16000)).profanity == .mask)
    }
}
