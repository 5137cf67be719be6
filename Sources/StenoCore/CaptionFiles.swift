/// Caption files written as finals come (a live client) or all at once (the server's files),
/// with the same text either way, and the time of day instead of the audio timeline.
extension Captions {
    /// Seconds from UTC midnight of the day of `time`: added to audio times, cue times become
    /// the time of day (UTC) when audio time 0 is `time` (a broadcast past midnight counts on:
    /// 24:00:01 …).
    public static func timeOfDay(_ time: UTCTime) -> Double {
        let ms = time.millisecondsSince1970 % 86_400_000
        return Double(ms < 0 ? ms + 86_400_000 : ms) / 1000
    }

    /// Renders finals with every time moved by `offset` seconds (e.g. `timeOfDay(startedAt)`
    /// for `?clock=wall`). The cues are cut on the audio timeline first, so they are the same
    /// cues whatever the offset. `sccMode` chooses pop-on or roll-up SCC.
    public static func render(_ finals: [RecognitionResult], as format: CaptionFormat, layout: CaptionLayout = CaptionLayout(),
                              offset: Double, sccMode: SCCWriter.Mode = .popOn) -> String {
        switch format {
        case .plainText:
            guard offset != 0, offset.isFinite else { return plainText(finals) }
            return plainText(finals.map { f in
                var f = f
                f.range = TimeRange(start: f.range.start + offset, end: f.range.end + offset)
                return f
            })
        case .jsonLines:
            return jsonLines(finals)
        case .webVTT, .srt, .scc, .ttml:
            var writer = CaptionFileWriter(format: format, layout: layout, offset: offset, sccMode: sccMode)
            var out = writer.start()
            for final in finals { out += writer.add(final) }
            return out + writer.finish()
        }
    }
}

/// Writes one caption file cue by cue as finals come (in time order): `start` (the header),
/// `add` for each final (the cues it settles, see `CaptionCueBuilder`), `finish` (the cue
/// still waiting, and what ends the file). WebVTT, SubRip, SCC and TTML.
///
/// SCC cues are cut for CEA-608: lines of at most 32 characters, at most 4 of them, in 608's
/// characters (`CEA608.transliterated`). TTML names its language after the first final that
/// has one, so its header waits for the first cue.
public struct CaptionFileWriter: Sendable {
    public let format: CaptionFormat
    private var builder: CaptionCueBuilder
    private let offset: Double
    private var cues = 0
    private var scc: SCCWriter
    private var language: String?
    private var headerWritten = false

    public init(format: CaptionFormat, layout: CaptionLayout = CaptionLayout(), offset: Double = 0,
                sccMode: SCCWriter.Mode = .popOn) {
        self.format = format
        self.offset = offset.isFinite ? offset : 0
        builder = CaptionCueBuilder(layout: format == .scc ? layout.cea608 : layout)
        scc = SCCWriter(mode: sccMode, rollUpRows: layout.cea608.maxLines)
    }

    /// What the file starts with (TTML's comes with its first cue).
    public mutating func start() -> String {
        switch format {
        case .webVTT: headerWritten = true; return Captions.webVTTHeader
        case .scc: headerWritten = true; return SCCWriter.header
        default: return ""
        }
    }

    /// The next final: the text of the cues it settles.
    public mutating func add(_ final: RecognitionResult) -> String {
        if language == nil { language = final.language }
        return written(builder.add(format == .scc ? Self.in608(final) : final))
    }

    /// No final will start before `time`: the waiting cue, if the next final can no longer join it.
    public mutating func settle(before time: Double) -> String {
        written(builder.settle(before: time))
    }

    /// No more finals (for now: a live file may go on with `add`, but a TTML file is closed).
    public mutating func finish() -> String {
        var out = written(builder.finish())
        switch format {
        case .scc: out += scc.finish()
        case .ttml: out = ttmlHeader() + out + TTML.footer
        default: break
        }
        return out
    }

    private mutating func written(_ settled: [CaptionCue]) -> String {
        var out = ""
        for var cue in settled {
            cues += 1
            cue.range = TimeRange(start: cue.range.start + offset, end: cue.range.end + offset)
            switch format {
            case .webVTT: out += Captions.webVTTCue(cue)
            case .srt: out += Captions.srtCue(cue, number: cues)
            case .scc: out += scc.add(cue)
            case .ttml: out += ttmlHeader() + TTML.paragraph(cue, number: cues)
            case .plainText, .jsonLines: break
            }
        }
        return out
    }

    private mutating func ttmlHeader() -> String {
        guard !headerWritten else { return "" }
        headerWritten = true
        return TTML.header(language: language ?? "")
    }

    /// A final in CEA-608's characters.
    public static func in608(_ final: RecognitionResult) -> RecognitionResult {
        var final = final
        final.text = CEA608.transliterated(final.text)
        final.words = final.words.map { word in
            var word = word
            word.text = CEA608.transliterated(word.text)
            return word
        }
        return final
    }
}

extension CaptionLayout {
    /// The layout within what CEA-608 shows: lines of at most 32 characters, at most 4 lines.
    public var cea608: CaptionLayout {
        CaptionLayout(maxLineLength: min(maxLineLength, CEA608.columns), maxLines: min(maxLines, CEA608.maxRows),
                      minDuration: minDuration, maxDuration: maxDuration)
    }
}
