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
