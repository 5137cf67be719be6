import Foundation
import StenoTestSupport
import Testing
@testable import StenoCore

@Suite struct CaptionsTests {
    /// Words at 0.4 s each, from `start`.
    static func timedFinal(_ text: String, start: Double) -> RecognitionResult {
        let pieces = text.split(separator: " ").map(String.init)
        var words: [Word] = []
        for (index, piece) in pieces.enumerated() {
            let t = start + Double(index) * 0.4
            words.append(word(piece, t, t + 0.3))
        }
        return result(start, start + Double(pieces.count) * 0.4, text, words)
    }

    static let short = result(1.2, 2.48, "hello world", [word("hello", 1.2, 1.6), word("world", 1.7, 2.48)])
    static let long = timedFinal(
        "this sentence is long enough that it cannot fit on one caption line and it has to be cut into more than a single cue for reading",
        start: 3)

    @Test func timestamps() {
        #expect(Captions.timestamp(0, separator: ".") == "00:00:00.000")
        #expect(Captions.timestamp(62.345, separator: ".") == "00:01:02.345")
        #expect(Captions.timestamp(62.345, separator: ",") == "00:01:02,345")
        #expect(Captions.timestamp(3723.4566, separator: ".") == "01:02:03.457")
        #expect(Captions.timestamp(360_000, separator: ",") == "100:00:00,000")
        #expect(Captions.timestamp(-1, separator: ".") == "00:00:00.000")
        #expect(Captions.timestamp(.nan, separator: ".") == "00:00:00.000")
    }

    @Test func webVTT() {
        #expect(Captions.webVTT([Self.short, Self.long]) == """
            WEBVTT

            00:00:01.200 --> 00:00:02.480
            hello world

            00:00:03.000 --> 00:00:09.300
            this sentence is long enough that it
            cannot fit on one caption line and it has

            00:00:09.400 --> 00:00:13.800
            to be cut into more than
            a single cue for reading

            """)
    }

    @Test func srt() {
        #expect(Captions.srt([Self.short, Self.long]) == """
            1
            00:00:01,200 --> 00:00:02,480
            hello world

            2
            00:00:03,000 --> 00:00:09,300
            this sentence is long enough that it
            cannot fit on one caption line and it has

            3
            00:00:09,400 --> 00:00:13,800
            to be cut into more than
            a single cue for reading

            """)
    }

    @Test func writtenCueByCueTheFilesAreTheSame() {
        // As a live client writes them: each final's cues as it comes, after the last cue's end.
        var vtt = Captions.webVTTHeader, srt = ""
        var number = 0, end = 0.0
        for final in [Self.short, Self.long] {
            for cue in Captions.cues([final], after: end) {
                number += 1
                vtt += Captions.webVTTCue(cue)
                srt += Captions.srtCue(cue, number: number)
                end = cue.range.end
            }
        }
        #expect(vtt == Captions.webVTT([Self.short, Self.long]))
        #expect(srt == Captions.srt([Self.short, Self.long]))
    }

    @Test func emptyTranscripts() {
        #expect(Captions.webVTT([]) == "WEBVTT\n")
        #expect(Captions.srt([]) == "")
        #expect(Captions.plainText([]) == "")
        #expect(Captions.jsonLines([]) == "")
    }

    @Test func plainTextIsOneFinalPerLine() {
        #expect(Captions.plainText([Self.short, result(3723.4, 3725, "  spaced \n out  ")]) == """
            [00:00:01.200 → 00:00:02.480] hello world
            [01:02:03.400 → 01:02:05.000] spaced out

            """)
    }

    @Test func jsonLinesAreTheWireEvents() {
        #expect(Captions.jsonLines([Self.short, result(3, 4, "next")], includeWords: false) == """
            {"type":"final","seq":1,"start":1.2,"end":2.48,"text":"hello world"}
            {"type":"final","seq":2,"start":3,"end":4,"text":"next"}

            """)
        let withWords = Captions.render([Self.short], as: .jsonLines)
        #expect(withWords.contains(#""words":[{"word":"hello","start":1.2,"end":1.6,"confidence":0.9}"#))
    }

    @Test func twoLineCuesAreBalanced() {
        // 49 characters: greedy would give 39 + 9; balanced gives 24 + 24.
        let text = "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj"
        let cues = Captions.cues([Self.timedFinal(text, start: 0)])
        #expect(cues.map(\.lines) == [["aaaa bbbb cccc dddd eeee", "ffff gggg hhhh iiii jjjj"]])
    }

    @Test func linesRespectTheLayout() {
        let layout = CaptionLayout(maxLineLength: 20, maxLines: 3)
        for cue in Captions.cues([Self.long], layout: layout) {
            #expect((1...3).contains(cue.lines.count))
            for line in cue.lines { #expect(line.count <= 20) }
        }
        let single = Captions.cues([Self.long], layout: CaptionLayout(maxLineLength: 42, maxLines: 1))
        #expect(single.allSatisfy { $0.lines.count == 1 && $0.lines[0].count <= 42 })
        #expect(single.flatMap(\.lines).joined(separator: " ") == Self.long.text)
    }

    @Test func aWordLongerThanALineGetsItsOwn() {
        let long = String(repeating: "x", count: 50)
        let cues = Captions.cues([result(0, 3, "a \(long) b")])
        #expect(cues.flatMap(\.lines) == ["a", long, "b"])
        #expect(cues.count == 2)
    }

    @Test func withoutWordsTimesAreInterpolated() {
        // 59 characters over 6 s; the second cue starts at character 40.
        let text = "abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi"
        let cues = Captions.cues([result(10, 16, text)], layout: CaptionLayout(maxLineLength: 20, maxLines: 2))
        #expect(cues.count == 2)
        let span: Double = 6
        let total: Double = 59
        let firstEnd: Double = 10 + span * 39 / total
        let secondStart: Double = 10 + span * 40 / total
        #expect(cues[0].range == TimeRange(start: 10, end: firstEnd))
        #expect(cues[1].range.start == secondStart)
        #expect(cues[1].range.end == 16)
    }

    @Test func cuesNeverOverlapAndStayInOrder() {
        let finals = [Self.long, Self.timedFinal("and a second rather long final that also needs more than one cue to show", start: 12),
                      result(30, 31, "")]
        var previous = 0.0
        for cue in Captions.cues(finals) {
            #expect(cue.range.start >= previous)
            #expect(cue.range.end >= cue.range.start)
            previous = cue.range.end
        }
    }

    @Test func textWordsKeepTheirPunctuationWithWordTimes() {
        let final = result(0, 1, "Hello, world!", [word("hello", 0, 0.4), word("world", 0.5, 1)])
        #expect(Captions.cues([final]).first?.lines == ["Hello, world!"])
    }

    @Test func vttEscapesMarkup() {
        #expect(Captions.webVTT([result(0, 1, "a <b> & c --> d")]).contains("a &lt;b&gt; &amp; c --&gt; d\n"))
    }

    @Test func formatsHaveTypes() {
        #expect(CaptionFormat.webVTT.contentType == "text/vtt; charset=utf-8")
        #expect(CaptionFormat.srt.fileExtension == "srt")
        #expect(Captions.render([Self.short], as: .srt) == Captions.srt([Self.short]))
        #expect(Captions.render([Self.short], as: .plainText) == Captions.plainText([Self.short]))
    }
}

/// The broadcast caption rules: cues of at least 1 s and at most 7 s, short finals merged or
/// lengthened, long ones split at word boundaries, no overlap — on every input.
@Suite struct CaptionRulesTests {
    static let rules = CaptionLayout()

    @Test func aShortFinalIsLengthenedWhenTheNextStartsLateEnough() {
        let cues = Captions.cues([result(1, 1.2, "yes", [word("yes", 1, 1.2)]), CaptionsTests.timedFinal("and then more", start: 2.5)])
        #expect(cues.map(\.range) == [TimeRange(start: 1, end: 2), TimeRange(start: 2.5, end: 3.7)])
        #expect(cues.map(\.lines) == [["yes"], ["and then more"]])
    }

    @Test func aShortFinalTakesTheNextFinalsFirstWordsWhenItFollowsClosely() {
        let next = CaptionsTests.timedFinal("I think so", start: 1.6)
        let cues = Captions.cues([result(1, 1.2, "Yes.", [word("Yes.", 1, 1.2)]), next])
        #expect(cues.count == 1)
        #expect(cues[0].lines == ["Yes. I think so"])
        #expect(cues[0].range == TimeRange(start: 1, end: next.range.end))
    }

    @Test func theLastShortCueIsLengthenedToo() {
        #expect(Captions.cues([result(4, 4.19, "yes")]).map(\.range) == [TimeRange(start: 4, end: 5)])
    }

    @Test func aLongSlowFinalIsSplitWithinTheLongestDuration() {
        // Ten words of one second each fit two lines, but not seven seconds.
        let words = (0..<10).map { word("w\($0)", Double($0), Double($0) + 0.9) }
        let cues = Captions.cues([result(0, 10, words.map(\.text).joined(separator: " "), words)])
        #expect(cues.map(\.range) == [TimeRange(start: 0, end: 6.9), TimeRange(start: 7, end: 10)])
        #expect(cues.flatMap(\.lines).joined(separator: " ") == "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9")
    }

    @Test func wordsTooFastToReadPushTheNextCueLater() {
        // 30 one-letter words in 0.3 s: three full one-line cues, each shown for a second.
        let words = (0..<30).map { word("x", Double($0) * 0.01, Double($0) * 0.01 + 0.01) }
        let layout = CaptionLayout(maxLineLength: 19, maxLines: 1)
        let cues = Captions.cues([result(0, 0.3, words.map(\.text).joined(separator: " "), words)], layout: layout)
        #expect(cues.map(\.range) == [TimeRange(start: 0, end: 1), TimeRange(start: 1, end: 2), TimeRange(start: 2, end: 3)])
    }

    @Test func aWordLongerThanTheLongestCueIsCutShort() {
        #expect(Captions.cues([result(0, 9, "ooooh", [word("ooooh", 0, 9)])]).map(\.range) == [TimeRange(start: 0, end: 7)])
    }

    @Test func givenAsTheyComeTheCuesAreTheSame() {
        var random = SplitMix(seed: 5)
        for _ in 0..<200 {
            let finals = Self.randomFinals(&random)
            var builder = CaptionCueBuilder()
            var streamed: [CaptionCue] = []
            for final in finals {
                // What a live channel knows between finals: nothing starts before this one.
                streamed += builder.settle(before: final.range.start)
                streamed += builder.add(final)
            }
            streamed += builder.finish()
            #expect(streamed == Captions.cues(finals))
        }
    }

    @Test(arguments: [CaptionLayout(), CaptionLayout(maxLineLength: 32, maxLines: 3, minDuration: 1.5, maxDuration: 6),
                      CaptionLayout(maxLineLength: 10, maxLines: 1, minDuration: 0.5, maxDuration: 3)])
    func everyCueFollowsTheRules(layout: CaptionLayout) {
        var random = SplitMix(seed: 42)
        for _ in 0..<300 {
            let finals = Self.randomFinals(&random)
            let cues = Captions.cues(finals, layout: layout)
            Self.check(cues, of: finals, layout: layout)
        }
    }

    /// The rules every cue list must follow; `minimumApplies` false for the last cue.
    static func check(_ cues: [CaptionCue], of finals: [RecognitionResult], layout: CaptionLayout,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        var previousEnd = 0.0
        for cue in cues {
            let duration = cue.range.end - cue.range.start
            #expect(cue.range.start >= previousEnd, "overlap: \(cue)", sourceLocation: sourceLocation)
            #expect(duration >= layout.minDuration - 1e-9, "too short: \(cue)", sourceLocation: sourceLocation)
            #expect(duration <= layout.maxDuration + 1e-9, "too long: \(cue)", sourceLocation: sourceLocation)
            #expect((1...layout.maxLines).contains(cue.lines.count), "\(cue.lines)", sourceLocation: sourceLocation)
            for line in cue.lines where line.contains(" ") {
                #expect(line.count <= layout.maxLineLength, "\(line)", sourceLocation: sourceLocation)
            }
            previousEnd = cue.range.end
        }
        // Every word, once, in order.
        let words = finals.flatMap { $0.text.split(whereSeparator: \.isWhitespace).map(String.init) }
        #expect(cues.flatMap { $0.lines.flatMap { $0.split(separator: " ").map(String.init) } } == words,
                sourceLocation: sourceLocation)
    }

    /// Finals as a recognizer might give them: short and long, close together and far apart,
    /// fast and slow words, some without word timings.
    static func randomFinals(_ random: inout SplitMix) -> [RecognitionResult] {
        var finals: [RecognitionResult] = []
        var t = Double(random.next() % 3000) / 1000
        for _ in 0..<Int(random.next() % 8) {
            let count = 1 + Int(random.next() % 24)
            var words: [Word] = []
            var at = t
            for _ in 0..<count {
                let length = 1 + Int(random.next() % 11)
                let text = String(repeating: "abcdefghijk".randomElement(using: &random)!, count: length)
                let duration = Double(10 + random.next() % 900) / 1000
                words.append(Word(text, range: TimeRange(start: at, end: at + duration), confidence: 0.5))
                at += duration + Double(random.next() % 300) / 1000
            }
            let text = words.map(\.text).joined(separator: " ")
            let end = words.last!.range.end
            finals.append(RecognitionResult(range: TimeRange(start: t, end: end), text: text,
                                            words: random.next() % 5 == 0 ? [] : words))
            t = end + Double(random.next() % 2500) / 1000
        }
        return finals
    }
}

/// web-client/transcript.js must cut the same cues: it is checked (Tests/browser/unit_transcript.test.mjs)
/// against Tests/browser/data/caption-rules.json, the files this Swift code writes for random
/// finals and layouts. This test checks that the file is what Captions.swift writes now;
/// `STENO_WRITE_CAPTION_CASES=1 swift test --filter CaptionParity` writes it again.
@Suite struct CaptionParityTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../browser/data/caption-rules.json").standardized

    static func cases() -> String {
        var random = SplitMix(seed: 2026)
        let layouts = [CaptionLayout(), CaptionLayout(maxLineLength: 32, maxLines: 3, minDuration: 1.5, maxDuration: 6),
                       CaptionLayout(maxLineLength: 12, maxLines: 1, minDuration: 0.8, maxDuration: 3)]
        var w = JSONWriter(capacity: 1 << 16)
        w.beginArray()
        for index in 0..<48 {
            let layout = layouts[index % layouts.count]
            var finals = CaptionRulesTests.randomFinals(&random).map(Self.onTheMillisecondGrid)
            if index % 7 == 3 {
                // Wider characters: accents made of two code points, and markup to escape.
                finals = finals.map { f in
                    var f = f
                    f.text = f.text.replacingOccurrences(of: "a", with: "e\u{301}").replacingOccurrences(of: "b", with: "<&>")
                    f.words = []
                    return f
                }
            }
            w.beginObject()
            w.key("layout")
            w.beginObject()
            w.field("maxLineLength", integer: layout.maxLineLength)
            w.field("maxLines", integer: layout.maxLines)
            w.field("minDuration", seconds: layout.minDuration)
            w.field("maxDuration", seconds: layout.maxDuration)
            w.endObject()
            w.key("finals")
            w.beginArray()
            for final in finals {
                let event = ServerEvent.final(final, includeWords: !final.words.isEmpty).encoded(seq: 1)
                w.value(try! JSONParser().parse(event.bytes))
            }
            w.endArray()
            w.field("vtt", Captions.webVTT(finals, layout: layout))
            w.field("srt", Captions.srt(finals, layout: layout))
            w.endObject()
        }
        w.endArray()
        return String(decoding: w.bytes, as: UTF8.self) + "\n"
    }

    /// Times as the wire carries them (what the page gets).
    static func onTheMillisecondGrid(_ final: RecognitionResult) -> RecognitionResult {
        func q(_ t: Double) -> Double { (t * 1000).rounded() / 1000 }
        var f = final
        f.range = TimeRange(start: q(f.range.start), end: q(f.range.end))
        f.words = f.words.map { Word($0.text, range: TimeRange(start: q($0.range.start), end: q($0.range.end)), confidence: 0.5) }
        return f
    }

    @Test func theBrowsersCasesAreWhatThisCodeWrites() throws {
        let now = Self.cases()
        if ProcessInfo.processInfo.environment["STENO_WRITE_CAPTION_CASES"] == "1" {
            try now.write(to: Self.file, atomically: true, encoding: .utf8)
        }
        let recorded = try String(contentsOf: Self.file, encoding: .utf8)
        #expect(recorded == now, "Tests/browser/data/caption-rules.json is out of date: STENO_WRITE_CAPTION_CASES=1 swift test --filter CaptionParity")
    }
}
