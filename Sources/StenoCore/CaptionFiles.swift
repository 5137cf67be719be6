/// Caption files of cues already cut, and the time of day instead of the audio timeline.
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
    /// cues whatever the offset.
    public static func render(_ finals: [RecognitionResult], as format: CaptionFormat, layout: CaptionLayout = CaptionLayout(),
                              offset: Double) -> String {
        guard offset != 0, offset.isFinite else { return render(finals, as: format, layout: layout) }
        func moved(_ range: TimeRange) -> TimeRange { TimeRange(start: range.start + offset, end: range.end + offset) }
        switch format {
        case .webVTT:
            return webVTTHeader + cues(finals, layout: layout).map { webVTTCue(CaptionCue(range: moved($0.range), lines: $0.lines)) }.joined()
        case .srt:
            return cues(finals, layout: layout).enumerated().map { index, cue in
                srtCue(CaptionCue(range: moved(cue.range), lines: cue.lines), number: index + 1)
            }.joined()
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
