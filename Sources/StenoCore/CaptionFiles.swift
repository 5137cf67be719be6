/// Caption files of cues already cut, and the time of day instead of the audio timeline.
extension Captions {
    /// One WebVTT cue as it follows a header or the previous cue: a blank line, the times, the
    /// lines (escaped).
    public static func webVTTCueText(_ cue: CaptionCue) -> String {
        var out = "\n" + timestamp(cue.range.start, separator: ".") + " --> " + timestamp(cue.range.end, separator: ".") + "\n"
        for line in cue.lines { out += escapeVTT(line) + "\n" }
        return out
    }

    /// Seconds from UTC midnight of the day of `time`: added to audio times, cue times become
    /// the time of day (UTC) when audio time 0 is `time` (a broadcast past midnight counts on:
    /// 24:00:01 …).
    public static func timeOfDay(_ time: UTCTime) -> Double {
        let ms = time.millisecondsSince1970 % 86_400_000
        return Double(ms < 0 ? ms + 86_400_000 : ms) / 1000
    }

    /// Renders finals with every time moved by `offset` seconds (e.g. `timeOfDay(startedAt)`
    /// for `?clock=wall`). The cues are cut on the audio timeline first, so they are the same
    /// cues whatever the offset.
    public static func render(_ finals: [RecognitionResult], as format: CaptionFormat, layout: CaptionLayout = CaptionLayout(),
                              offset: Double) -> String {
        guard offset != 0, offset.isFinite else { return render(finals, as: format, layout: layout) }
        func moved(_ range: TimeRange) -> TimeRange { TimeRange(start: range.start + offset, end: range.end + offset) }
        switch format {
        case .webVTT:
            return "WEBVTT\n" + cues(finals, layout: layout).map { cue in
                webVTTCueText(CaptionCue(range: moved(cue.range), lines: cue.lines))
            }.joined()
        case .srt:
            var out = ""
            for (index, cue) in cues(finals, layout: layout).enumerated() {
                let range = moved(cue.range)
                if index > 0 { out += "\n" }
                out += "\(index + 1)\n" + timestamp(range.start, separator: ",") + " --> "
                    + timestamp(range.end, separator: ",") + "\n"
                for line in cue.lines { out += line + "\n" }
            }
            return out
        case .plainText:
            return plainText(finals.map { f in
                var f = f
                f.range = moved(f.range)
                return f
            })
        case .jsonLines:
            return jsonLines(finals)
        }
    }
}
