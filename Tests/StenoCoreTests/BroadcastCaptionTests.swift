import Foundation
import StenoTestSupport
import Testing
@testable import StenoCore

/// CEA-608 pairs, SCC files and TTML documents, in memory (tests that read them back with
/// ffmpeg and ttconv run against a real server: StenoServerTests' BroadcastFileTests).
@Suite struct BroadcastCaptionTests {
    @Test func pairsHaveOddParity() {
        for byte in UInt8(0)...UInt8(0x7F) {
            #expect(CEA608.odd(byte).nonzeroBitCount % 2 == 1)
            #expect(CEA608.odd(byte) & 0x7F == byte)
        }
        // The codes every SCC file has, as they are written.
        #expect(CEA608.command(.resumeCaptionLoading).map(CEA608.hex) == ["9420", "9420"])
        #expect(CEA608.command(.eraseNonDisplayedMemory).map(CEA608.hex) == ["94ae", "94ae"])
        #expect(CEA608.command(.endOfCaption).map(CEA608.hex) == ["942f", "942f"])
        #expect(CEA608.command(.eraseDisplayedMemory).map(CEA608.hex) == ["942c", "942c"])
        #expect(CEA608.command(.carriageReturn).map(CEA608.hex) == ["94ad", "94ad"])
        #expect(CEA608.command(.rollUp2).map(CEA608.hex) == ["9425", "9425"])
    }

    @Test func positionsAddressRowsAndColumns() {
        #expect(CEA608.position(row: 15, column: 0).map(CEA608.hex) == ["9470", "9470"])
        #expect(CEA608.position(row: 14, column: 0).map(CEA608.hex) == ["94d0", "94d0"])
        #expect(CEA608.position(row: 1, column: 4).map(CEA608.hex) == ["9152", "9152"])
        // Column 6: the preamble's column 4, then a tab offset of 2.
        #expect(CEA608.position(row: 15, column: 6).map(CEA608.hex) == ["94f2", "94f2", "97a2", "97a2"])
    }

    @Test func textIsWrittenInThe608CharacterSet() {
        // Two characters a pair, the last padded with a null.
        #expect(CEA608.pairs(writing: "Hi!").map(CEA608.hex) == ["c8e9", "a180"])
        // á is in the basic set, at the code of '*'.
        #expect(CEA608.pairs(writing: "á").map(CEA608.hex) == ["2a80"])
        // ♪ is a special character: a pair of its own, twice.
        #expect(CEA608.pairs(writing: "♪").map(CEA608.hex) == ["9137", "9137"])
        // Ü is extended: the plain U first, for decoders without the extended set, then Ü twice.
        #expect(CEA608.pairs(writing: "Ü").map(CEA608.hex) == ["d580", "92a4", "92a4"])
        #expect(CEA608.transliterated("Łódź “quoted” – ‘ok’… Привет") == "Lódz “quoted” - ‘ok'... ??????")
        #expect(CEA608.transliterated("a*b") == "a*b")
    }

    @Test func dropFrameTimecodeKeepsToTheClock() {
        #expect(SCCWriter.timecode(frame: 0) == "00:00:00;00")
        #expect(SCCWriter.timecode(frame: 29) == "00:00:00;29")
        #expect(SCCWriter.timecode(frame: 1799) == "00:00:59;29")
        // Frames 0 and 1 of minute 1 are not numbered …
        #expect(SCCWriter.timecode(frame: 1800) == "00:01:00;02")
        // … but those of minute 10 are.
        #expect(SCCWriter.timecode(frame: 17_982) == "00:10:00;00")
        // An hour of 29.97 fps video is an hour of timecode.
        #expect(SCCWriter.timecode(frame: SCCWriter.frame(3600)) == "01:00:00;00")
        // Drop-frame timecode runs 3 frames (86 ms) a day behind the clock.
        #expect(SCCWriter.timecode(frame: SCCWriter.frame(86_400 + 1)) == "24:00:01;03")
    }

    @Test func popOnCaptionsShowAtTheirStartAndAreErasedAtTheirEnd() {
        var writer = SCCWriter()
        let first = CaptionCue(range: TimeRange(start: 2, end: 4), lines: ["Hello there,", "how are you?"])
        let second = CaptionCue(range: TimeRange(start: 4, end: 5), lines: ["Fine."])
        let third = CaptionCue(range: TimeRange(start: 9, end: 10), lines: ["Bye."])
        let text = SCCWriter.header + writer.add(first) + writer.add(second) + writer.add(third) + writer.finish()
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines[0] == "Scenarist_SCC V1.0")
        // The first caption's "end of caption" is sent at frame 60 (2 s) (and once more after).
        let load = lines[1].split(separator: "\t")
        let pairs = load[1].split(separator: " ")
        #expect(pairs.prefix(4) == ["9420", "9420", "94ae", "94ae"])
        #expect(pairs.suffix(2) == ["942f", "942f"])
        #expect(SCCWriter.timecode(frame: 60 - pairs.count + 2) == String(load[0]))
        // The second replaces the first at 4 s: no erasing between them; it is erased at 5 s,
        // while the third loads, which shows at 9 s.
        #expect(text.components(separatedBy: "942c 942c").count == 3)
        #expect(lines.last!.hasPrefix(SCCWriter.timecode(frame: SCCWriter.frame(10))))
        // Every line starts after the previous one's last pair.
        var next = 0
        for line in lines.dropFirst() {
            let parts = line.split(separator: "\t")
            let frame = Self.frame(of: String(parts[0]))
            #expect(frame >= next)
            next = frame + parts[1].split(separator: " ").count
        }
    }

    @Test func crowdedCaptionsShowLateRatherThanOverlap() {
        var writer = SCCWriter()
        var text = ""
        for index in 0..<20 {
            let start = Double(index) * 0.2
            text += writer.add(CaptionCue(range: TimeRange(start: start, end: start + 0.2),
                                          lines: ["a line of thirty-two characters!", "and another of the same length!!"]))
        }
        text += writer.finish()
        var next = 0
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "\t")
            let frame = Self.frame(of: String(parts[0]))
            #expect(frame >= next)
            next = frame + parts[1].split(separator: " ").count
        }
    }

    @Test func rollUpWritesEachLineOnTheBottomRow() {
        var writer = SCCWriter(mode: .rollUp, rollUpRows: 3)
        let text = writer.add(CaptionCue(range: TimeRange(start: 1, end: 3), lines: ["one line", "two lines"])) + writer.finish()
        let lines = text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasSuffix("\t9426 9426 94ad 94ad 9470 9470 ef6e e520 ece9 6ee5"))
        #expect(lines[1].hasPrefix(SCCWriter.timecode(frame: SCCWriter.frame(2))))
        #expect(lines[2].hasSuffix("942c 942c"))
    }

    @Test func sccFilesCutCuesFor608() {
        let long = CaptionsTests.long
        let scc = Captions.render([long], as: .scc, layout: CaptionLayout(maxLineLength: 42, maxLines: 2))
        #expect(scc.hasPrefix("Scenarist_SCC V1.0\n\n"))
        let cues = Captions.cues([long], layout: CaptionLayout().cea608)
        #expect(cues.allSatisfy { $0.lines.allSatisfy { $0.count <= 32 } })
        #expect(scc.components(separatedBy: "942f 942f").count == cues.count + 1)
    }

    @Test func ttmlDocuments() {
        var final = CaptionsTests.short
        final.language = "en"
        let ttml = Captions.render([final, result(5, 6, "a <b> & 'c'")], as: .ttml)
        #expect(ttml.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<tt xmlns=\"http://www.w3.org/ns/ttml\""))
        #expect(ttml.contains("xml:lang=\"en\""))
        #expect(ttml.contains("<p xml:id=\"c1\" begin=\"00:00:01.200\" end=\"00:00:02.480\"><span>hello world</span></p>\n"))
        #expect(ttml.contains("<span>a &lt;b&gt; &amp; &apos;c&apos;</span>"))
        #expect(ttml.hasSuffix("</div>\n</body>\n</tt>\n"))
        // No finals: an empty document still.
        let empty = Captions.render([], as: .ttml)
        #expect(empty.contains("xml:lang=\"\"") && empty.hasSuffix("</tt>\n"))
    }

    @Test func filesWrittenLiveAreTheFilesRenderedAtOnce() {
        let finals = [CaptionsTests.short, CaptionsTests.long, result(40, 41, "the end")]
        for format in [CaptionFormat.webVTT, .srt, .scc, .ttml] {
            var writer = CaptionFileWriter(format: format, offset: 3600)
            var live = writer.start()
            for final in finals { live += writer.add(final) }
            live += writer.finish()
            #expect(live == Captions.render(finals, as: format, offset: 3600), "\(format)")
        }
        #expect(Captions.render(finals, as: .webVTT, offset: 0) == Captions.webVTT(finals))
    }

    static func frame(of timecode: String) -> Int {
        let parts = timecode.split(whereSeparator: { $0 == ":" || $0 == ";" }).compactMap { Int($0) }
        let minutes = parts[0] * 60 + parts[1]
        let numbered = (minutes * 60 + parts[2]) * 30 + parts[3]
        return numbered - 2 * (minutes - minutes / 10)
    }

    /// Writes sample files for reading them back by hand (STENO_SAMPLE_DIR).
    @Test func samples() throws {
        guard let dir = ProcessInfo.processInfo.environment["STENO_SAMPLE_DIR"] else { return }
        let finals = [CaptionsTests.short, CaptionsTests.long, result(40, 41, "Ünïcödé — ♪ “quotes” naïve café")]
        for format in [CaptionFormat.scc, .ttml] {
            try Captions.render(finals, as: format).write(toFile: dir + "/sample." + format.rawValue, atomically: true, encoding: .utf8)
        }
        try Captions.render(finals, as: .scc, offset: 0, sccMode: .rollUp).write(toFile: dir + "/rollup.scc", atomically: true, encoding: .utf8)
    }
}
