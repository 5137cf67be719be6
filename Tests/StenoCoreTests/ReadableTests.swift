import StenoTestSupport
import Testing
@testable import StenoCore

/// Readable text: capitals, "I", full stops and digits, with every word keeping its times.
@Suite struct ReadableTextTests {
    /// A result whose words are `text`'s, 0.25 s each from `start`, confidences 0.5, 0.6 …
    static func timed(_ text: String, start: Double = 1) -> RecognitionResult {
        let words = text.split(separator: " ").enumerated().map { index, word in
            Word(String(word), range: TimeRange(start: start + Double(index) * 0.25, end: start + Double(index + 1) * 0.25),
                 confidence: 0.5 + Double(index % 5) / 10)
        }
        return RecognitionResult(range: TimeRange(start: start, end: start + Double(words.count) * 0.25),
                                 text: text, words: words)
    }

    static func readable(_ text: String, starts: Bool = false, ends: Bool = false) -> String {
        ReadableText.format(timed(text), startsSentence: starts, endsSentence: ends).text
    }

    @Test func capitalsAndFullStops() {
        #expect(Self.readable("ever try it", starts: true, ends: true) == "Ever try it.")
        #expect(Self.readable("ever try it", starts: false, ends: false) == "ever try it")
        #expect(Self.readable("don't go", starts: true) == "Don't go")
        #expect(Self.readable("really?", ends: true) == "really?")
        #expect(Self.readable("i think i'm sure i'll see what i've seen and i'd go", starts: false)
            == "I think I'm sure I'll see what I've seen and I'd go")
        #expect(Self.readable("it is mine", starts: false) == "it is mine")
    }

    @Test(arguments: [
        ("twenty three people", "23 people"),
        ("one hundred and five days", "105 days"),
        ("three hundred", "300"),
        ("two thousand twenty", "2020"),
        ("twelve thousand five hundred and one", "12,501"),
        ("nine hundred ninety nine thousand nine hundred ninety nine", "999,999"),
        ("eleven", "11"),
        ("ten green bottles", "ten green bottles"),
        ("one two three", "one two three"),
        ("three twenty", "three twenty"),
        ("nineteen ninety", "nineteen ninety"),
        ("the twenty third time", "the twenty third time"),
        ("a hundred times", "a hundred times"),
        ("one and one", "one and one"),
        ("fifty and more", "50 and more"),
        ("twenty million", "20 million"),
    ])
    func numbers(spoken: String, written: String) {
        #expect(Self.readable(spoken) == written)
    }

    @Test func wordsKeepTheirTimesAndConfidences() {
        let raw = Self.timed("i saw twenty three birds")
        let done = ReadableText.format(raw, startsSentence: true, endsSentence: true)
        #expect(done.text == "I saw 23 birds.")
        #expect(done.words.map(\.text) == ["I", "saw", "23", "birds."])
        #expect(done.range == raw.range)
        #expect(done.words[0].range == raw.words[0].range && done.words[0].confidence == raw.words[0].confidence)
        #expect(done.words[1].range == raw.words[1].range)
        // The digits span the words they replace, with the lowest of their confidences.
        #expect(done.words[2].range == TimeRange(start: raw.words[2].range.start, end: raw.words[3].range.end))
        #expect(done.words[2].confidence == min(raw.words[2].confidence, raw.words[3].confidence))
        #expect(done.words[3].range == raw.words[4].range)
    }

    @Test func textWithoutMatchingWordsIsRewrittenToo() {
        let bare = RecognitionResult(range: TimeRange(start: 0, end: 1), text: "i have eleven")
        #expect(ReadableText.format(bare, startsSentence: true, endsSentence: true).text == "I have 11.")
        let empty = RecognitionResult(range: TimeRange(start: 0, end: 1), text: "  ")
        #expect(ReadableText.format(empty, startsSentence: true, endsSentence: true) == empty)
    }

    /// A final's alternatives (start's "alternatives") are written as the final is, the first
    /// being the final's own text, and keep their scores.
    @Test func alternativesAreWrittenAsTheFinalIs() {
        var raw = Self.timed("ever try it")
        raw.alternatives = [Alternative(text: "ever try it", score: 0), Alternative(text: "ever tried i", score: -2.5)]
        let done = ReadableText.format(raw, startsSentence: true, endsSentence: true)
        #expect(done.alternatives == [Alternative(text: "Ever try it.", score: 0), Alternative(text: "Ever tried I.", score: -2.5)])
        #expect(done.alternatives.first?.text == done.text)
    }

    /// Whatever the words, formatting never traps, keeps every word's time, and only adds.
    @Test func randomWordsNeverTrap() {
        var random = SplitMix(seed: 11)
        let vocabulary = ["one", "two", "ten", "eleven", "twenty", "hundred", "thousand", "and", "i", "i'm", "first",
                          "the", "", "é", "?", "ninety", "nine", "x"]
        for _ in 0..<2000 {
            let count = Int(random.next() % 9)
            let text = (0..<count).map { _ in vocabulary[Int(random.next() % UInt64(vocabulary.count))] }
                .filter { !$0.isEmpty }.joined(separator: " ")
            let result = Self.timed(text)
            let done = ReadableText.format(result, startsSentence: random.next() % 2 == 0, endsSentence: random.next() % 2 == 0)
            #expect(done.words.count <= result.words.count)
            #expect(done.text == done.words.map(\.text).joined(separator: " "))
            #expect(done.words.first?.range.start == result.words.first?.range.start)
            #expect(done.words.last?.range.end == result.words.last?.range.end)
        }
    }
}

@Suite struct ReadableAssemblyTests {
    @Test func sentencesEndWhereTheSpeakerPaused() {
        var t = TranscriptAssembler(options: .init(format: .readable))
        var finals: [String] = []
        func feed(_ events: [TranscriberEvent]) {
            for event in t.consume(events) { if case .final(let r, _) = event { finals.append(r.text) } }
        }
        // A pause: the end of speech comes with the final.
        feed([.speechStarted(at: 0), .final(ReadableTextTests.timed("i am here", start: 0)), .speechEnded(at: 1)])
        // Cut at the length limit while speaking: no full stop, and the next final goes on.
        feed([.speechStarted(at: 2), .final(ReadableTextTests.timed("so we went", start: 2))])
        feed([.final(ReadableTextTests.timed("on and on", start: 3)), .speechEnded(at: 4)])
        feed([.final(ReadableTextTests.timed("yes", start: 5))])
        #expect(finals == ["I am here.", "So we went", "on and on.", "Yes"])
    }

    @Test func volatilesAreReadableButNeverEndASentence() {
        var t = TranscriptAssembler(options: .init(format: .readable))
        let events = t.consume([.volatile(ReadableTextTests.timed("i saw eleven", start: 0))])
        #expect(events.count == 1)
        if case .volatile(let r, _)? = events.first { #expect(r.text == "I saw 11") }
        // The final that follows supersedes it.
        _ = t.consume([.final(ReadableTextTests.timed("i saw eleven", start: 0)), .speechEnded(at: 1)])
        #expect(t.finals.last?.text == "I saw 11.")
        #expect(t.finals.last?.words.map(\.text) == ["I", "saw", "11."])
    }

    @Test func rawKeepsTheWords() {
        var t = TranscriptAssembler(options: .init(format: .raw))
        _ = t.consume([.final(ReadableTextTests.timed("i saw eleven", start: 0)), .speechEnded(at: 1)])
        #expect(t.finals.last?.text == "i saw eleven")
    }

    /// An engine's written result (Whisper's), as it came.
    static func written(_ text: String, start: Double) -> RecognitionResult {
        var r = ReadableTextTests.timed(text, start: start)
        r.written = true
        return r
    }

    @Test func writtenTextIsKeptWhenReadable() {
        var t = TranscriptAssembler(options: .init(format: .readable))
        let v = t.consume([.volatile(Self.written("So I went", start: 0))])
        if case .volatile(let r, _)? = v.first { #expect(r.text == "So I went") } else { Issue.record("no volatile") }
        _ = t.consume([.final(Self.written("So I went, in 1990.", start: 0)), .speechEnded(at: 2)])
        #expect(t.finals.last?.text == "So I went, in 1990.")
        #expect(t.finals.last?.words.map(\.text) == ["So", "I", "went,", "in", "1990."])
        // Neither capitalized again nor given a full stop: it is the engine's own.
        _ = t.consume([.final(Self.written("and then", start: 3)), .speechEnded(at: 4)])
        #expect(t.finals.last?.text == "and then")
    }

    @Test func writtenTextIsLoweredWhenRaw() {
        var t = TranscriptAssembler(options: .init(format: .raw))
        _ = t.consume([.final(Self.written("\"Well,\" I'm ill-disposed — aren’t you?", start: 0)), .speechEnded(at: 3)])
        #expect(t.finals.last?.text == "well i'm ill-disposed aren't you")
        #expect(t.finals.last?.words.map(\.text) == ["well", "i'm", "ill-disposed", "aren't", "you"])
        // The dash that was a word of its own took its time with it.
        #expect(t.finals.last?.words.count == 5)
    }

    @Test func startChoosesTheFormat() throws {
        let base = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}"#
        guard case .start(let plain) = try ClientMessage.parse(base + "}") else { Issue.record("not a start"); return }
        #expect(plain.format == .readable)
        guard case .start(let raw) = try ClientMessage.parse(base + #","format":"raw"}"#) else { Issue.record("not a start"); return }
        #expect(raw.format == .raw)
        #expect(throws: StenoError.self) { try ClientMessage.parse(base + #","format":"fancy"}"#) }
        #expect(throws: StenoError.self) { try ClientMessage.parse(base + #","format":3}"#) }
    }
}
